package live

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sandbox-run/sandbox-run/internal/lib/records"
)

// Starter starts a live sandbox on a host (pkg/local: the executor): its
// agent reads requests from req and writes events to events.
type Starter interface {
	StartLive(ctx context.Context, o StartOptions, req io.Reader, events io.Writer) (Running, error)
}

// Running is a live sandbox started: Wait returns once it has ended (its
// agent's requests closed, a limit, Kill); Kill ends it now; DialTCP
// connects to a port on the loopback of its own network namespace; Stats
// reads what it uses now.
type Running interface {
	Wait() error
	Kill()
	DialTCP(ctx context.Context, port int) (net.Conn, error)
	Stats() (Stats, error)
}

// Stats is what a sandbox uses now: its processes' CPU time so far, their
// memory now and at most, and what its home and /tmp hold of their sizes.
type Stats struct {
	CPU                time.Duration
	Memory, MemoryPeak int64
	Disk, DiskTotal    int64
}

// StartOptions are what a sandbox is started with.
type StartOptions struct {
	Owner     string
	Languages []string
	Env       map[string]string
	// MemoryBytes is the whole sandbox's memory (0: the host's default);
	// DiskBytes the size of its home and of its /tmp.
	MemoryBytes, DiskBytes int64
	// Lifetime bounds its life whatever its timeout becomes (the
	// engine's wall clock): Config.MaxTimeout.
	Lifetime time.Duration
	// SocketDir, when set, is the host directory to mount at
	// agent.SocketDir, where the agent connects (the socket mode: req and
	// events are nil), saying Secret.
	SocketDir, Secret string
	// Network, when not nil, is what the sandbox's network may reach
	// (checked already against the server's maximum); nil: it has none.
	Network []string
	// NetworkBudgets bound the bytes (both ways) its network may move
	// with what an entry of Network allows, by the entry as written.
	NetworkBudgets map[string]int64
	// Image, when set, is the image (a reference, allowed already by the
	// server's policy) whose root filesystem is the sandbox's root, with
	// its own toolchains; "": the host's.
	Image string
	// Isolation is the wall it is made behind: "" or "native" (the
	// engine), "gvisor" (gVisor's kernel, whose sandboxes fork with their
	// memory).
	Isolation string
	// Secrets are the secrets it uses (with Network), their values: a
	// placeholder for each in its environment, the values put in place by
	// its network's egress (secrets.go).
	Secrets []Secret
	// Files, when set, is a directory whose work and tmp the sandbox's
	// home and /tmp start from, copy-on-write, for a starter that is a
	// FilesStarter: the sandbox's own (it lives as long as the sandbox,
	// and nothing writes it).
	Files string
}

// A FilesStarter is a Starter whose sandboxes start from a directory's
// files, copy-on-write (StartOptions.Files): nothing is copied up front.
type FilesStarter interface {
	Starter
	StartsFromFiles()
}

// Config bounds a Manager's sandboxes.
type Config struct {
	// MaxPerOwner and MaxTotal bound the sandboxes alive at once, for one
	// owner (an API key) and in all (default 20 and 200).
	MaxPerOwner, MaxTotal int
	// MaxMemoryBytes bounds the sum of their memory limits (0: none);
	// DefaultMemoryBytes is a sandbox's when it asks for none (512 MiB).
	MaxMemoryBytes, DefaultMemoryBytes int64
	// DiskBytes is the size of a sandbox's home and of its /tmp, each
	// (256 MiB).
	DiskBytes int64
	// Prewarm is how many sandboxes a persistent Manager keeps started,
	// their agents connected, for creates of the default kind (ready.go),
	// and its starter keeps built (a Prewarmer's), from its first create
	// on (0: none).
	Prewarm int
	// StateDir, with a Starter that is an Adopter, keeps the sandboxes'
	// records and agents' sockets: they outlive the process, and the next
	// Manager on the same directory takes them over. "": they end with it.
	StateDir string
	// DefaultTimeout is a sandbox's life when it asks for none (5 min);
	// MaxTimeout the longest any may ask for (24 h).
	DefaultTimeout, MaxTimeout time.Duration
	// MaxSnapshotBytes bounds what one owner's snapshots hold together
	// (default 1 GiB).
	MaxSnapshotBytes int64
	// Snapshots, when set, keeps the snapshots where every Manager of a
	// cluster finds them (snapstore.go).
	Snapshots SnapshotStore
	// EvictAfter, when not 0, evicts a sandbox to disk once it has stayed
	// paused that long (evict.go); paused sandboxes are evicted too, the
	// longest paused first, when a create would pass MaxMemoryBytes.
	EvictAfter time.Duration
	// Log gets what goes wrong out of any caller's sight: a sandbox that
	// could not be taken over (nil: slog.Default()).
	Log *slog.Logger
	// Registry, when set, learns of the sandboxes (a cluster's record of
	// which worker holds which).
	Registry Registry
	// Secrets gives the values of the secrets sandboxes use (nil: none
	// may use any).
	Secrets SecretSource
}

