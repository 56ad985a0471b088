package cli

import "fmt"

// Size shows a byte count in binary units.
func Size(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%d GiB", n>>30)
	case n >= 1<<20:
		return fmt.Sprintf("%g MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%g KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
