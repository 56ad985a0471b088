package egress

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestIntercept: with Config.Intercept, an allowed connection is served by
// it instead of the plain copy, with where it goes (the name the run
// resolved, or host.sandbox.internal); what it moves counts in the run's
// bytes and the destination's, and the run's byte limit holds for it.
func TestIntercept(t *testing.T) {
	n := newSandboxNet(t, DefaultMTU)
	ln := serveTCP(t, func(c net.Conn) {
		line, _ := bufio.NewReader(c).ReadString('\n')
		fmt.Fprintf(c, "upstream got %s", line)
	})
	port := portOf(t, ln.Addr().String())
	var mu sync.Mutex
	var seen []Target
	cfg := Config{HostAddrs: []netip.Addr{}, Policy: mustPolicy(t, fmt.Sprintf("%s:%d", HostInternalName, port)),
		Intercept: func(ctx context.Context, sandbox, host net.Conn, to Target) {
			mu.Lock()
			seen = append(seen, to)
			mu.Unlock()
			// What the program sends goes up changed; the answer comes
			// back as it is.
			go func() {
				b, _ := bufio.NewReader(sandbox).ReadString('\n')
				io.WriteString(host, strings.ToUpper(b))
			}()
			io.Copy(sandbox, host)
		}}
	e, err := Start(context.Background(), n.tun, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	r := py(t, n, "get", fmt.Sprintf("http://%s:%d/path", HostInternalName, port))
	// urllib's request line, changed by the interceptor, came back as the
	// body of a response it cannot parse: the error carries it.
	if !strings.Contains(r.Error+r.Body, "GET /PATH HTTP/1.1") {
		t.Errorf("the upstream did not get the intercepted request: %+v", r)
	}
	mu.Lock()
	if len(seen) != 1 || len(seen[0].Names) != 1 || seen[0].Names[0] != HostInternalName || seen[0].Port != port || seen[0].Addr.String() != HostInternalAddr {
		t.Errorf("targets: %+v", seen)
	}
	mu.Unlock()
	st := e.Stats()
	d, ok := findDest(st, "tcp", HostInternalName, port, true)
	if !ok || st.BytesOut == 0 || st.BytesIn == 0 || d.BytesOut != st.BytesOut || d.BytesIn != st.BytesIn {
		t.Errorf("bytes not counted: %+v", st)
	}
}

// TestInterceptByteLimit: an interceptor cannot move more than the run's
// byte limit: past it the connection ends and the limit is recorded.
func TestInterceptByteLimit(t *testing.T) {
	n := newSandboxNet(t, DefaultMTU)
	const limit = 1 << 20
	ln := blaster(t, 16<<20)
	port := portOf(t, ln.Addr().String())
	cfg := Config{HostAddrs: []netip.Addr{}, MaxBytesIn: limit, Policy: mustPolicy(t, fmt.Sprintf("%s:%d", HostInternalName, port)),
		Intercept: func(ctx context.Context, sandbox, host net.Conn, to Target) { io.Copy(sandbox, host) }}
	e, err := Start(context.Background(), n.tun, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	r := py(t, n, "read", HostInternalAddr, fmt.Sprint(port))
	if r.N > limit {
		t.Errorf("read %d bytes past a limit of %d", r.N, limit)
	}
	if st := e.Stats(); st.Limit != "bytes_in" || st.BytesIn != limit {
		t.Errorf("stats: limit %q, bytes in %d", st.Limit, st.BytesIn)
	}
}

// TestSetPolicy: a policy changed while the run goes on decides new
// connections at once, and resets the open ones it no longer allows
// (recorded as denied, why said); what it still allows goes on.
func TestSetPolicy(t *testing.T) {
	n := newSandboxNet(t, DefaultMTU)
	accepted := make(chan net.Conn, 4)
	hold := serveTCP(t, func(c net.Conn) { accepted <- c; time.Sleep(time.Minute) })
	other := serveTCP(t, func(c net.Conn) {})
	a, b := portOf(t, hold.Addr().String()), portOf(t, other.Addr().String())
	e, err := Start(context.Background(), n.tun, Config{HostAddrs: []netip.Addr{}, Policy: mustPolicy(t, fmt.Sprintf("%s:%d", HostInternalName, a))})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	done := make(chan result, 1)
	go func() { done <- py(t, n, "read", HostInternalAddr, fmt.Sprint(a)) }()
	select {
	case <-accepted:
	case <-time.After(30 * time.Second):
		t.Fatal("the connection to the allowed port did not arrive")
	}
	e.SetPolicy(mustPolicy(t, fmt.Sprintf("%s:%d", HostInternalName, b)))
	select {
	case r := <-done:
		if r.OK {
			t.Errorf("the open connection the new policy refuses went on: %+v", r)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the open connection the new policy refuses was not reset")
	}
	d, ok := findDest(e.Stats(), "tcp", HostInternalName, a, false)
	if !ok || !strings.Contains(d.Reason, "the policy changed") {
		t.Errorf("the reset connection's record: %+v", d)
	}
	failsFast(t, py(t, n, "connect", HostInternalAddr, fmt.Sprint(a)), "a connection the new policy refuses")
	if r := py(t, n, "connect", HostInternalAddr, fmt.Sprint(b)); !r.OK {
		t.Errorf("a connection the new policy allows: %+v", r)
	}
}

// TestBudgets: a byte budget bounds what the connections of one allow
// entry move: past it they are reset and new ones refused, why said;
// another entry's connections go on, and the run's totals are not a
// limit reached.
func TestBudgets(t *testing.T) {
	n := newSandboxNet(t, DefaultMTU)
	const budget = 1 << 20
	big, small := blaster(t, 16<<20), blaster(t, 2<<20)
	a, b := portOf(t, big.Addr().String()), portOf(t, small.Addr().String())
	ea, eb := fmt.Sprintf("%s:%d", HostInternalName, a), fmt.Sprintf("%s:%d", HostInternalName, b)
	e, err := Start(context.Background(), n.tun, Config{HostAddrs: []netip.Addr{}, Policy: mustPolicy(t, ea, eb), Budgets: map[string]int64{ea: budget}})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if r := py(t, n, "read", HostInternalAddr, fmt.Sprint(a)); r.OK || r.N > budget {
		t.Errorf("reading 16 MiB within a budget of 1 MiB: %+v", r)
	}
	failsFast(t, py(t, n, "connect", HostInternalAddr, fmt.Sprint(a)), "a connection past the entry's budget")
	if r := py(t, n, "read", HostInternalAddr, fmt.Sprint(b)); !r.OK || r.N != 2<<20 {
		t.Errorf("another entry's connection: %+v", r)
	}
	st := e.Stats()
	d, ok := findDest(st, "tcp", HostInternalName, a, false)
	if !ok || !strings.Contains(d.Reason, "byte budget of "+ea) {
		t.Errorf("the refused connection's record: %+v", d)
	}
	if da, _ := findDest(st, "tcp", HostInternalName, a, true); da.BytesIn > budget {
		t.Errorf("the entry moved %d bytes past its budget", da.BytesIn)
	}
	if st.Limit != "" {
		t.Errorf("a run-wide limit: %q", st.Limit)
	}
}
