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
//	sandbox-run.w.<worker>.tunnel.open  a tunnel's open, a request (tunnel.go)
//	sandbox-run.w.<worker>.t.<id>.w|a   a tunnel's frames to the worker, to the API node
//	KV SR_WORKERS            one entry per live worker: id, slots, free, started (TTL 10 s)
//	KV SR_JOBS               one entry per async job (pkg/jobs' Record): its state,
//	                         its result once stored, its callback's delivery
//	KV SR_SESSIONS           sessions and the worker that holds each (Conn.Sessions)
//	KV SR_LIVE               live sandboxes and the worker that holds each (Conn.Live)
//	KV SR_SECRETS            each API key's secrets, sealed (Conn.SecretBackend)
//	object store SR_SESSION_FILES  each session's files after its last run
//	object store SR_FILES    uploaded files, one object per file with its filestore.File
//	                         in the object's metadata (Conn.FileStore)
//	object store SR_LARGE    replies and session files too large for one message (large.go)
//	object store SR_SNAPSHOTS  live sandboxes' snapshots, their records sealed (snapshots.go)
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
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"

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
	// Insecure lets the node use NATS servers that let it in without
	// credentials (anyone who reaches them can read and forge the
	// cluster's jobs): without it Connect refuses them (ErrInsecure).
	Insecure bool
	// Keys sign this node's messages and check its peers' (trust.go);
	// nil, unless CredsFile holds them: nothing is signed or checked.
	Keys *Keys
	// SecretsKey seals the cluster's secrets (SecretBackend); nil: the one
	// CredsFile holds, if any.
	SecretsKey []byte
	// Log says that the node waits for NATS, and what it drops.
	Log *slog.Logger
	// Version is this node's, as `cluster status` shows it.
	Version string
}

// ErrInsecure is Connect's error for NATS servers that let the node in
// without credentials.
var ErrInsecure = errors.New("the NATS server let this node in without credentials: anyone who reaches it " +
	"can read every job and forge results. Set up authentication with `sandbox-run cluster init` and give " +
	"--nats-creds FILE, or pass --nats-insecure to run without it")

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
	// keys sign and check the cluster's messages (nil: neither); drops
	// counts what was dropped; replays are the jobs a worker took.
	keys        *Keys
	secretsKey  []byte
	drops       Drops
	log         *slog.Logger
	lastDropLog atomic.Int64
	replays     replayCache
	jobTTL      time.Duration
	version     string

	// large and sessionObjects are SR_LARGE and SR_SESSION_FILES, made
	// when first needed.
	large, sessionObjects lazyObjects
	// snapshots is SR_SNAPSHOTS, made when first needed.
	snapshots lazyObjects
}

// Connect connects to NATS and makes (or updates) the stream, the
// consumer and the workers bucket. While no NATS server answers it waits
// (saying so in the log every while) until ctx ends; credentials refused
// end it at once. The connection reconnects forever.
func Connect(ctx context.Context, o Options) (*Conn, error) {
	if len(o.URLs) == 0 {
		return nil, errors.New("cluster: no NATS URL")
	}
	log := o.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	name := o.Name
	if name == "" {
		name, _ = os.Hostname()
	}
	if name == "" {
		name = "sandbox-run"
	}
	opts, keys, err := natsOptions(o)
	if err != nil {
		return nil, err
	}
	opts = append(opts, nats.Name(name))
	urls := strings.Join(o.URLs, ",")
	nc, err := dial(ctx, urls, opts, log)
	if err != nil {
		return nil, err
	}
	if !nc.AuthRequired() && !o.Insecure {
		nc.Close()
		return nil, fmt.Errorf("cluster: %s: %w", urls, ErrInsecure)
	}
	if keys == nil {
		log.Warn("cluster: jobs and results are not signed: the nodes trust whatever NATS carries (give --nats-creds with the files `sandbox-run cluster init` wrote)")
	}
	c := &Conn{nc: nc, name: name, ackWait: o.AckWait, keys: keys, log: log, jobTTL: cmp.Or(o.JobTTL, DefaultJobTTL),
		version: o.Version, secretsKey: o.SecretsKey}
	if c.secretsKey == nil && keys != nil {
		c.secretsKey = keys.secrets
	}
	if c.ackWait <= 0 {
		c.ackWait = DefaultAckWait
	}
	if err := c.setup(ctx, o.Replicas, cmp.Or(o.JobTTL, DefaultJobTTL), o.ReadOnly); err != nil {
		nc.Close()
		return nil, err
	}
	return c, nil
}

