// Package cluster carries runs between API nodes and workers over NATS
// JetStream: an API node submits a Job to a work-queue stream and waits
// for its events and result (Conn.Run); a worker takes jobs only when it
// has a free slot, runs them and sends back what they produced (Conn.Work).
// A job a worker took but did not acknowledge (the worker died) is
// delivered again to another worker after the ack wait, and its result
// reaches the caller once.
//
// Subjects and JetStream assets (Connect makes or finds the stream, its
// consumers and the KV buckets SR_WORKERS and SR_JOBS; the others are made
// by what uses them, named below):
//
//	sandbox-run.runs.sync    stream SR_RUNS (work queue): runs a caller waits for,
//	                         durable pull consumer "workers" (taken first)
//	sandbox-run.runs.async   the same stream: async jobs, durable pull consumer
//	                         "async-workers" (taken when no sync run waits)
//	sandbox-run.out.<id>     a run's events, core NATS, sequence-numbered
//	sandbox-run.reply.<id>   a run's result or error, core NATS request (the API side answers)
//	sandbox-run.cancel.<id>  the API side gave up: the worker cancels the run
//	sandbox-run.stdin.<id>.in  an interactive run's stdin, chunk by chunk, each a
//	                         request the worker answers once the program has it
//	                         (four tokens: the API side's sandbox-run.*.<id> does
//	                         not see it, so a worker not there yet is "no responders")
//	sandbox-run.ping.<id>    the worker asks whether the API side still waits (no
//	                         responders twice: it cancels the run)
//	sandbox-run.w.<worker>.run|session  a session's runs and file operations,
//	                         straight to the worker that holds it (sessions.go)
//	KV SR_WORKERS            one entry per live worker: id, slots, free, started (TTL 10 s)
//	KV SR_JOBS               one entry per async job (pkg/jobs' Record): its state,
//	                         its result once stored, its callback's delivery
//	KV SR_SESSIONS           sessions and the worker that holds each (Conn.Sessions)
//	object store SR_SESSION_FILES  each session's files after its last run
//	object store SR_FILES    uploaded files, one object per file with its filestore.File
//	                         in the object's metadata (Conn.FileStore)
//	object store SR_LARGE    replies and session files too large for one message (large.go)
//
// Buckets read from their stream's leader (buckets.go). The package knows
// no HTTP and no metrics: it speaks pkg/wire's requests, results and
// events, keeps pkg/jobs' records and pkg/sessions' sessions.
package cluster

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sandbox-run/sandbox-run/pkg/wire"
)

// Names of the JetStream assets and subjects.
const (
	StreamName        = "SR_RUNS"
	ConsumerName      = "workers"
	AsyncConsumerName = "async-workers"
	WorkersBucket     = "SR_WORKERS"
	JobsBucket        = "SR_JOBS"

	syncSubject   = "sandbox-run.runs.sync"
	asyncSubject  = "sandbox-run.runs.async"
	outPrefix     = "sandbox-run.out."
	replyPrefix   = "sandbox-run.reply."
	cancelPrefix  = "sandbox-run.cancel."
	stdinPrefix   = "sandbox-run.stdin."
	stdinSuffix   = ".in"
	pingPrefix    = "sandbox-run.ping."
	runWildcard   = "sandbox-run.*."
	maxDeliver    = 5
	maxAckPending = 100000
	dupWindow     = 2 * time.Minute
)

// Defaults of Options.
const (
	DefaultAckWait = 30 * time.Second
	// WorkerTTL is how long a worker's presence entry lives without a
	// refresh; workers refresh it every PresenceEvery.
	WorkerTTL     = 10 * time.Second
	PresenceEvery = 3 * time.Second
)

// Options says how to reach the NATS cluster and how to authenticate.
type Options struct {
	// URLs are NATS server URLs (nats://host:4222, tls://...); servers
	// the cluster announces are found from any of them.
	URLs []string
	// Name names the connection (shown by the server's monitoring) and
	// prefixes a worker's id; the host name when empty.
	Name string

	User, Password string
	Token          string
	// CredsFile is a JWT user credentials file; NKeyFile an NKey seed file.
	CredsFile, NKeyFile string
	// CAFile verifies the servers; CertFile and KeyFile are a client
	// certificate (mutual TLS).
	CAFile, CertFile, KeyFile string

	// AckWait is how long a job may go without a sign of life from its
	// worker (which sends one every AckWait/3, at most every 10 s) before
	// it is delivered to another worker. It is the consumer's setting,
	// shared by the whole cluster: the last node to connect sets it, so
	// every node should use the same. DefaultAckWait when zero.
	AckWait time.Duration
	// Replicas of the streams: min(3, servers known) when zero.
	Replicas int
	// ReadOnly finds the cluster's streams and buckets without making or
	// changing them (`cluster status`): their settings stay the nodes'.
	ReadOnly bool
	// JobTTL is how long an async job's entry in SR_JOBS lives after its
	// last change (the bucket's setting, like AckWait): DefaultJobTTL
	// when zero.
	JobTTL time.Duration
}

