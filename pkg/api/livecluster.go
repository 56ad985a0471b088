package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"strings"
	"sync"

	"github.com/sandbox-run/sandbox-run/pkg/config"
	"github.com/sandbox-run/sandbox-run/pkg/runner"
	"github.com/sandbox-run/sandbox-run/pkg/wire"
)

// Live sandboxes in a cluster (Cluster.Live). An API node keeps none: each
// lives on a worker, whose run service keeps it as a single server's does
// and whose server serves its calls, through every door, over tunnels the
// API node opens. The API node authenticates a keyed call itself and
// forwards it with its caller (Forwarded: the tunnel's open, which the
// API node signs, says who); a call that carries its own proof (a
// sandbox's access token: E2B's envd, a sandbox's ports) goes on as it
// came, for the worker to check. A create goes to the worker that
// LiveCluster.Place chooses; a list asks each worker that holds one of
// the caller's sandboxes and joins their answers. A sandbox whose worker
// is gone is gone, with an error that says so.

// LiveCluster is where an API node's live sandboxes are: on the workers
// of its cluster (internal/app/clusternode, over pkg/cluster).
type LiveCluster interface {
	// Place chooses the worker of a new sandbox.
	Place(ctx context.Context) (worker string, err error)
	// Locate finds sandbox id's worker and owner: ErrNoLiveSandbox when
	// there is no such sandbox, an error wrapping ErrLiveWorkerGone when
	// its worker is gone.
	Locate(ctx context.Context, id string) (worker, owner string, err error)
	// Holding lists the workers that hold owner's sandboxes.
	Holding(ctx context.Context, owner string) ([]string, error)
	// Dial opens a tunnel to worker, whose open says meta (Forwarded).
	Dial(ctx context.Context, worker string, meta []byte) (net.Conn, error)
}

// Errors of a LiveCluster.
var (
	ErrNoLiveSandbox  = errors.New("no such sandbox (it ended, or it is not yours)")
	ErrLiveWorkerGone = errors.New("the worker that held the sandbox is gone, and the sandbox with it")
)

// LiveRouter is a mounted transport some of whose requests are calls on
// live sandboxes, which an API node of a cluster sends to workers.
type LiveRouter interface {
	LiveRoute(r *http.Request) (runner.LiveRoute, bool)
}

// Forwarded is who sent a request that an API node forwarded to a worker:
// the meta of the tunnel it came through.
type Forwarded struct {
	// Keyed: the API node authenticated the caller, whose key is Key (nil:
	// a node without keys). Without it the call proves itself (a sandbox's
	// access token) or is refused.
	Keyed bool           `json:"keyed,omitempty"`
	Key   *config.APIKey `json:"key,omitempty"`
}

type forwardedCtx struct{}

// ForwardedContext is ctx for a connection that an API node of the
// cluster opened to this worker (a tunnel it signed), whose open says
// meta: the server takes the requests on it as Forwarded says, and
// answers them without its own keys and host check. A worker's server
// serves such connections only (ServeForwarded).
func ForwardedContext(ctx context.Context, meta []byte) context.Context {
	var f Forwarded
	if json.Unmarshal(meta, &f) != nil {
		f = Forwarded{} // proves nothing
	}
	return context.WithValue(ctx, forwardedCtx{}, &f)
}

// forwardedOf is who the API node says sent r, when it came through one.
func forwardedOf(r *http.Request) (*Forwarded, bool) {
	f, ok := r.Context().Value(forwardedCtx{}).(*Forwarded)
	return f, ok
}

// authenticateForwarded is authenticate for a request an API node
// forwarded: its caller is the node's word.
func (s *Server) authenticateForwarded(f *Forwarded, scope string) (*runner.Key, int, string) {
	switch {
	case !f.Keyed:
		return nil, http.StatusUnauthorized, "this call came through the cluster without a caller"
	case f.Key == nil:
		return nil, 0, ""
	}
	key, err := s.fwdKeys.Key(*f.Key, scope)
	if err != nil {
		return nil, http.StatusForbidden, err.Error()
	}
	return key, 0, ""
}

