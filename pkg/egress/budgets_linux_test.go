package egress

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"testing"
)

// TestSetBudgets: budgets changed while the run goes on keep what each
// entry has moved: a budget lowered below it refuses new connections at
// once, one raised lets them go on up to the new bound, and one dropped
// bounds nothing.
func TestSetBudgets(t *testing.T) {
	n := newSandboxNet(t, DefaultMTU)
	const mib = 1 << 20
	src := blaster(t, 2*mib)
	port := portOf(t, src.Addr().String())
	entry := fmt.Sprintf("%s:%d", HostInternalName, port)
	e, err := Start(context.Background(), n.tun, Config{HostAddrs: []netip.Addr{}, Policy: mustPolicy(t, entry), Budgets: map[string]int64{entry: 3 * mib}})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	read := func() result { return py(t, n, "read", HostInternalAddr, fmt.Sprint(port)) }
	if r := read(); !r.OK || r.N != 2*mib {
		t.Fatalf("2 MiB within a budget of 3 MiB: %+v", r)
	}
	e.SetBudgets(map[string]int64{entry: mib}) // 2 MiB moved already
	failsFast(t, py(t, n, "connect", HostInternalAddr, fmt.Sprint(port)), "a connection past a lowered budget")
	if d, ok := findDest(e.Stats(), "tcp", HostInternalName, port, false); !ok || !strings.Contains(d.Reason, "byte budget of "+entry) {
		t.Errorf("the refused connection's record: %+v", d)
	}
	e.SetBudgets(map[string]int64{entry: 5 * mib})
	if r := read(); !r.OK || r.N != 2*mib {
		t.Fatalf("2 MiB more within a budget raised to 5 MiB: %+v", r)
	}
	if r := read(); r.OK || r.N > mib {
		t.Fatalf("2 MiB more with 1 MiB of the budget left: %+v", r)
	}
	e.SetBudgets(nil)
	if r := read(); !r.OK || r.N != 2*mib {
		t.Fatalf("with the budget dropped: %+v", r)
	}
}