// DefaultJobTTL is how long async jobs' entries live by default.
const DefaultJobTTL = 25 * time.Hour

// Conn is a connection to the cluster, used by API nodes (Run, Pending,
// Workers) and workers (Work) alike. It is safe for concurrent use.
type Conn struct {
	nc       *nats.Conn
	js       jetstream.JetStream
	stream   jetstream.Stream
	cons     jetstream.Consumer // sync runs
	acons    jetstream.Consumer // async jobs
	kv       jetstream.KeyValue // SR_WORKERS
	jobs     jetstream.KeyValue // SR_JOBS
	name     string
	ackWait  time.Duration
	replicas int

	// large and sessionObjects are SR_LARGE and SR_SESSION_FILES, made
	// when first needed.
	large, sessionObjects lazyObjects
}

// Connect connects to NATS and makes (or updates) the stream, the
// consumer and the workers bucket. The connection reconnects forever.
func Connect(ctx context.Context, o Options) (*Conn, error) {
	if len(o.URLs) == 0 {
		return nil, errors.New("cluster: no NATS URL")
	}
	name := o.Name
	if name == "" {
		name, _ = os.Hostname()
	}
	if name == "" {
		name = "sandbox-run"
	}
	opts := []nats.Option{
		nats.Name(name),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(250 * time.Millisecond),
	}
	if o.User != "" || o.Password != "" {
		opts = append(opts, nats.UserInfo(o.User, o.Password))
	}
	if o.Token != "" {
		opts = append(opts, nats.Token(o.Token))
	}
	if o.CredsFile != "" {
		opts = append(opts, nats.UserCredentials(o.CredsFile))
	}
	if o.NKeyFile != "" {
		opt, err := nats.NkeyOptionFromSeed(o.NKeyFile)
		if err != nil {
			return nil, fmt.Errorf("cluster: nkey: %w", err)
		}
		opts = append(opts, opt)
	}
	if o.CAFile != "" {
		opts = append(opts, nats.RootCAs(o.CAFile))
	}
	if o.CertFile != "" || o.KeyFile != "" {
		opts = append(opts, nats.ClientCert(o.CertFile, o.KeyFile))
	}
	if d, ok := ctx.Deadline(); ok && time.Until(d) > 0 {
		opts = append(opts, nats.Timeout(time.Until(d)))
	}
	nc, err := nats.Connect(strings.Join(o.URLs, ","), opts...)
	if err != nil {
		return nil, fmt.Errorf("cluster: connect %s: %w", strings.Join(o.URLs, ","), err)
	}
	c := &Conn{nc: nc, name: name, ackWait: o.AckWait}
	if c.ackWait <= 0 {
		c.ackWait = DefaultAckWait
	}
	if err := c.setup(ctx, o.Replicas, cmp.Or(o.JobTTL, DefaultJobTTL), o.ReadOnly); err != nil {
		nc.Close()
		return nil, err
	}
	return c, nil
}

func (c *Conn) setup(ctx context.Context, replicas int, jobTTL time.Duration, readOnly bool) error {
	var err error
	if c.js, err = jetstream.New(c.nc); err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	if replicas <= 0 {
		replicas = min(3, max(1, len(c.nc.Servers())))
	}
	c.replicas = replicas
	kv := func(ctx context.Context, cfg jetstream.KeyValueConfig) (jetstream.KeyValue, error) {
		return c.kvBucket(ctx, cfg, readOnly)
	}
	steps := []struct {
		what string
		do   func(context.Context) error
	}{
		{"stream " + StreamName, func(ctx context.Context) (err error) {
			if readOnly {
				c.stream, err = c.js.Stream(ctx, StreamName)
				return err
			}
			c.stream, err = c.js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
				Name:        StreamName,
				Description: "sandbox-run: runs waiting for a worker",
				Subjects:    []string{syncSubject, asyncSubject},
				Retention:   jetstream.WorkQueuePolicy,
				Storage:     jetstream.FileStorage,
				Replicas:    replicas,
				Duplicates:  dupWindow,
			})
			return err
		}},
		{"consumer " + ConsumerName, func(ctx context.Context) (err error) {
			c.cons, err = c.consumer(ctx, ConsumerName, syncSubject, "sandbox-run workers: sync runs", readOnly)
			return err
		}},
		{"consumer " + AsyncConsumerName, func(ctx context.Context) (err error) {
			c.acons, err = c.consumer(ctx, AsyncConsumerName, asyncSubject, "sandbox-run workers: async jobs", readOnly)
			return err
		}},
		{"bucket " + WorkersBucket, func(ctx context.Context) (err error) {
			c.kv, err = kv(ctx, jetstream.KeyValueConfig{Bucket: WorkersBucket, Description: "sandbox-run: live workers",
				TTL: WorkerTTL, Replicas: replicas})
			return err
		}},
		{"bucket " + JobsBucket, func(ctx context.Context) (err error) {
			c.jobs, err = kv(ctx, jetstream.KeyValueConfig{Bucket: JobsBucket, Description: "sandbox-run: async jobs and their results",
				TTL: jobTTL, Replicas: replicas})
			return err
		}},
	}
	for _, st := range steps {
		if err := retry(ctx, st.do); err != nil {
			if readOnly && (errors.Is(err, jetstream.ErrStreamNotFound) || errors.Is(err, jetstream.ErrConsumerNotFound) ||
				errors.Is(err, jetstream.ErrBucketNotFound)) {
				return fmt.Errorf("cluster: no %s: no node of this cluster has started yet", st.what)
			}
			return fmt.Errorf("cluster: %s: %w", st.what, err)
		}
	}
	return nil
}

