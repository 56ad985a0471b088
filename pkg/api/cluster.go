package api

import (
	"github.com/sandbox-run/sandbox-run/pkg/runner"
	"io"
	"time"

	"github.com/sandbox-run/sandbox-run/pkg/cluster"
	"github.com/sandbox-run/sandbox-run/pkg/filestore"
	"github.com/sandbox-run/sandbox-run/pkg/jobs"
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
	mounts   []mount
	cluster  *cluster.Conn
	files    FileStore
	sessions *cluster.Sessions
}

// WithCluster makes the server an API node of the cluster c, its files in
// files (c.FileStore) and its sessions in sess (c.Sessions).
func WithCluster(c *cluster.Conn, files FileStore, sess *cluster.Sessions) Option {
	return func(o *options) { o.cluster, o.files, o.sessions = c, files, sess }
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
	_ jobService = (*cluster.Jobs)(nil)
	_ FileStore  = (*filestore.Store)(nil)
)
