package e2b

import (
	"encoding/json"
	"net/http"
	"strings"

	"github.com/sandbox-run/sandbox-run/pkg/runner"
)

// LiveRoute is r's call on live sandboxes, for an API node of a cluster
// that sends such calls to the worker holding the sandbox (pkg/api's LiveRouter):
// the control plane's creates, lists and calls on one sandbox (by the
// caller's key), and a sandbox's own calls (envd, the code interpreter,
// its ports: by its access token, which the worker checks).
func (d *Door) LiveRoute(r *http.Request) (runner.LiveRoute, bool) {
	gone := func(w http.ResponseWriter, msg string) {
		// 502 is how the SDKs learn that a sandbox is gone.
		writeError(w, http.StatusBadGateway, msg)
	}
	if _, id, ok := portHost(r.Host); ok {
		return runner.LiveRoute{Op: runner.LiveCall, ID: id, Missing: gone}, true
	}
	p := r.URL.Path
	for _, prefix := range Public {
		if p == prefix || strings.HasSuffix(prefix, "/") && strings.HasPrefix(p, prefix) {
			id := r.Header.Get("E2b-Sandbox-Id")
			if id == "" {
				id = r.URL.Query().Get("sandbox_id")
			}
			if id == "" {
				return runner.LiveRoute{}, false // the door here says what is missing
			}
			return runner.LiveRoute{Op: runner.LiveCall, ID: id, Missing: gone}, true
		}
	}
	switch {
	case p == "/v2/sandboxes" && r.Method == http.MethodPost:
		return runner.LiveRoute{Op: runner.LiveCreate, Keyed: true}, true
	case (p == "/v2/sandboxes" || p == "/sandboxes") && r.Method == http.MethodGet:
		return runner.LiveRoute{Op: runner.LiveList, Keyed: true, Join: joinLists}, true
	}
	for _, prefix := range []string{"/sandboxes/", "/v2/sandboxes/"} {
		if rest, ok := strings.CutPrefix(p, prefix); ok {
			if id, _, _ := strings.Cut(rest, "/"); id != "" {
				return runner.LiveRoute{Op: runner.LiveCall, ID: id, Keyed: true}, true
			}
		}
	}
	return runner.LiveRoute{}, false
}

// joinLists joins the workers' lists, each a JSON array, as one.
func joinLists(bodies [][]byte) ([]byte, error) {
	all := []json.RawMessage{}
	for _, b := range bodies {
		var l []json.RawMessage
		if err := json.Unmarshal(b, &l); err != nil {
			return nil, err
		}
		all = append(all, l...)
	}
	return json.Marshal(all)
}