// Registry learns of a Manager's sandboxes: Add when one is created (the
// create fails if Add does) or taken over from an earlier process, Remove
// when it ends (not when it is handed on: Detach).
type Registry interface {
	Add(s *Sandbox) error
	Remove(s *Sandbox)
}

func (c Config) withDefaults() Config {
	if c.MaxPerOwner <= 0 {
		c.MaxPerOwner = 20
	}
	if c.MaxTotal <= 0 {
		c.MaxTotal = 200
	}
	if c.DefaultMemoryBytes <= 0 {
		c.DefaultMemoryBytes = 512 << 20
	}
	if c.DiskBytes <= 0 {
		c.DiskBytes = 256 << 20
	}
	if c.DefaultTimeout <= 0 {
		c.DefaultTimeout = 5 * time.Minute
	}
	if c.MaxTimeout <= 0 {
		c.MaxTimeout = 24 * time.Hour
	}
	if c.MaxSnapshotBytes <= 0 {
		c.MaxSnapshotBytes = 1 << 30
	}
	if c.Log == nil {
		c.Log = slog.Default()
	}
	return c
}

// Errors of a Manager.
var (
	// ErrNotFound is a sandbox that does not exist, ended, or is another
	// owner's.
	ErrNotFound = errors.New("live: no such sandbox")
	// ErrClosed is a Manager shut down.
	ErrClosed = errors.New("live: shutting down")
	// ErrInvalid is a request that cannot be (a timeout too long).
	ErrInvalid = errors.New("live: invalid request")
)

// LimitError is a sandbox refused for a limit: Full says the server is
// full for everyone (507-like), else the owner is at its own (429).
type LimitError struct {
	Msg  string
	Full bool
	// memory: it is the server's memory that is full.
	memory bool
}

func (e *LimitError) Error() string { return e.Msg }

// Manager keeps a host's live sandboxes: it starts them, ends each when
// its timeout passes (a timer: nothing polls), and answers only their
// owners. Safe for concurrent use.
type Manager struct {
	start Starter
	cfg   Config

	mu     sync.Mutex
	boxes  map[string]*Sandbox
	memory int64 // the sum of the live sandboxes' memory limits
	closed bool
	// prewarm starts keeping sandboxes ready, at the first create: a
	// server that runs no live sandbox keeps none (its pool is its runs').
	prewarm sync.Once
	// reattached counts the sandboxes taken over from an earlier process.
	reattached int
	// noCow: a sandbox failed to start from files copy-on-write (its
	// starter's host cannot): they are copied in (createFrom).
	noCow atomic.Bool
	// ready are sandboxes started ahead for creates (ready.go); filling
	// says one goroutine starts more.
	ready      []*Sandbox
	filling    bool
	readyTaken int
}

// NewManager makes a Manager that starts sandboxes with start. With a
// StateDir and an Adopter it first takes over the sandboxes an earlier
// Manager left there (Detach), before it returns.
func NewManager(start Starter, cfg Config) *Manager {
	m := &Manager{start: start, cfg: cfg.withDefaults(), boxes: map[string]*Sandbox{}}
	if m.persistent() {
		m.reattach() // made with its first sandbox: none before it
	}
	return m
}

