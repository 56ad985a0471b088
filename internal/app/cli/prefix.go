package cli

import "io"

// PrefixWriter writes each write (a line) to W with Prefix before it.
type PrefixWriter struct {
	W      io.Writer
	Prefix string
}

func (p PrefixWriter) Write(b []byte) (int, error) {
	if _, err := io.WriteString(p.W, p.Prefix+string(b)); err != nil {
		return 0, err
	}
	return len(b), nil
}