// natsOptions are the connection's options o describes, and the signing
// keys its credentials hold (or o.Keys).
func natsOptions(o Options) ([]nats.Option, *Keys, error) {
	opts := []nats.Option{
		nats.MaxReconnects(-1),
		nats.ReconnectWait(250 * time.Millisecond),
		nats.Timeout(5 * time.Second),
	}
	keys := o.Keys
	if o.User != "" || o.Password != "" {
		opts = append(opts, nats.UserInfo(o.User, o.Password))
	}
	if o.Token != "" {
		opts = append(opts, nats.Token(o.Token))
	}
	if o.CredsFile != "" {
		cr, err := ReadCredentials(o.CredsFile)
		if err != nil {
			return nil, nil, err
		}
		if cr.JWT != "" {
			opts = append(opts, nats.UserJWTAndSeed(cr.JWT, cr.Seed))
		} else {
			kp, err := nkeys.FromSeed([]byte(cr.Seed))
			if err != nil {
				return nil, nil, fmt.Errorf("cluster: credentials %s: %w", o.CredsFile, err)
			}
			pub, _ := kp.PublicKey()
			opts = append(opts, nats.Nkey(pub, kp.Sign))
		}
		if keys == nil {
			keys = cr.Keys
		}
	}
	if o.NKeyFile != "" {
		opt, err := nats.NkeyOptionFromSeed(o.NKeyFile)
		if err != nil {
			return nil, nil, fmt.Errorf("cluster: nkey: %w", err)
		}
		opts = append(opts, opt)
	}
	if o.CAFile != "" {
		opts = append(opts, nats.RootCAs(o.CAFile))
	}
	if o.CertFile != "" || o.KeyFile != "" {
		opts = append(opts, nats.ClientCert(o.CertFile, o.KeyFile))
	}
	return opts, keys, nil
}

// dial connects to urls, waiting while no server answers until ctx ends.
func dial(ctx context.Context, urls string, opts []nats.Option, log *slog.Logger) (*nats.Conn, error) {
	start, said := time.Now(), time.Time{}
	for wait := 250 * time.Millisecond; ; wait = min(2*wait, 2*time.Second) {
		nc, err := nats.Connect(urls, opts...)
		if err == nil {
			if !said.IsZero() {
				log.Info("cluster: NATS answered", "nats", nc.ConnectedUrl(), "waited", time.Since(start).Round(time.Millisecond).String())
			}
			return nc, nil
		}
		if refused(err) || ctx.Err() != nil {
			return nil, fmt.Errorf("cluster: connect %s: %w", urls, err)
		}
		if time.Since(said) >= 10*time.Second {
			log.Warn("cluster: waiting for NATS", "nats", urls, "error", err.Error())
			said = time.Now()
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("cluster: connect %s: %w", urls, err)
		case <-time.After(wait):
		}
	}
}

// refused says whether err is NATS refusing the connection's credentials
// or TLS (waiting would not help).
func refused(err error) bool {
	if errors.Is(err, nats.ErrAuthorization) || errors.Is(err, nats.ErrAuthExpired) || errors.Is(err, nats.ErrAuthRevoked) ||
		errors.Is(err, nats.ErrSecureConnRequired) || errors.Is(err, nats.ErrSecureConnWanted) {
		return true
	}
	s := strings.ToLower(err.Error())
	return strings.Contains(s, "authorization") || strings.Contains(s, "authentication") || strings.Contains(s, "x509") ||
		strings.Contains(s, "tls:")
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
				TTL: jobTTL, Replicas: replicas, History: entryHistory})
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
	// Seq is the job's sequence in the stream (0 for a run sent straight
	// to a worker), set by Work: what its replies and events are bound to.
	Seq uint64 `json:"-"`
	// Nonce and Issued, set when the job is sealed, tell a job published
	// again (a replay) from the job delivered again.
	Nonce  string    `json:"nonce,omitempty"`
	Issued time.Time `json:"issued,omitzero"`
}

