package cli

import "testing"

func TestSize(t *testing.T) {
	for n, want := range map[int64]string{
		0: "0 B", 1000: "1000 B", 1536: "1.5 KiB", 64 << 20: "64 MiB", 1145915: "1.1 MiB",
		3 << 30: "3 GiB", 3<<30 + 1<<20: "3073 MiB", 1<<20 + 1: "1.0 MiB",
	} {
		if got := Size(n); got != want {
			t.Errorf("Size(%d) = %q, want %q", n, got, want)
		}
	}
}