// CreateOptions say what sandbox to create.
type CreateOptions struct {
	Languages []string
	Env       map[string]string
	Metadata  map[string]string
	// Timeout is its life from now (0: the default); at most MaxTimeout.
	Timeout     time.Duration
	MemoryBytes int64
	// Template names what it was made from (as the caller calls it).
	Template string
	// PrivatePorts: its ports answer only requests with its Token.
	PrivatePorts bool
	// Network, when not nil, is what its network may reach (see
	// StartOptions.Network); nil: it has none.
	Network []string
	// NetworkBudgets bound what it moves by entry of Network (see
	// StartOptions.NetworkBudgets).
	NetworkBudgets map[string]int64
	// Image, when set, is the image its root is (see StartOptions.Image);
	// "": the host's toolchains.
	Image string
	// AutoPause: its timeout pauses it instead of ending it (E2B's
	// autoPause); any call to its agent resumes it.
	AutoPause bool
	// IdlePause, when not 0, pauses the sandbox once nobody has used it
	// for that long (idle.go); any call resumes it.
	IdlePause time.Duration
	// Snapshot, when set, is a snapshot of the owner's (SnapshotSandbox)
	// whose files the sandbox starts with, made as the snapshot's sandbox
	// was for what these options leave out.
	Snapshot string
	// Isolation is its wall (StartOptions.Isolation).
	Isolation string
	// Secrets names its owner's secrets it uses (with Network): see
	// StartOptions.Secrets.
	Secrets []string

	// files is a directory whose files it starts with (createFrom).
	files string
}

// Sandbox is a live sandbox.
type Sandbox struct {
	ID, Owner, Template string
	Started             time.Time
	Metadata            map[string]string
	Memory              int64
	Languages           []string
	// Token is its access token: who holds it may call the sandbox's
	// agent without the owner's key (E2B's envdAccessToken).
	Token        string
	PrivatePorts bool
	// Network is what its network may reach (nil: it has none), and
	// NetworkBudgets the bytes it may move by entry of it.
	Network        []string
	NetworkBudgets map[string]int64
	// Secrets names the secrets it uses (their placeholders in its
	// environment).
	Secrets []string
	// Image is the image its root is ("": the host's toolchains).
	Image string
	// AutoPause: its timeout pauses it instead of ending it.
	AutoPause bool
	// Isolation is its wall ("" native, "gvisor").
	Isolation string
	// IdlePause pauses it once nobody has used it for that long (0:
	// never).
	IdlePause time.Duration
	// ForkedMemory: it was forked from a sandbox with that sandbox's
	// memory and running processes (Fork, under a backend that can).
	ForkedMemory bool

	client *Client
	// running is what runs it now (box, setBox): another once it is
	// evicted to disk, and once it comes back (evict.go).
	running atomic.Pointer[boxed]
	reqW    io.Closer   // the agent's input in the pipe mode
	closers []io.Closer // closed once it has ended
	ended   chan struct{}
	secret  string // the agent's, in the socket mode
	// env is its creator's environment for a sandbox taken ready: it
	// goes with each process it starts.
	env []string
	// taken is closed when a create takes it from the ready.
	taken chan struct{}

	mu    sync.Mutex
	end   time.Time
	timer *time.Timer
	// opts are what it was made with (its environment, for forks and
	// snapshots: under mu).
	opts CreateOptions
	// paused: its processes are frozen (Pause); left is what was left of
	// its timeout then (under mu). pauseMu orders pauses and resumes.
	paused  atomic.Bool
	left    time.Duration
	pauseMu sync.Mutex
	// pausedSince is when it was last paused, evictTimer its clock to
	// eviction (Config.EvictAfter), under mu; evicted: it is written to
	// disk (evict.go).
	pausedSince time.Time
	evictTimer  *time.Timer
	evicted     atomic.Bool
	procs       map[int]*Proc // started through Start, until they end
	// handed: this process let it go (Manager.Detach); its record is the
	// next process's.
	handed atomic.Bool
	// relayDir is where its agent's relay socket is made (a sandbox on a
	// socket: its socket directory); relay, under mu, the relay from its
	// first use on (ErrAgentDial).
	relayDir string
	relay    *relay
	// lastUse (unix nanoseconds) and inUse say when it was last used and
	// how many uses go on; idleTimer is its idle clock (IdlePause).
	lastUse   atomic.Int64
	inUse     atomic.Int64
	idleTimer *time.Timer
}

// boxed is a sandbox's Running, in the Sandbox's atomic pointer.
type boxed struct{ r Running }

// box is what runs the sandbox now (nil: it is starting).
func (s *Sandbox) box() Running {
	if b := s.running.Load(); b != nil {
		return b.r
	}
	return nil
}

// setBox makes r what runs the sandbox.
func (s *Sandbox) setBox(r Running) { s.running.Store(&boxed{r}) }