// sealJob stamps job with a nonce and the time and signs it.
func (c *Conn) sealJob(job *Job) ([]byte, error) {
	if job.Nonce == "" {
		job.Nonce = newNonce()
	}
	if job.Issued.IsZero() {
		job.Issued = time.Now().UTC()
	}
	data, err := json.Marshal(job)
	if err != nil {
		return nil, fmt.Errorf("cluster: job: %w", err)
	}
	return c.seal(kindJob, job.ID, data), nil
}

// openJob reads a sealed job, checked (seq: its stream sequence, 0 when it
// came straight to this worker). ok is false when it is dropped: forged or
// replayed (counted and logged), or no job at all.
func (c *Conn) openJob(data []byte, seq uint64) (job Job, ok bool, err error) {
	if job, ok, err = c.peekJob(data); !ok || err != nil {
		return job, ok, err
	}
	job.Seq = seq
	if c.keys == nil {
		return job, true, nil
	}
	// Replays: a job older than it may be, or taken before at another
	// sequence (or at all, when sent straight).
	// (A sync job past its deadline is not one: it is answered so.)
	until := job.Issued.Add(c.jobTTL)
	if !job.Async {
		until = job.Issued.Add(time.Hour)
		if job.Deadline.After(until) {
			until = job.Deadline
		}
	}
	if job.Nonce == "" || job.Issued.IsZero() || !time.Now().Before(until) || c.replays.check(job.Nonce, seq, until) {
		c.drops.add(kindJob, DropReplayed)
		c.dropLog(kindJob, job.ID, errors.New("replayed: a job taken before, or too old"))
		return job, false, nil
	}
	return job, true, nil
}

// peekJob is openJob without the replay checks: the job as its API node
// signed it.
func (c *Conn) peekJob(data []byte) (job Job, ok bool, err error) {
	payload := data
	if _, p, sealed := splitSealed(data); sealed {
		payload = p
	}
	var id struct {
		ID string `json:"id"`
	}
	if json.Unmarshal(payload, &id) != nil || validID(id.ID) != nil {
		c.drops.add(kindJob, DropForged)
		return job, false, nil
	}
	if payload, ok = c.open(kindJob, id.ID, data); !ok {
		return job, false, nil
	}
	if err := json.Unmarshal(payload, &job); err != nil {
		job.ID = id.ID
		return job, true, err // the caller is told
	}
	return job, true, nil
}

// bindSeq is what a run's replies and events are bound to.
func bindSeq(id string, seq uint64) string { return id + "@" + strconv.FormatUint(seq, 10) }

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

// probeEvery is how often watchedRequest asks whether anyone still listens.
var probeEvery = 2 * time.Second

// watchedRequest is nc.RequestWithContext that notices its responder gone
// meanwhile. A request routed to a server whose client (a worker) has just
// died is dropped there, not answered "no responders"; and a worker can
// die while it answers. Either way the requester would wait for its whole
// deadline. So every probeEvery this sends probe() to probeSubject (whose
// listener is the responder's), and a probe that finds no responders ends
// the wait with nats.ErrNoResponders.
func (c *Conn) watchedRequest(ctx context.Context, subject string, data []byte, probeSubject string, probe func() []byte) (*nats.Msg, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type answer struct {
		msg *nats.Msg
		err error
	}
	done := make(chan answer, 1)
	gone := make(chan struct{}, 1)
	go func() {
		m, err := c.nc.RequestWithContext(ctx, subject, data)
		done <- answer{m, err}
	}()
	t := time.NewTicker(probeEvery)
	defer t.Stop()
	for {
		select {
		case a := <-done:
			return a.msg, a.err
		case <-gone:
			return nil, nats.ErrNoResponders
		case <-t.C:
			go func() {
				pctx, pcancel := context.WithTimeout(ctx, probeEvery)
				defer pcancel()
				if _, err := c.nc.RequestWithContext(pctx, probeSubject, probe()); errors.Is(err, nats.ErrNoResponders) {
					select {
					case gone <- struct{}{}:
					default:
					}
				}
			}()
		}
	}
}

func randomSuffix() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
