package cli

import (
	"fmt"
	"math"
)

// Size shows a byte count in binary units: exact when it has at most one
// decimal in them (64 MiB, 1.5 KiB), else to one decimal (1.1 MiB).
func Size(n int64) string {
	unit := func(v float64, name string) string {
		if v == math.Round(v*10)/10 {
			return fmt.Sprintf("%g %s", v, name)
		}
		return fmt.Sprintf("%.1f %s", v, name)
	}
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%d GiB", n>>30)
	case n >= 1<<20:
		return unit(float64(n)/(1<<20), "MiB")
	case n >= 1<<10:
		return unit(float64(n)/(1<<10), "KiB")
	}
	return fmt.Sprintf("%d B", n)
}