// liveRoute is r's route when it is a call on live sandboxes and this
// node sends those to workers, with the refusal of the door it is for.
func (s *Server) liveRoute(r *http.Request) (runner.LiveRoute, func(http.ResponseWriter, int, string), bool) {
	if s.opts.cluster == nil || s.opts.cluster.Live == nil {
		return runner.LiveRoute{}, nil, false
	}
	if route, ok := nativeLiveRoute(r); ok {
		return route, nil, true
	}
	for _, lr := range s.liveRouters {
		if route, ok := lr.r.LiveRoute(r); ok {
			return route, lr.refuse, true
		}
	}
	return runner.LiveRoute{}, nil, false
}

// liveRouter is a mounted transport that routes live calls, and its
// refusal.
type liveRouter struct {
	r      LiveRouter
	refuse func(http.ResponseWriter, int, string)
}

// nativeLiveRoute is the route of a call on the native API's sandboxes.
func nativeLiveRoute(r *http.Request) (runner.LiveRoute, bool) {
	p := r.URL.Path
	if p == sandboxesPath {
		switch r.Method {
		case http.MethodPost:
			return runner.LiveRoute{Op: runner.LiveCreate, Keyed: true}, true
		case http.MethodGet, http.MethodHead:
			return runner.LiveRoute{Op: runner.LiveList, Keyed: true, Join: joinNativeLists}, true
		}
		return runner.LiveRoute{}, false
	}
	rest, ok := strings.CutPrefix(p, sandboxesPath+"/")
	id, sub, _ := strings.Cut(rest, "/")
	if !ok || id == "" {
		return runner.LiveRoute{}, false
	}
	route := runner.LiveRoute{Op: runner.LiveCall, ID: id, Keyed: true}
	if sub == "pty" {
		route.Auth = wsAuthRequest
	}
	return route, true
}

// joinNativeLists joins the workers' {"sandboxes": [...]}.
func joinNativeLists(bodies [][]byte) ([]byte, error) {
	all := []wire.Sandbox{}
	for _, b := range bodies {
		var l struct {
			Sandboxes []wire.Sandbox `json:"sandboxes"`
		}
		if err := json.Unmarshal(b, &l); err != nil {
			return nil, err
		}
		all = append(all, l.Sandboxes...)
	}
	return json.Marshal(map[string]any{"sandboxes": all})
}

// serveLive sends a call on live sandboxes to the worker that holds its
// sandbox (or chosen for a new one), or answers it here.
func (s *Server) serveLive(w http.ResponseWriter, r *http.Request, route runner.LiveRoute, refuse func(http.ResponseWriter, int, string)) {
	if refuse == nil {
		refuse = writeError
	}
	lc := s.opts.cluster.Live
	var fwd Forwarded
	owner := ""
	if route.Keyed {
		ar := r
		if route.Auth != nil {
			ar = route.Auth(r)
		}
		key, status, msg := s.authenticate(ar, ScopeExecute)
		if status != 0 {
			refuseAuth(w, status, msg, refuse)
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			c := callerOf(r, key)
			c.Body = false
			if err := s.run.CheckCaller(c); err != nil {
				var re *requestError
				if errors.As(httpError(err), &re) {
					refuse(w, re.status, re.msg)
				} else {
					s.writeExecuteError(w, httpError(err), nil)
				}
				return
			}
		}
		fwd.Keyed = true
		if key != nil {
			k := key.APIKey
			fwd.Key = &k
		}
		owner = key.ID()
	}
	ctx := r.Context()
	var worker string
	switch route.Op {
	case runner.LiveList:
		s.listLive(w, r, route, fwd, owner, refuse)
		return
	case runner.LiveCreate:
		var err error
		if worker, err = lc.Place(ctx); err != nil {
			refuse(w, http.StatusServiceUnavailable, "no worker can hold a live sandbox now: "+err.Error())
			return
		}
	default:
		wk, o, err := lc.Locate(ctx, route.ID)
		if err == nil && route.Keyed && o != owner {
			err = ErrNoLiveSandbox // another key's: as if there were none
		}
		if err != nil {
			msg := ErrNoLiveSandbox.Error()
			if errors.Is(err, ErrLiveWorkerGone) {
				msg = err.Error()
			} else if !errors.Is(err, ErrNoLiveSandbox) {
				refuse(w, http.StatusServiceUnavailable, "finding the sandbox in the cluster: "+err.Error())
				return
			}
			if route.Missing != nil {
				route.Missing(w, msg)
			} else {
				refuse(w, http.StatusNotFound, msg)
			}
			return
		}
		worker = wk
	}
	s.proxyLive(w, r, worker, fwd, refuse)
}

