// Package clusternode is this process's part in a cluster (pkg/cluster) as
// the configuration describes it: the connection to NATS, a worker (a run
// service over this host's executor that takes the cluster's jobs when it
// has a free slot, with a small health and metrics listener), an API
// node's server, and the cluster's state for `sandbox-run cluster status`.
// The commands in cmd/sandbox-run only parse flags and call it.
package clusternode

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/sandbox-run/sandbox-run/internal/app"
	"github.com/sandbox-run/sandbox-run/pkg/api"
	"github.com/sandbox-run/sandbox-run/pkg/cluster"
	"github.com/sandbox-run/sandbox-run/pkg/config"
	"github.com/sandbox-run/sandbox-run/pkg/executor"
	"github.com/sandbox-run/sandbox-run/pkg/filestore"
	"github.com/sandbox-run/sandbox-run/pkg/local"
	"github.com/sandbox-run/sandbox-run/pkg/runner"
)

// connectTimeout bounds the making of an API node's file store and
// sessions once connected.
const connectTimeout = 60 * time.Second

// Version is this build's version, as the nodes announce it (`cluster
// status`); the command sets it.
var Version = "dev"

// Connect connects to the cluster cfg.NATS names, making (or updating)
// its streams and buckets as cfg says. While no NATS server answers it
// waits, until ctx ends.
func Connect(ctx context.Context, cfg config.Config, log *slog.Logger) (*cluster.Conn, error) {
	return connect(ctx, cfg, false, log)
}

func connect(ctx context.Context, cfg config.Config, readOnly bool, log *slog.Logger) (*cluster.Conn, error) {
	n := cfg.NATS
	if len(n.URLs) == 0 {
		return nil, errors.New("no NATS URL: give --nats URL[,URL...] or SANDBOX_RUN_NATS")
	}
	return cluster.Connect(ctx, cluster.Options{URLs: n.URLs, Name: n.Name, User: n.User, Password: n.Password,
		Token: n.Token, CredsFile: n.CredsFile, NKeyFile: n.NKeyFile, CAFile: n.CAFile, CertFile: n.CertFile, KeyFile: n.KeyFile,
		AckWait: time.Duration(n.AckWaitSeconds * float64(time.Second)), ReadOnly: readOnly,
		JobTTL:   time.Duration(cfg.ResultTTLSeconds*float64(time.Second)) + time.Hour,
		Insecure: n.Insecure || insecureDefault, Log: log, Version: Version})
}

// health is the cluster's health for /readyz: read at most once a second.
type health struct {
	c  *cluster.Conn
	mu sync.Mutex
	at time.Time
	h  readiness
}

// readiness is what /readyz shows of the cluster.
type readiness struct {
	cluster.Health
	Workers   int `json:"workers"`
	Slots     int `json:"slots"`
	FreeSlots int `json:"free_slots"`
}

func (h *health) read(ctx context.Context) (any, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if time.Since(h.at) > time.Second {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		r := readiness{Health: h.c.Health(ctx)}
		if r.OK() {
			ws, err := h.c.Workers(ctx)
			if err != nil {
				r.NATS = "" // the cluster does not answer
			}
			for _, w := range ws {
				r.Workers, r.Slots, r.FreeSlots = r.Workers+1, r.Slots+w.Slots, r.FreeSlots+w.Free
			}
		}
		h.h, h.at = r, time.Now()
	}
	return h.h, h.h.OK()
}

