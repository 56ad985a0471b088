//go:build !linux

package layer

import (
	"errors"
	"io"
)

// Apply applies the layer read from r onto the directory dir. It needs
// openat2, so it only works on Linux; elsewhere it fails.
func Apply(dir string, r io.Reader, lim Limits) (Stats, error) {
	return Stats{}, errors.New("layer: applying image layers needs Linux (openat2)")
}
