package client

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"testing"

	"github.com/sandbox-run/sandbox-run/pkg/api"
	"github.com/sandbox-run/sandbox-run/pkg/wire"
)

// The Go client asks for network access with the request's Network and
// reads what the run tried from the result's.
func TestExecuteWithNetwork(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "from-host") })}
	go srv.Serve(ln)
	defer srv.Close()
	allow := fmt.Sprintf("host.sandbox.internal:%d", port)
	url := serve(t, newExecutor(t), func(c *api.Config) { c.Network.Allow = []string{allow} })
	res, err := New(url).Execute(context.Background(), &wire.ExecuteRequest{Language: "python",
		Code:    fmt.Sprintf("import urllib.request\nprint(urllib.request.urlopen('http://host.sandbox.internal:%d/', timeout=10).read().decode())", port),
		Network: &wire.NetworkRequest{Allow: []string{allow}}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Stdout != "from-host\n" || res.Network == nil || res.Network.Allowed == 0 {
		t.Errorf("stdout %q, network %+v", res.Stdout, res.Network)
	}
}