// APIOption is the server option of an API node of c: runs go to the
// cluster, async jobs and files are kept in it.
func APIOption(ctx context.Context, c *cluster.Conn, cfg config.Config, log *slog.Logger) (api.Option, error) {
	quotas := filestore.QuotasOf(cfg.FileQuotaBytes, cfg.MaxFileBytes, cfg.FileQuotaFiles, len(cfg.Keys) > 0,
		cfg.FileQuotaBytesPerKey, cfg.FileQuotaFilesPerKey)
	ctx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	files, err := c.FileStore(ctx, cfg.MaxFileBytes, quotas, time.Duration(cfg.FileTTLSeconds*float64(time.Second)), log)
	if err != nil {
		return nil, err
	}
	sess, err := c.Sessions(ctx, runner.SessionLinger(cfg.Maximums), log)
	if err != nil {
		return nil, err
	}
	lv, err := c.Live(ctx)
	if err != nil {
		return nil, err
	}
	sec, secErr := secretStore(ctx, c, cfg, false)
	if secErr != nil {
		log.Warn("runs naming secrets are refused", "err", secErr)
	}
	return api.WithCluster(api.Cluster{Remote: Remote(c, cfg.Queue, sess, cfg, log), Files: files, Sessions: sess,
		Secrets: sec, SecretsErr: secErr,
		Jobs:   c.Jobs(cluster.JobsConfig{Queue: cfg.AsyncQueue, ResultTTL: time.Duration(cfg.ResultTTLSeconds * float64(time.Second)), Log: log}),
		Health: (&health{c: c}).read, Dropped: c.Drops, Live: liveCluster{c: c, l: lv}, Snapshots: snapshotStore{c: c}}), nil
}

// Worker runs the cluster's jobs on x with cfg.Workers slots until ctx
// ends, then lets the running ones finish. When ln is not nil it serves
// GET /healthz and GET /metrics there.
func Worker(ctx context.Context, c *cluster.Conn, cfg config.Config, x *executor.Executor, ln net.Listener, log *slog.Logger) error {
	rc := runner.ConfigFrom(cfg)
	rc.Queue = 0 // a worker takes a job only when it has a free slot
	// Its live sandboxes are recorded in SR_LIVE under its id, known
	// before it works: those it takes over from its last run are recorded
	// as the service starts.
	wid := c.NewWorkerID()
	lctx, cancel := context.WithTimeout(ctx, connectTimeout)
	lv, err := c.Live(lctx)
	cancel()
	if err != nil {
		return err
	}
	rc.LiveRegistry = liveRegistry{l: lv, worker: wid, log: log}
	rc.LiveSnapshots = snapshotStore{c: c}
	// Secrets are the cluster's: the API nodes keep them, runs here read them.
	rc.Secrets, rc.SecretsErr = secretStore(ctx, c, cfg, true)
	svc := runner.New(rc, local.New(x), log, nil)
	liveCtx, stopLive := context.WithCancel(context.WithoutCancel(ctx))
	liveDone := make(chan error, 1)
	go func() { liveDone <- serveLive(liveCtx, c, lv, wid, cfg, x, svc, log) }()
	defer func() {
		stopLive()
		if err := <-liveDone; err != nil {
			log.Warn("serving live sandboxes", "err", err)
		}
		svc.Stop() // they outlive the worker (live.end_on_shutdown: they end)
	}()
	svc.Metrics().CountDropped(c.Drops)
	var mu sync.Mutex
	id := ""
	if ln != nil {
		mux := http.NewServeMux()
		state := func() (map[string]any, int) {
			mu.Lock()
			body := map[string]any{"status": "ok", "role": "worker", "worker": id, "slots": cfg.Workers,
				"in_flight": svc.InFlight(), "nats": c.ConnectedURL(), "signed": c.Signing()}
			mu.Unlock()
			if c.ConnectedURL() == "" {
				body["status"] = "reconnecting"
				return body, http.StatusServiceUnavailable
			}
			return body, http.StatusOK
		}
		mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
			body, status := state()
			writeJSON(w, status, body)
		})
		hl := &health{c: c}
		mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
			body, status := state()
			h, ok := hl.read(r.Context())
			body["cluster"] = h
			if status == http.StatusOK && !ok {
				body["status"], status = "cluster unavailable", http.StatusServiceUnavailable
			}
			writeJSON(w, status, body)
		})
		mux.Handle("GET /metrics", svc.Metrics().Handler())
		srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		go func() { _ = srv.Serve(ln) }()
		defer srv.Close()
	}
	log.Info("worker", "nats", c.ConnectedURL(), "slots", cfg.Workers)
	defer x.EndInterpreters() // once its runs are over: the sessions' interpreters end with the worker
	return c.WorkWith(ctx, cluster.WorkOptions{Slots: cfg.Workers, Run: runJob(svc, &cfg), Notify: api.Notifier(cfg), Sessions: x,
		MaxResultBytes: cfg.MaxResultBytes, Log: log, ID: wid, OnStart: func(s string) {
			mu.Lock()
			id = s
			mu.Unlock()
			log.Info("worker joined the cluster", "worker", s)
		}})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// Status is the cluster as `sandbox-run cluster status` shows it.