// closeConns closes what it speaks to its agent on.
func (s *Sandbox) closeConns() {
	s.mu.Lock()
	closers := s.closers
	s.mu.Unlock()
	for _, c := range closers {
		c.Close()
	}
}

// Client is the sandbox's agent.
func (s *Sandbox) Client() *Client { return s.client }

// DialTCP connects to port on the sandbox's own loopback (its network
// namespace's: nothing else is reachable so).
// A paused sandbox is resumed first, as for a call to its agent.
func (s *Sandbox) DialTCP(ctx context.Context, port int) (net.Conn, error) {
	if s.client != nil {
		if err := s.client.awake(); err != nil {
			return nil, err
		}
	}
	c, err := s.box().DialTCP(ctx, port)
	if errors.Is(err, ErrAgentDial) {
		c, err = s.dialAgent(ctx, port)
	}
	if err != nil {
		return nil, err
	}
	s.busy(1)
	return &usedConn{Conn: c, s: s}, nil
}

// Stats reads what the sandbox uses now.
func (s *Sandbox) Stats() (Stats, error) { return s.box().Stats() }

// End is when its timeout ends it.
func (s *Sandbox) End() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.end
}

// Done is closed once the sandbox has ended.
func (s *Sandbox) Done() <-chan struct{} { return s.ended }

// Create starts a sandbox of owner's.
func (m *Manager) Create(ctx context.Context, owner string, o CreateOptions) (*Sandbox, error) {
	if o.Snapshot != "" {
		o, sn, dir, err := m.fromSnapshot(owner, o)
		switch {
		case err != nil:
			return nil, err
		case sn.Memory:
			// It goes on from the snapshot's processes: made as its
			// sandbox was (its mounts and wall are in its memory), but
			// for its network, the create's (else the snapshot's): a
			// restore takes the devices it is given.
			base := sn.Options
			o.Languages, o.Image, o.Isolation, o.Secrets = base.Languages, base.Image, base.Isolation, base.Secrets
			o.Snapshot = ""
			return m.createRestored(ctx, owner, o, dir, sn.Secret)
		}
		return m.createFrom(ctx, owner, o, dir)
	}
	timeout := o.Timeout
	if timeout <= 0 {
		timeout = m.cfg.DefaultTimeout
	}
	if timeout > m.cfg.MaxTimeout {
		return nil, fmt.Errorf("%w: a timeout of %v is over the most a sandbox may live, %v", ErrInvalid, timeout, m.cfg.MaxTimeout)
	}
	mem := o.MemoryBytes
	if mem <= 0 {
		mem = m.cfg.DefaultMemoryBytes
	}
	s := m.takeReady(o, timeout)
	id := records.NewID("sbx")
	if s != nil {
		id = s.ID
	}
	err := m.reserve(owner, id, mem)
	if le := (*LimitError)(nil); errors.As(err, &le) && le.memory && m.evictPaused(ctx, mem) {
		err = m.reserve(owner, id, mem) // paused sandboxes made room
	}
	if err != nil {
		if s != nil {
			m.putBack(s)
		}
		return nil, err
	}
	if p, ok := m.start.(Prewarmer); ok && m.cfg.Prewarm > 0 && m.persistent() {
		m.prewarm.Do(func() { go p.PrewarmLive(m.startOptions("", CreateOptions{}), m.cfg.Prewarm) })
	}
	m.fill()
	if s != nil {
		s.give(owner, o)
	} else {
		now := time.Now()
		s = newSandbox(id, owner, o, mem, now)
		// The sandbox outlives the call that creates it: the engine ends
		// it when the context it starts with ends.
		opts := m.startOptions(owner, o)
		var err error
		opts.Secrets, err = m.secretsOf(owner, o.Secrets)
		if err == nil && o.files != "" {
			opts.Files, err = m.linkFiles(id, o.files)
		}
		switch {
		case err != nil:
		case m.persistent():
			err = m.startSocket(context.WithoutCancel(ctx), s, opts)
		default:
			err = m.startPipes(context.WithoutCancel(ctx), s, opts)
		}
		if err != nil {
			if opts.Files != "" {
				os.RemoveAll(opts.Files)
			}
			m.release(id, mem)
			return nil, err
		}
	}
	if err := m.admit(s, o, timeout); err != nil {
		return nil, err
	}
	return s, nil
}