// consumer makes (or updates, or with readOnly only finds) the durable
// pull consumer name of subject.
func (c *Conn) consumer(ctx context.Context, name, subject, desc string, readOnly bool) (jetstream.Consumer, error) {
	if readOnly {
		return c.js.Consumer(ctx, StreamName, name)
	}
	return c.js.CreateOrUpdateConsumer(ctx, StreamName, jetstream.ConsumerConfig{
		Durable:       name,
		Description:   desc,
		FilterSubject: subject,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       c.ackWait,
		MaxDeliver:    maxDeliver,
		MaxAckPending: maxAckPending,
	})
}

// Close closes the connection. A Work loop on it returns an error once
// its running jobs end (they cannot report back: their jobs go to another
// worker after the ack wait).
func (c *Conn) Close() { c.nc.Close() }

// ConnectedURL is the server the connection uses now ("" while
// reconnecting).
func (c *Conn) ConnectedURL() string { return c.nc.ConnectedUrl() }

// Job is one run travelling from an API node to a worker.
type Job struct {
	// ID is the execution id; it names the run's subjects and is the
	// message id the stream deduplicates submissions by.
	ID       string              `json:"id"`
	Tenant   string              `json:"tenant,omitempty"`
	Request  wire.ExecuteRequest `json:"request"`
	Deadline time.Time           `json:"deadline,omitzero"`
	// TimeoutAuto is the request's "timeout_seconds": "auto" (a field
	// its JSON form does not carry).
	TimeoutAuto bool `json:"timeout_auto,omitempty"`
	// Interpreter: the run is a cell of its session's interpreter (a
	// field the request's JSON form does not carry).
	Interpreter bool `json:"interpreter,omitempty"`
	// Pinned is set by a worker on a run sent straight to it (RunOn): a
	// session's, which may use the session's files.
	Pinned bool `json:"-"`
	// Interactive says the run's stdin comes from the caller while it
	// runs (Stdin on the API side; on the worker, Stdin reads it).
	Interactive bool `json:"interactive,omitempty"`
	// Stdin is an interactive run's stdin: what the API side sends, and
	// what the worker's RunFunc reads.
	Stdin io.Reader `json:"-"`
	// Stream asks for the run's output as events while it runs.
	Stream bool `json:"stream,omitempty"`
	// OnSubmitted, when set, is called once Run has the job in the
	// stream, or gave up putting it there.
	OnSubmitted func() `json:"-"`
	// Async marks an async job: nobody waits for it; the worker stores
	// its result in SR_JOBS and sends its callback (SubmitJob).
	Async bool `json:"async,omitempty"`
	// Attempt is which delivery of the job this is (1 the first; more
	// after a worker died), set by Work.
	Attempt int `json:"-"`
}

// Kinds of RunError (wire's, as a cluster's workers report them).
const (
	KindInvalid  = wire.KindInvalid  // the request was refused
	KindDeadline = wire.KindBusy     // the job's deadline passed before it ran: retry
	KindInternal = wire.KindInternal // the worker failed
	KindBusy     = wire.KindBusy     // the worker had no room after all: retry
)

// RunError is an error a worker reported for a job (Run returns it as
// is): the one error every layer shares (wire.Error), sent as its kind and
// message. A RunFunc returns one to choose the kind; any other error
// travels as KindInternal.
type RunError = wire.Error

// Invalid is a RunError of KindInvalid.
func Invalid(msg string) *RunError { return &RunError{Kind: KindInvalid, Msg: msg} }

// validID reports whether id can be a subject token.
func validID(id string) error {
	if id == "" {
		return errors.New("cluster: job without an id")
	}
	if strings.ContainsAny(id, ".*> \t\r\n") {
		return fmt.Errorf("cluster: job id %q is not a NATS subject token", id)
	}
	return nil
}

// retry calls f with a bounded context until it succeeds or ctx ends:
// a JetStream API request can go unanswered while the cluster elects a
// leader.
func retry(ctx context.Context, f func(context.Context) error) error {
	// A request the cluster drops (while a stream's group forms, say) is
	// asked again soon; a slow cluster gets longer each time.
	wait := 2 * time.Second
	for {
		actx, cancel := context.WithTimeout(ctx, wait)
		wait = min(2*wait, 10*time.Second)
		err := f(actx)
		cancel()
		if err == nil || ctx.Err() != nil || !retryable(err) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(250 * time.Millisecond):
		}
	}
}

func randomSuffix() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
