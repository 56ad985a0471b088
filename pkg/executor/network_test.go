package executor

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// netListener serves "TOKEN:PORT" over HTTP on the host's 127.0.0.1 until
// the test ends, and returns its port.
func netListener(t *testing.T, token string) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "%s:%d", token, port)
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return port
}

// TestNetworkAllowList: a run with network access reaches exactly what
// its allow-list names, from every kind of client: Python's urllib and raw
// sockets, Node's fetch (no proxy variables), bash's /dev/tcp, curl, a Go
// program. What the list leaves out fails fast (a port not listed, a name
// not listed, another sandbox's address, the metadata address, a name that
// resolves to loopback), and the result lists every destination. A run
// without network access has none.
func TestNetworkAllowList(t *testing.T) {
	token := "tok-" + newID()
	a, b := netListener(t, token), netListener(t, token)
	// loopback.test resolves to the host's 127.0.0.1: allowed by name, it
	// must still be refused (a name never opens loopback).
	resolver := func(ctx context.Context, host string) ([]netip.Addr, error) {
		if host == "loopback.test" {
			return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
		}
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	t.Run("native", func(t *testing.T) {
		x, err := New(Config{DataDir: t.TempDir(), CacheDir: testCache, Engine: testExec.engine, CompileCacheBytes: -1,
			Network: NetworkConfig{Resolver: resolver}})
		if err != nil {
			t.Fatal(err)
		}
		testNetworkAllowList(t, x, "", token, a, b)
	})
	// Under gVisor the same: its network stack gets tun0's address and
	// routes, and the same egress serves it.
	t.Run("gvisor", func(t *testing.T) {
		x := gvisorExecutor(t, Config{CacheDir: testCache, Network: NetworkConfig{Resolver: resolver}})
		testNetworkAllowList(t, x, IsolationGVisor, token, a, b)
	})
}

func testNetworkAllowList(t *testing.T, x *Executor, isolation, token string, a, b int) {
	allow := []string{fmt.Sprintf("host.sandbox.internal:%d", a), fmt.Sprintf("loopback.test:%d", a)}
	want := fmt.Sprintf("%s:%d", token, a)
	run := func(lang, code string, args ...string) *Result {
		t.Helper()
		start := time.Now()
		res := executeWith(t, x, &Request{Language: lang, Code: []byte(code), Args: args, Network: allow, Isolation: isolation, Limits: Limits{WallTime: 60 * time.Second}})
		if took := time.Since(start); took > 45*time.Second {
			t.Errorf("%s took %v: something hung", lang, took)
		}
		if res.Isolation != isolation {
			t.Errorf("%s ran under %q", lang, res.Isolation)
		}
		return res
	}
	ports := []string{fmt.Sprint(a), fmt.Sprint(b)}

	py := `
import socket, sys, urllib.request
def get(url):
    try:
        return "got " + urllib.request.urlopen(url, timeout=10).read().decode()
    except Exception as e:
        return "failed " + type(e).__name__
a, b = sys.argv[1], sys.argv[2]
print(get("http://host.sandbox.internal:%s/" % a))
print(get("http://host.sandbox.internal:%s/" % b))
s = socket.create_connection(("host.sandbox.internal", int(a)), timeout=10)
s.sendall(b"GET / HTTP/1.0\r\n\r\n")
print("socket", s.makefile("rb").read().decode().split("\r\n\r\n")[-1])
for host in ("not-listed.test", "loopback.test"):
    try:
        print(host, get("http://%s:%s/" % (host, a)))
    except Exception as e:
        print(host, "failed", type(e).__name__)
for ip in ("10.77.0.3", "169.254.169.254", "127.0.0.1", "fd5b:77::3", "fd00:ec2::254"):
    try:
        socket.create_connection((ip, int(a)), timeout=10)
        print(ip, "connected")
    except Exception as e:
        print(ip, "failed")
try:
    for line in open("/proc/net/if_inet6").read().splitlines():
        f = line.split()
        if f[5] == "tun0" and not f[0].startswith("fe80"):
            print("tun0", f[0], int(f[2], 16))
except OSError:
    pass
for fam, typ, proto in ((socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_TCP), (socket.AF_PACKET, socket.SOCK_RAW, 0)):
    try:
        socket.socket(fam, typ, proto)
        print("a raw socket")
    except OSError:
        print("no raw socket")
`
	res := run("python", py, ports...)
	expectCompleted(t, res, "got "+want+"\nfailed URLError\nsocket "+want+"\nnot-listed.test failed URLError\nloopback.test failed URLError\n10.77.0.3 failed\n169.254.169.254 failed\n127.0.0.1 failed\nfd5b:77::3 failed\nfd00:ec2::254 failed\ntun0 fd5b0077000000000000000000000002 64\nno raw socket\nno raw socket\n")
	n := res.Network
	if n == nil || n.Allowed == 0 || n.Denied == 0 || n.BytesIn == 0 {
		t.Fatalf("network report: %+v", n)
	}
	seen := map[string]bool{}
	for _, d := range n.Destinations {
		seen[fmt.Sprintf("%s %s %d %v", d.Protocol, d.Host, d.Port, d.Allowed)] = true
	}
	for _, k := range []string{
		fmt.Sprintf("tcp host.sandbox.internal %d true", a), fmt.Sprintf("tcp host.sandbox.internal %d false", b),
		"dns not-listed.test 0 false", fmt.Sprintf("tcp 10.77.0.3 %d false", a), fmt.Sprintf("tcp 169.254.169.254 %d false", a),
		fmt.Sprintf("tcp fd5b:77::3 %d false", a), fmt.Sprintf("tcp fd00:ec2::254 %d false", a),
	} {
		if !seen[k] {
			t.Errorf("the report lacks %q: %+v", k, n.Destinations)
		}
	}

	js := `fetch("http://host.sandbox.internal:" + process.argv[2] + "/").then(r => r.text()).then(t => console.log("got " + t)).catch(e => console.log("failed", e.name));`
	expectCompleted(t, run("javascript", js, ports...), "got "+want+"\n")

	sh := `exec 3<>/dev/tcp/host.sandbox.internal/$1 && printf 'GET / HTTP/1.0\r\n\r\n' >&3 && echo "got $(tail -n 1 <&3)"
(exec 4<>/dev/tcp/host.sandbox.internal/$2) 2>/dev/null && echo "unlisted port connected" || echo "unlisted port refused"`
	expectCompleted(t, run("bash", sh, ports...), "got "+want+"\nunlisted port refused\n")

	if _, err := exec.LookPath("curl"); err == nil {
		expectCompleted(t, run("bash", `curl -s --max-time 10 "http://host.sandbox.internal:$1/"; echo`, ports...), want+"\n")
	}

	goProg := `package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
)

func main() {
	r, err := http.Get("http://host.sandbox.internal:" + os.Args[1] + "/")
	if err != nil {
		fmt.Println("failed", err)
		return
	}
	b, _ := io.ReadAll(r.Body)
	fmt.Println("got " + string(b))
}
`
	if _, _, err := x.resolve("go", ""); err == nil {
		expectCompleted(t, run("go", goProg, ports...), "got "+want+"\n")
	}

	// No allow-list, no network.
	res = executeWith(t, x, &Request{Language: "python", Code: []byte(py), Args: ports, Isolation: isolation})
	if strings.Contains(res.Stdout, token) || res.Network != nil {
		t.Errorf("a run without network reached the host: %q %+v", res.Stdout, res.Network)
	}
}

// A request's allow-list is checked before anything runs; network does
// not go with test cases nor with interpreter cells.
func TestNetworkRequestRefused(t *testing.T) {
	for _, req := range []*Request{
		{Language: "python", Code: []byte("1"), Network: []string{"http://x.org/path"}},
		{Language: "python", Code: []byte("1"), Network: []string{"x.org:99999"}},
		{Language: "python", Code: []byte("1"), Network: []string{"x.org"}, TestCases: []TestCase{{InputData: "1"}}},
	} {
		var inv *InvalidRequestError
		if _, err := testExec.Execute(context.Background(), req); !errors.As(err, &inv) {
			t.Errorf("%v: %v, want an invalid request", req.Network, err)
		}
	}
}