type Status struct {
	NATS         string               `json:"nats"`
	Health       cluster.Health       `json:"health"`
	APINodes     []cluster.WorkerInfo `json:"api_nodes"`
	Workers      []cluster.WorkerInfo `json:"workers"`
	Slots        int                  `json:"slots"`
	FreeSlots    int                  `json:"free_slots"`
	SyncPending  int                  `json:"sync_pending"`
	AsyncPending int                  `json:"async_pending"`
}

// ReadStatus reads the cluster's status.
func ReadStatus(ctx context.Context, c *cluster.Conn) (Status, error) {
	st := Status{NATS: c.ConnectedURL(), Health: c.Health(ctx), APINodes: []cluster.WorkerInfo{}, Workers: []cluster.WorkerInfo{}}
	nodes, err := c.Nodes(ctx)
	if err != nil {
		return st, err
	}
	for _, w := range nodes {
		if w.Role == cluster.RoleAPI {
			st.APINodes = append(st.APINodes, w)
			continue
		}
		st.Workers = append(st.Workers, w)
		st.Slots += w.Slots
		st.FreeSlots += w.Free
	}
	if st.SyncPending, err = c.Pending(ctx); err != nil {
		return st, err
	}
	st.AsyncPending, err = c.PendingJobs(ctx)
	return st, err
}

// Text is st for people.
func (st Status) Text() string {
	h := st.Health
	signed := "signed (credentials from `cluster init`)"
	if !h.Signed {
		signed = "NOT signed: this node has no signing keys"
	}
	s := fmt.Sprintf("NATS: %s (server %s %s, cluster %q); servers known: %s\nmessages: %s\n",
		st.NATS, h.ServerName, h.ServerVersion, h.ClusterName, strings.Join(h.Servers, ", "), signed)
	s += "streams:\n"
	for _, x := range h.Streams {
		state := "ok"
		if !x.OK {
			state = "NOT OK: " + x.Error
		}
		s += fmt.Sprintf("  %-20s %s, leader %s, %d/%d replicas current, %d messages\n", x.Name, state, x.Leader, x.Current, x.Replicas, x.Messages)
	}
	s += fmt.Sprintf("API nodes: %d\n", len(st.APINodes))
	for _, w := range st.APINodes {
		s += fmt.Sprintf("  %s  version %s, up since %s\n", w.ID, w.Version, w.Started.Format(time.RFC3339))
	}
	s += fmt.Sprintf("workers: %d, slots: %d (%d free), sync runs pending: %d, async jobs pending: %d\n",
		len(st.Workers), st.Slots, st.FreeSlots, st.SyncPending, st.AsyncPending)
	for _, w := range st.Workers {
		s += fmt.Sprintf("  %s  version %s, slots %d, free %d, up since %s\n", w.ID, w.Version, w.Slots, w.Free, w.Started.Format(time.RFC3339))
	}
	return s
}

