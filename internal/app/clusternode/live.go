package clusternode

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"time"

	"github.com/sandbox-run/sandbox-run/internal/app"
	"github.com/sandbox-run/sandbox-run/pkg/api"
	"github.com/sandbox-run/sandbox-run/pkg/cluster"
	"github.com/sandbox-run/sandbox-run/pkg/config"
	"github.com/sandbox-run/sandbox-run/pkg/executor"
	"github.com/sandbox-run/sandbox-run/pkg/live"
	"github.com/sandbox-run/sandbox-run/pkg/local"
	"github.com/sandbox-run/sandbox-run/pkg/runner"
)

// Live sandboxes in a cluster: a worker keeps them (its run service's
// live.Manager, recorded in SR_LIVE) and serves their calls, through every
// door, over the tunnels API nodes open to it; an API node finds each
// sandbox's worker and passes the calls on (api.LiveCluster).

// liveCluster is an API node's view of the cluster's live sandboxes.
type liveCluster struct {
	c *cluster.Conn
	l *cluster.Live
}

var _ api.LiveCluster = liveCluster{}

func (lc liveCluster) Place(ctx context.Context) (string, error) { return lc.l.Place(ctx) }

func (lc liveCluster) Locate(ctx context.Context, id string) (worker, owner string, err error) {
	e, err := lc.l.Locate(ctx, id)
	switch {
	case errors.Is(err, cluster.ErrNoLiveSandbox):
		return "", "", api.ErrNoLiveSandbox
	case cluster.IsWorkerGone(err):
		return "", e.Owner, fmt.Errorf("%w: sandbox %s was on worker %s", api.ErrLiveWorkerGone, id, e.Worker)
	}
	return e.Worker, e.Owner, err
}

func (lc liveCluster) Holding(ctx context.Context, owner string) ([]string, error) {
	entries, err := lc.l.Entries(ctx, owner, false)
	var workers []string
	for _, e := range entries {
		if !slices.Contains(workers, e.Worker) {
			workers = append(workers, e.Worker)
		}
	}
	return workers, err
}

func (lc liveCluster) Dial(ctx context.Context, worker string, meta []byte) (net.Conn, error) {
	return lc.c.DialTunnel(ctx, worker, meta)
}

// liveRegistry records a worker's sandboxes in SR_LIVE.
type liveRegistry struct {
	l      *cluster.Live
	worker string
	log    *slog.Logger
}

func (r liveRegistry) entry(s *live.Sandbox) cluster.LiveEntry {
	return cluster.LiveEntry{ID: s.ID, Owner: s.Owner, Worker: r.worker, Created: s.Started.UTC()}
}

func (r liveRegistry) Add(s *live.Sandbox) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return r.l.Put(ctx, r.entry(s))
}

func (r liveRegistry) Remove(s *live.Sandbox) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := r.l.Delete(ctx, s.ID); err != nil {
		r.log.Warn("live sandbox ended but is still recorded (its entry expires)", "id", s.ID, "err", err)
	}
}

// serveLive serves the calls API nodes send to the live sandboxes of svc,
// a worker's run service, over the tunnels they open to worker id, until
// ctx ends; their entries in SR_LIVE are kept meanwhile.
func serveLive(ctx context.Context, c *cluster.Conn, l *cluster.Live, id string, cfg config.Config, x *executor.Executor, svc *runner.Service, log *slog.Logger) error {
	m := svc.Live()
	if m == nil {
		return nil
	}
	ln, err := c.ListenTunnels(id)
	if err != nil {
		return err
	}
	reg := liveRegistry{l: l, worker: id, log: log}
	// A secret changed through any API node reaches the sandboxes here
	// that use it.
	go func() {
		err := c.WatchSecrets(ctx, func(key string) {
			m.RefreshSecretsOf(func(owner string) bool { return cluster.SecretOwnerKey(owner) == key })
		})
		if err != nil && ctx.Err() == nil {
			log.Warn("watching the cluster's secrets: live sandboxes see changed secrets when they start again", "err", err)
		}
	}()
	go l.Keep(ctx, func() []cluster.LiveEntry {
		var out []cluster.LiveEntry
		for _, s := range m.All() {
			out = append(out, reg.entry(s))
		}
		return out
	})
	h := api.New(cfg, local.New(x), log, append(app.Transports(), api.WithService(svc))...).Handler()
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second,
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		ConnContext: func(ctx context.Context, conn net.Conn) context.Context {
			if t, ok := conn.(*cluster.Tunnel); ok {
				return api.ForwardedContext(ctx, t.Meta())
			}
			return ctx
		}}
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) && ctx.Err() == nil {
		return err
	}
	return nil
}
