package api

import (
	"context"
	"io"
	"time"

	"github.com/sandbox-run/sandbox-run/pkg/filestore"
	"github.com/sandbox-run/sandbox-run/pkg/jobs"
	"github.com/sandbox-run/sandbox-run/pkg/live"
	"github.com/sandbox-run/sandbox-run/pkg/runner"
	"github.com/sandbox-run/sandbox-run/pkg/secrets"
	"github.com/sandbox-run/sandbox-run/pkg/wire"
)

// A server is a single node (its runs, async jobs and files its own), or
// an API node of a cluster on NATS JetStream (WithCluster): its runs go to
// the cluster's workers through the run service, its async jobs, files and
// sessions are kept in the cluster, so that any API node answers them. The routes
// and their answers are the same.

// Option changes how New builds a server.
type Option func(*options)

type options struct {
	mounts  []mount
	cluster *Cluster
	files   FileStore
	service *runner.Service
}

// WithService makes the server serve svc, a run service made already,
// instead of one of its own (a worker's server, over the service that
// takes the cluster's jobs and keeps its live sandboxes).
func WithService(svc *runner.Service) Option {
	return func(o *options) { o.service = svc }
}

// Cluster is what an API node keeps in its cluster (internal/app/clusternode
// wires it): where its runs go, its async jobs, files and sessions.
type Cluster struct {
	Remote   runner.Remote
	Jobs     runner.JobStore
	Files    FileStore
	Sessions ClusterSessions // nil: the node keeps none
	// Health is the cluster as this node sees it, shown by /readyz; not
	// ok makes the node unready (no NATS, or the cluster's streams have
	// no leader).
	Health func(ctx context.Context) (health any, ok bool)
	// Dropped counts the cluster's messages this node dropped (forged or
	// replayed), by kind and reason, for /metrics.
	Dropped func() map[[2]string]uint64
	// Live is where the live sandboxes are (nil: the node offers none).
	Live LiveCluster
	// Snapshots keeps the live sandboxes' snapshots (nil: none here).
	Snapshots live.SnapshotStore
	// Secrets is the cluster's secret store, or SecretsErr why the node
	// has none (runner.Config's).
	Secrets    *secrets.Store
	SecretsErr error
}

// ClusterSessions are a cluster's sessions: their metadata and files.
type ClusterSessions interface {
	runner.SessionStore
	runner.SessionExecutor
}

// WithCluster makes the server an API node of the cluster c.
func WithCluster(c Cluster) Option {
	return func(o *options) { o.cluster, o.files = &c, c.Files }
}

// jobService is the async machinery (runner.JobStore).
type jobService = runner.JobStore

// FileStore keeps uploaded files: pkg/filestore's Store on a single node,
// pkg/cluster's FileStore on a cluster.
type FileStore interface {
	Put(r io.Reader, owner, name, contentType string, ttl time.Duration) (*filestore.File, error)
	Get(id, owner string) *filestore.File
	List(owner string) []wire.FileInfo
	Open(id, owner string) (*filestore.File, io.ReadCloser, error)
	Read(id, owner string) (*filestore.File, []byte, error)
	Remove(id, owner string) bool
	Room(n int64, owner string) error
	Expire(now time.Time) int
}

var (
	_ jobService = (*jobs.Manager)(nil)
	_ FileStore  = (*filestore.Store)(nil)
)