// newSandbox is sandbox id of owner's made as o says, with mem of memory,
// started at now (not yet running).
func newSandbox(id, owner string, o CreateOptions, mem int64, now time.Time) *Sandbox {
	return &Sandbox{ID: id, Owner: owner, Template: o.Template, Started: now, Metadata: maps.Clone(o.Metadata), Memory: mem,
		Languages: slices.Clone(o.Languages), Token: records.NewID(""), PrivatePorts: o.PrivatePorts, Network: slices.Clone(o.Network), Secrets: slices.Clone(o.Secrets),
		Image: o.Image, AutoPause: o.AutoPause, Isolation: o.Isolation, IdlePause: o.IdlePause, NetworkBudgets: maps.Clone(o.NetworkBudgets), ended: make(chan struct{})}
}

// admit makes s, started as o says, the Manager's until it ends at
// timeout: its record kept, its timeout armed, the registry told. On an
// error s is ended and its place given back.
func (m *Manager) admit(s *Sandbox, o CreateOptions, timeout time.Duration) error {
	s.end = s.Started.Add(timeout)
	s.opts = CreateOptions{Env: maps.Clone(o.Env)}
	if err := m.save(s); err != nil {
		m.discard(s)
		m.release(s.ID, s.Memory)
		return fmt.Errorf("live: keeping the sandbox's record: %w", err)
	}
	m.run(s, timeout)
	if r := m.cfg.Registry; r != nil {
		if err := r.Add(s); err != nil {
			s.box().Kill()
			<-s.ended
			return fmt.Errorf("live: recording the sandbox: %w", err)
		}
	}
	return nil
}

// Prewarmer is a Starter that can keep sandboxes ready, started as o would
// be, until one is started.
type Prewarmer interface {
	PrewarmLive(o StartOptions, n int) error
}

// startOptions are what a sandbox of owner made with o starts with.
func (m *Manager) startOptions(owner string, o CreateOptions) StartOptions {
	mem := o.MemoryBytes
	if mem <= 0 {
		mem = m.cfg.DefaultMemoryBytes
	}
	return StartOptions{Owner: owner, Languages: o.Languages, Env: o.Env, MemoryBytes: mem, DiskBytes: m.cfg.DiskBytes, Lifetime: m.cfg.MaxTimeout,
		Network: o.Network, NetworkBudgets: o.NetworkBudgets, Image: o.Image, Isolation: o.Isolation}
}

// startPipes starts s with its agent on the sandbox's stdin and result
// pipe: it ends with this process.
func (m *Manager) startPipes(ctx context.Context, s *Sandbox, o StartOptions) error {
	reqR, reqW := io.Pipe()
	evR, evW := io.Pipe()
	run, err := m.start.StartLive(ctx, o, reqR, evW)
	if err != nil {
		return err
	}
	s.client, s.reqW = NewClient(reqW, evR), reqW
	s.setBox(run)
	s.closers = []io.Closer{reqR, evW}
	return nil
}

// run registers s, started, until it ends: at its timeout, or a kill.
func (m *Manager) run(s *Sandbox, timeout time.Duration) {
	if m.persistent() && s.secret != "" {
		s.relayDir = m.sockDir(s.ID)
	}
	s.client.SetOrphan(s.orphan)
	s.client.setWake(func() error { s.touch(); return m.wake(s) })
	m.armIdle(s)
	s.mu.Lock()
	s.timer = time.AfterFunc(timeout, func() { m.expire(s) })
	if s.Paused() {
		s.timer.Stop() // taken over paused: its timeout waits for a resume
	}
	s.mu.Unlock()
	m.mu.Lock()
	m.boxes[s.ID] = s
	m.mu.Unlock()
	go func() {
		// What runs it may change (evicted to disk, back from it): it
		// has ended when what it ran in ended and nothing replaced it.
		for b := s.running.Load(); ; {
			_ = b.r.Wait()
			next := s.running.Load()
			if next == b {
				break
			}
			b = next
		}
		s.closeConns()
		s.mu.Lock()
		if s.relay != nil {
			s.relay.close()
		}
		s.mu.Unlock()
		m.mu.Lock()
		if m.boxes[s.ID] == s {
			delete(m.boxes, s.ID)
		}
		m.mu.Unlock()
		if !s.evicted.Load() {
			m.release("", s.Memory) // an evicted one gave it back
		}
		if !s.handed.Load() {
			m.forget(s)
			if r := m.cfg.Registry; r != nil {
				r.Remove(s)
			}
		}
		s.mu.Lock()
		s.timer.Stop()
		if s.evictTimer != nil {
			s.evictTimer.Stop()
		}
		s.mu.Unlock()
		s.stopIdle()
		close(s.ended)
	}()
}