// liveTransport is an HTTP transport to one worker, a tunnel per request
// (a tunnel's open names one caller).
func liveTransport(lc LiveCluster, worker string, meta []byte) *http.Transport {
	return &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return lc.Dial(ctx, worker, meta)
		},
		DisableKeepAlives:  true,
		DisableCompression: true,
	}
}

// proxyLive passes r on to worker, as fwd says who sent it.
func (s *Server) proxyLive(w http.ResponseWriter, r *http.Request, worker string, fwd Forwarded, refuse func(http.ResponseWriter, int, string)) {
	meta, _ := json.Marshal(fwd)
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme, pr.Out.URL.Host = "http", "worker"
			pr.Out.Host = pr.In.Host // a sandbox's ports are by Host
		},
		Transport:     liveTransport(s.opts.cluster.Live, worker, meta),
		FlushInterval: -1, // streams as they come
		ErrorLog:      nil,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if r.Context().Err() != nil {
				return // the caller went
			}
			s.log.Warn("live sandbox call to its worker failed", "worker", worker, "path", r.URL.Path, "err", err)
			refuse(w, http.StatusBadGateway, fmt.Sprintf("the sandbox's worker %s did not answer: %v", worker, err))
		},
	}
	rp.ServeHTTP(w, r)
}

// listLive asks every worker that holds one of owner's sandboxes for its
// list, and answers them joined.
func (s *Server) listLive(w http.ResponseWriter, r *http.Request, route runner.LiveRoute, fwd Forwarded, owner string, refuse func(http.ResponseWriter, int, string)) {
	lc := s.opts.cluster.Live
	workers, err := lc.Holding(r.Context(), owner)
	if err != nil {
		refuse(w, http.StatusServiceUnavailable, "listing the cluster's sandboxes: "+err.Error())
		return
	}
	meta, _ := json.Marshal(fwd)
	bodies := make([][]byte, len(workers))
	errs := make([]error, len(workers))
	var wg sync.WaitGroup
	for i, worker := range workers {
		wg.Go(func() {
			req, err := http.NewRequestWithContext(r.Context(), http.MethodGet, "http://worker"+r.URL.RequestURI(), nil)
			if err != nil {
				errs[i] = err
				return
			}
			req.Host = r.Host
			resp, err := (&http.Client{Transport: liveTransport(lc, worker, meta)}).Do(req)
			if err != nil {
				errs[i] = err
				return
			}
			defer resp.Body.Close()
			body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
			if err == nil && resp.StatusCode != http.StatusOK {
				err = fmt.Errorf("worker %s: %s: %s", worker, resp.Status, strings.TrimSpace(string(body)))
			}
			bodies[i], errs[i] = body, err
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		refuse(w, http.StatusBadGateway, "listing the cluster's sandboxes: "+err.Error())
		return
	}
	if len(bodies) == 0 {
		bodies = nil
	}
	out, err := route.Join(bodies)
	if err != nil {
		refuse(w, http.StatusBadGateway, "listing the cluster's sandboxes: "+err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(append(out, '\n'))
}