// Serve serves the HTTP API of cfg on ln until ctx ends: a single node,
// or with cfg.NATS.URLs an API node of that cluster, and a worker of it
// too unless its role is api.
func Serve(ctx context.Context, cfg config.Config, x *executor.Executor, ln net.Listener, log *slog.Logger) error {
	if len(cfg.NATS.URLs) == 0 {
		return api.New(cfg, local.New(x), log, app.Transports()...).Serve(ctx, ln)
	}
	c, err := Connect(ctx, cfg, log)
	if err != nil {
		return &setupError{err}
	}
	defer c.Close()
	opt, err := APIOption(ctx, c, cfg, log)
	if err != nil {
		return err
	}
	actx, stopAnnounce := context.WithCancel(context.WithoutCancel(ctx))
	announced := make(chan struct{})
	go func() { defer close(announced); c.Announce(actx) }()
	defer func() { stopAnnounce(); <-announced }()
	log.Info("cluster", "nats", c.ConnectedURL(), "role", cmp.Or(cfg.NATS.Role, config.RoleAll))
	wctx, stopWorker := context.WithCancel(context.WithoutCancel(ctx))
	worked := make(chan error, 1)
	if cfg.NATS.Role == config.RoleAPI {
		worked <- nil
	} else {
		go func() { worked <- Worker(wctx, c, cfg, x, nil, log) }()
	}
	err = api.New(cfg, local.New(x), log, append(app.Transports(), opt)...).Serve(ctx, ln)
	stopWorker()
	if werr := <-worked; werr != nil && err == nil {
		err = werr
	}
	return err
}

// setupError is an error that kept a node from joining its cluster.
type setupError struct{ error }

func (e *setupError) Unwrap() error { return e.error }

// IsSetup says whether err kept the node from joining its cluster (the
// command's exit code says so: 125).
func IsSetup(err error) bool {
	var se *setupError
	return errors.As(err, &se)
}

// RunWorker is `sandbox-run worker`: this host's executor, the health and
// metrics listener on cfg.Addr, the connection, the toolchain caches
// filled in the background, and Worker until ctx ends.
func RunWorker(ctx context.Context, cfg config.Config, log *slog.Logger) error {
	x, err := local.NewExecutor(cfg)
	if err != nil {
		return fmt.Errorf("cannot sandbox on this host: %w", err)
	}
	defer x.Engine().Close()
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return err
	}
	c, err := Connect(ctx, cfg, log)
	if err != nil {
		ln.Close()
		return err
	}
	defer c.Close()
	defer local.PrepareCaches(x, cfg.Prewarm > 0, log)()
	defer local.FollowHost(x, log)()
	return Worker(ctx, c, cfg, x, ln, log)
}

// PrintStatus prints the status of the cluster cfg names, as JSON or text.
func PrintStatus(ctx context.Context, cfg config.Config, asJSON bool) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	c, err := connect(ctx, cfg, true, nil)
	if err != nil {
		return err
	}
	defer c.Close()
	st, err := ReadStatus(ctx, c)
	if err != nil {
		return err
	}
	if asJSON {
		b, _ := json.MarshalIndent(st, "", "  ")
		fmt.Println(string(b))
	} else {
		fmt.Print(st.Text())
	}
	return nil
}

// DefaultWorkerAddr is a worker's health and metrics listener unless its
// configuration says otherwise.
const DefaultWorkerAddr = "127.0.0.1:9091"

// WorkerConfig is cfg checked for a worker, its listener DefaultWorkerAddr
// unless cfg names one.
func WorkerConfig(cfg config.Config) (config.Config, error) {
	if cfg.Addr == config.Default().Addr {
		cfg.Addr = DefaultWorkerAddr
	}
	cfg.NATS.Role = "" // a worker runs sandboxes whatever the file says of serve's role
	if len(cfg.NATS.URLs) == 0 {
		return cfg, errors.New("a worker needs a NATS cluster: give --nats URL[,URL...] or SANDBOX_RUN_NATS")
	}
	return cfg, cfg.ValidateLocal()
}