// reserve counts a new sandbox of owner's, or refuses it.
func (m *Manager) reserve(owner, id string, mem int64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	n := 0
	for _, s := range m.boxes {
		if s.Owner == owner {
			n++
		}
	}
	switch {
	case n >= m.cfg.MaxPerOwner:
		return &LimitError{Msg: fmt.Sprintf("you have %d live sandboxes, the most one key may have: kill one first", n)}
	case len(m.boxes) >= m.cfg.MaxTotal:
		return &LimitError{Msg: fmt.Sprintf("the server has %d live sandboxes, its most: retry later", len(m.boxes)), Full: true}
	case m.cfg.MaxMemoryBytes > 0 && m.memory+mem > m.cfg.MaxMemoryBytes:
		return &LimitError{Msg: fmt.Sprintf("the live sandboxes' memory would exceed the server's %d MiB: retry later", m.cfg.MaxMemoryBytes>>20), Full: true, memory: true}
	}
	m.memory += mem
	m.boxes[id] = &Sandbox{ID: id, Owner: owner} // its place while it starts (no running yet)
	return nil
}

// release gives back a sandbox's memory (and its place, while starting).
func (m *Manager) release(id string, mem int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.memory -= mem
	if s := m.boxes[id]; id != "" && s != nil && s.box() == nil {
		delete(m.boxes, id)
	}
}

// end ends s: its agent's input closes (the agent ends what it started,
// then the sandbox ends); the engine's kill follows if that takes long. An
// agent on a socket would wait for its host to come back: it is killed.
func (m *Manager) end(s *Sandbox) {
	if s.reqW == nil {
		s.box().Kill()
		return
	}
	s.reqW.Close()
	select {
	case <-s.ended:
	case <-time.After(5 * time.Second):
		s.box().Kill()
	}
}

// shut refuses new sandboxes from now on and returns those that run.
func (m *Manager) shut() []*Sandbox {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.closed = true
	var all []*Sandbox
	for _, s := range m.boxes {
		if s.box() != nil {
			all = append(all, s)
		}
	}
	return all
}

// Get is owner's sandbox id.
func (m *Manager) Get(owner, id string) (*Sandbox, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.boxes[id]
	if s == nil || s.box() == nil || s.Owner != owner {
		return nil, ErrNotFound
	}
	return s, nil
}

// Find is sandbox id whoever owns it: for a caller that proved it may use
// it otherwise (its Token).
func (m *Manager) Find(id string) (*Sandbox, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.boxes[id]
	if s == nil || s.box() == nil {
		return nil, ErrNotFound
	}
	return s, nil
}

// List is owner's sandboxes, by start.
func (m *Manager) List(owner string) []*Sandbox { return m.list(owner, false) }

// All is every owner's sandboxes, by start.
func (m *Manager) All() []*Sandbox { return m.list("", true) }

func (m *Manager) list(owner string, all bool) []*Sandbox {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []*Sandbox
	for _, s := range m.boxes {
		if s.box() != nil && (all || s.Owner == owner) {
			out = append(out, s)
		}
	}
	slices.SortFunc(out, func(a, b *Sandbox) int {
		if c := a.Started.Compare(b.Started); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return out
}

// Kill ends owner's sandbox id and waits until it has.
func (m *Manager) Kill(owner, id string) error {
	s, err := m.Get(owner, id)
	if err != nil {
		return err
	}
	s.box().Kill()
	<-s.ended
	return nil
}

// SetTimeout makes owner's sandbox id end d from now.
func (m *Manager) SetTimeout(owner, id string, d time.Duration) error {
	if d <= 0 || d > m.cfg.MaxTimeout {
		return fmt.Errorf("%w: a timeout of %v: give one from 1 s to %v", ErrInvalid, d, m.cfg.MaxTimeout)
	}
	s, err := m.Get(owner, id)
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.end = time.Now().Add(d)
	s.timer.Reset(d)
	s.mu.Unlock()
	return m.save(s)
}

// Close ends every sandbox and refuses new ones.
func (m *Manager) Close() {
	for _, s := range m.shutReady() {
		m.discard(s)
	}
	for _, s := range m.shut() {
		s.box().Kill()
		<-s.ended
	}
}
