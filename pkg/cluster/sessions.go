package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sandbox-run/sandbox-run/pkg/executor"
	"github.com/sandbox-run/sandbox-run/pkg/sandbox"
	"github.com/sandbox-run/sandbox-run/pkg/sessions"
	"github.com/sandbox-run/sandbox-run/pkg/wire"
)

// Sessions in a cluster. A session's metadata is an entry in KV
// SR_SESSIONS that every API node reads (the same methods as pkg/sessions'
// Store); its runs and files live on one worker at a time, the one its
// entry names, which its first run chooses (the live worker with the most
// free slots). Its runs go straight to that worker (sandbox-run.w.<worker>.run,
// not through the stream: they must not land elsewhere), and so do its
// file operations (sandbox-run.w.<worker>.session). After every run the
// worker copies the session's files to the object store SR_SESSION_FILES:
// when the worker is gone, the next run or file operation moves the
// session to another worker, which restores them. An interpreter
// session's state (its variables) does not move: the cell that moved it
// says so (Moved, and the API's "restarted").

// Names of the sessions' assets.
const (
	SessionsBucket     = "SR_SESSIONS"
	SessionFilesBucket = "SR_SESSION_FILES"

	workerPrefix = "sandbox-run.w." // + worker id + ".run" or ".session"
)

// sessionEntry is a session as SR_SESSIONS keeps it.
type sessionEntry struct {
	Session sessions.Session `json:"session"`
	// Worker holds the session's files and interpreter ("" before its
	// first run).
	Worker string `json:"worker,omitempty"`
	// Ended: the session is over; its files are being removed.
	Ended bool `json:"ended,omitempty"`
	// Moved: the session went to another worker and its next cell has
	// not said so yet (TakeMoved).
	Moved bool `json:"moved,omitempty"`
}

// SessionHost is what a worker's executor does for the sessions it holds
// (pkg/executor's Executor).
type SessionHost interface {
	SessionFiles(id string) ([]executor.SessionFile, int64, error)
	OpenSessionFile(id, path string) (*os.File, error)
	RemoveSessionFile(id, path string) error
	DeleteSession(id string) error
	TryDeleteSession(id string) error
	SessionBusy(id string) bool
	SessionSnapshot(id string) ([]sandbox.File, error)
	RestoreSession(id string, files []sandbox.File) error
}

// sessionCall is an operation on a session, sent to its worker.
type sessionCall struct {
	Op   string `json:"op"` // files, read, remove, delete, trydelete, busy, restore
	ID   string `json:"id"`
	Path string `json:"path,omitempty"`
}

// sessionAnswer is the worker's answer; Err and Kind say why it failed
// (Kind: "nosession", "busy", "invalid", "notexist" or "").
type sessionAnswer struct {
	Files []executor.SessionFile `json:"files,omitempty"`
	Total int64                  `json:"total,omitempty"`
	Data  []byte                 `json:"data,omitempty"`
	Busy  bool                   `json:"busy,omitempty"`
	Err   string                 `json:"error,omitempty"`
	Kind  string                 `json:"kind,omitempty"`
	// Large names the blob in SR_LARGE that holds the whole answer, when
	// it is larger than one message may be (a big file read).
	Large string `json:"large,omitempty"`
}

// Sessions is a cluster's sessions as an API node serves them: the store
// of their metadata (pkg/sessions' Store's methods) and their files and
// runs on their workers (pkg/runner's SessionExecutor's).
type Sessions struct {
	c      *Conn
	kv     jetstream.KeyValue
	files  jetstream.ObjectStore
	linger time.Duration
	log    *slog.Logger
}

// sessionCallWait bounds one operation on a worker.
const sessionCallWait = 30 * time.Second

// Sessions makes (or finds) the sessions' assets. Ended sessions' entries
// are kept linger (their files are being removed).
func (c *Conn) Sessions(ctx context.Context, linger time.Duration, log *slog.Logger) (*Sessions, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Sessions{c: c, linger: linger, log: log}
	err := retry(ctx, func(ctx context.Context) (err error) {
		s.kv, err = c.kvBucket(ctx, jetstream.KeyValueConfig{Bucket: SessionsBucket,
			Description: "sandbox-run: sessions and the worker that holds each", Replicas: c.replicas}, false)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("cluster: bucket %s: %w", SessionsBucket, err)
	}
	if s.files, err = c.sessionFiles(ctx); err != nil {
		return nil, fmt.Errorf("cluster: object store %s: %w", SessionFilesBucket, err)
	}
	return s, nil
}

func (c *Conn) sessionFiles(ctx context.Context) (jetstream.ObjectStore, error) {
	return c.sessionObjects.get(ctx, c, jetstream.ObjectStoreConfig{Bucket: SessionFilesBucket,
		Description: "sandbox-run: sessions' files after their last run", Storage: jetstream.FileStorage, Replicas: c.replicas})
}

func opCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), sessionCallWait)
}

// load reads session id's entry and revision.
func (s *Sessions) load(ctx context.Context, id string) (sessionEntry, uint64, error) {
	if !sessions.IDPattern.MatchString(id) {
		return sessionEntry{}, 0, jetstream.ErrKeyNotFound
	}
	var kv jetstream.KeyValueEntry
	err := retry(ctx, func(ctx context.Context) (err error) {
		kv, err = s.kv.Get(ctx, id)
		return err
	})
	if err != nil {
		return sessionEntry{}, 0, err
	}
	var e sessionEntry
	if err := json.Unmarshal(kv.Value(), &e); err != nil {
		return sessionEntry{}, 0, err
	}
	return e, kv.Revision(), nil
}

// update changes session id's entry with change (again on a conflict);
// change returns false to leave it. It returns the entry as it then is.
func (s *Sessions) update(ctx context.Context, id string, change func(*sessionEntry) bool) (sessionEntry, bool, error) {
	for {
		e, rev, err := s.load(ctx, id)
		if err != nil || !change(&e) {
			return e, false, err
		}
		data, _ := json.Marshal(e)
		if _, err = s.kv.Update(ctx, id, data, rev); err == nil {
			return e, true, nil
		}
		var apiErr *jetstream.APIError
		if !(errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence) || ctx.Err() != nil {
			return e, false, err
		}
	}
}

// entries lists every session's entry; lenient ones (List, IDs, Sweep)
// log what they could not read and go on with the rest.
func (s *Sessions) entries(ctx context.Context) []sessionEntry {
	out, err := s.allEntries(ctx)
	if err != nil {
		s.log.Warn("cluster sessions: cannot list", "error", err)
	}
	return out
}

// allEntries lists every session's entry, or fails: a count that admits
// a session (Add) must not miss one. A session just added by another API
// node must count too, so the entries come from a watch (a consumer of
// the bucket's stream, on its leader), not from gets: a KV get is a direct
// get that any replica may answer, one that has not applied the latest
// write among them (CI saw a third session of a key with a limit of two
// let in so, after its listing said the second was not found).
func (s *Sessions) allEntries(ctx context.Context) ([]sessionEntry, error) {
	var out []sessionEntry
	var errs []error
	err := retry(ctx, func(ctx context.Context) error {
		out, errs = out[:0], errs[:0]
		return currentEntries(ctx, s.kv, func(kv jetstream.KeyValueEntry) {
			var e sessionEntry
			if err := json.Unmarshal(kv.Value(), &e); err != nil {
				errs = append(errs, fmt.Errorf("session %s: %w", kv.Key(), err))
				return
			}
			out = append(out, e)
		})
	})
	if err != nil {
		return nil, err
	}
	return out, errors.Join(errs...)
}

func live(e sessionEntry, owner string, now time.Time) bool {
	return !e.Ended && e.Session.Owner == owner && now.Before(e.Session.Expires())
}

// Get returns a copy of owner's live session id.
func (s *Sessions) Get(id, owner string) (sessions.Session, bool) {
	ctx, cancel := opCtx()
	defer cancel()
	e, _, err := s.load(ctx, id)
	if err != nil || !live(e, owner, time.Now()) {
		return sessions.Session{}, false
	}
	return e.Session, true
}

// Touch restarts owner's session's idle timer; false when it is gone.
func (s *Sessions) Touch(id, owner string) (sessions.Session, bool) {
	ctx, cancel := opCtx()
	defer cancel()
	e, ok, err := s.update(ctx, id, func(e *sessionEntry) bool {
		now := time.Now()
		if !live(*e, owner, now) {
			return false
		}
		e.Session.LastUsed = now
		return true
	})
	return e.Session, ok && err == nil
}

// Add creates a session unless its owner has max live ones already, or
// all owners together maxAll (a *sessions.FullError). Two API nodes that
// add at the same moment may each pass a count of one below.
func (s *Sessions) Add(sess *sessions.Session, max, maxAll int) error {
	ctx, cancel := opCtx()
	defer cancel()
	n, all, now := 0, 0, time.Now()
	list, err := s.allEntries(ctx)
	if err != nil {
		return fmt.Errorf("cluster sessions: cannot count the sessions: %w", err)
	}
	for _, e := range list {
		if !e.Ended && now.Before(e.Session.Expires()) {
			all++
			if e.Session.Owner == sess.Owner {
				n++
			}
		}
	}
	if n >= max {
		return sessions.NewFullError(fmt.Sprintf("%s has %d sessions, at its limit of %d (max_sessions_per_key): delete one or let one expire", sessions.TenantName(sess.Owner), n, max))
	}
	if all >= maxAll {
		return sessions.NewFullError(fmt.Sprintf("this cluster has %d sessions, at its limit of %d (max_sessions): retry when some have ended", all, maxAll))
	}
	data, _ := json.Marshal(sessionEntry{Session: *sess})
	return retry(ctx, func(ctx context.Context) error {
		_, err := s.kv.Create(ctx, sess.ID, data)
		return err
	})
}

// List returns owner's live sessions, oldest first.
func (s *Sessions) List(owner string) []sessions.Session {
	ctx, cancel := opCtx()
	defer cancel()
	var out []sessions.Session
	now := time.Now()
	for _, e := range s.entries(ctx) {
		if live(e, owner, now) {
			out = append(out, e.Session)
		}
	}
	slices.SortFunc(out, func(a, b sessions.Session) int {
		if c := a.Created.Compare(b.Created); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return out
}

// IDs lists every live session, of every owner.
func (s *Sessions) IDs() []string {
	ctx, cancel := opCtx()
	defer cancel()
	var ids []string
	for _, e := range s.entries(ctx) {
		if !e.Ended {
			ids = append(ids, e.Session.ID)
		}
	}
	return ids
}

// End marks session id (owner's, or any owner's when all) ended: its
// entry stays while its files are removed (DeleteSession, Sweep).
func (s *Sessions) End(id, owner string, all bool) bool {
	ctx, cancel := opCtx()
	defer cancel()
	_, ok, err := s.update(ctx, id, func(e *sessionEntry) bool {
		if e.Ended || (!all && !live(*e, owner, time.Now())) {
			return false
		}
		e.Ended, e.Session.LastUsed = true, time.Now()
		return true
	})
	return ok && err == nil
}

// Sweep ends the sessions idle past their TTL (unless a run of one goes
// on) and removes the files of ended ones, and their entries once that is
// done (or linger has passed).
func (s *Sessions) Sweep(x sessions.Files, busy func(error) bool, now time.Time) {
	ctx, cancel := opCtx()
	defer cancel()
	for _, e := range s.entries(ctx) {
		id := e.Session.ID
		if !e.Ended {
			if !now.Before(e.Session.Expires()) && !s.SessionBusy(id) && s.End(id, "", true) {
				s.log.Info("session expired", "session_id", id)
			}
			continue
		}
		err := s.TryDeleteSession(id)
		if err != nil && !busy(err) && !errors.Is(err, executor.ErrNoSession) {
			s.log.Error("sessions: cannot remove files", "session_id", id, "error", err)
		}
		if err == nil || errors.Is(err, executor.ErrNoSession) || now.After(e.Session.LastUsed.Add(s.linger)) {
			s.forget(ctx, id)
		}
	}
}

// forget removes session id's entry and copy of its files.
func (s *Sessions) forget(ctx context.Context, id string) {
	_ = s.files.Delete(ctx, id)
	_ = s.kv.Purge(ctx, id)
}

// Place returns the worker that holds session id, choosing one first if
// none does or the one that did is gone (avoid names workers known gone:
// a worker's presence outlives it by up to WorkerTTL): the session's files
// are restored there (and TakeMoved says so once).
func (s *Sessions) Place(ctx context.Context, id string, avoid ...string) (string, error) {
	gone := slices.Clone(avoid)
	for {
		e, rev, err := s.load(ctx, id)
		if err != nil {
			return "", err
		}
		if e.Worker != "" && !slices.Contains(gone, e.Worker) && s.c.workerAlive(ctx, e.Worker) {
			return e.Worker, nil
		}
		ws, err := s.c.Workers(ctx)
		if err != nil {
			return "", err
		}
		ws = slices.DeleteFunc(ws, func(w WorkerInfo) bool { return w.ID == e.Worker || slices.Contains(gone, w.ID) })
		if len(ws) == 0 {
			return "", errors.New("no worker is available to hold the session")
		}
		best := slices.MaxFunc(ws, func(a, b WorkerInfo) int { return a.Free - b.Free })
		// Its files come from the copy its last worker made; a session
		// that never ran has none, but the worker must answer.
		op := sessionCall{Op: "busy", ID: id}
		if e.Worker != "" {
			op.Op = "restore"
		}
		if _, err := s.call(ctx, best.ID, op); errors.Is(err, errWorkerGone) {
			gone = append(gone, best.ID)
			continue
		} else if err != nil {
			return "", fmt.Errorf("restoring session %s on worker %s: %w", id, best.ID, err)
		}
		prev := e.Worker
		e.Worker, e.Moved = best.ID, e.Moved || prev != ""
		data, _ := json.Marshal(e)
		if _, err := s.kv.Update(ctx, id, data, rev); err != nil {
			continue // another API node placed it meanwhile
		}
		if prev != "" {
			s.log.Warn("session moved to another worker", "session_id", id, "from", prev, "to", best.ID)
		}
		return best.ID, nil
	}
}

// TakeMoved says whether session id moved to another worker since the
// last call (its interpreter's state was lost), and forgets it.
func (s *Sessions) TakeMoved(ctx context.Context, id string) bool {
	_, changed, err := s.update(ctx, id, func(e *sessionEntry) bool {
		if !e.Moved {
			return false
		}
		e.Moved = false
		return true
	})
	return changed && err == nil
}

// workerAlive says whether worker announced itself lately.
func (c *Conn) workerAlive(ctx context.Context, worker string) bool {
	e, err := c.kv.Get(ctx, worker)
	if err != nil {
		return false
	}
	_, ok := c.open(kindPresence, worker, e.Value())
	return ok
}

// errWorkerGone is a worker that did not answer (no responders).
var errWorkerGone = errors.New("the session's worker is gone")

// call sends op to worker.
func (s *Sessions) call(ctx context.Context, worker string, op sessionCall) (sessionAnswer, error) {
	data, _ := json.Marshal(op)
	ctx, cancel := context.WithTimeout(ctx, sessionCallWait)
	defer cancel()
	msg, err := s.c.requestWorker(ctx, worker, ".session", s.c.seal(kindCall, op.ID, data), op.ID)
	if errors.Is(err, nats.ErrNoResponders) {
		return sessionAnswer{}, errWorkerGone
	}
	if err != nil {
		return sessionAnswer{}, err
	}
	var a sessionAnswer
	if err := json.Unmarshal(msg.Data, &a); err != nil {
		return sessionAnswer{}, err
	}
	if a.Large != "" {
		data, err := s.c.takeBlob(ctx, a.Large)
		if err == nil {
			a = sessionAnswer{}
			err = json.Unmarshal(data, &a)
		}
		if err != nil {
			return sessionAnswer{}, err
		}
	}
	switch a.Kind {
	case "nosession":
		return a, executor.ErrNoSession
	case "busy":
		return a, executor.ErrSessionBusy
	case "notexist":
		return a, os.ErrNotExist
	case "invalid":
		return a, &executor.InvalidRequestError{Msg: a.Err}
	}
	if a.Err != "" {
		return a, errors.New(a.Err)
	}
	return a, nil
}

// onWorker sends op to the worker that holds session op.ID, moving the
// session first if its worker is gone. A session no worker holds yet has
// no files: none is answered.
func (s *Sessions) onWorker(op sessionCall, none sessionAnswer) (sessionAnswer, error) {
	ctx, cancel := opCtx()
	defer cancel()
	e, _, err := s.load(ctx, op.ID)
	if err != nil {
		return none, executor.ErrNoSession
	}
	if e.Worker == "" {
		return none, nil
	}
	var gone []string
	for try := 0; try < 3; try++ {
		w, err := s.Place(ctx, op.ID, gone...)
		if err != nil {
			return sessionAnswer{}, err
		}
		a, err := s.call(ctx, w, op)
		if !errors.Is(err, errWorkerGone) {
			return a, err
		}
		gone = append(gone, w)
	}
	return sessionAnswer{}, errWorkerGone
}

// SessionFiles lists session id's files and their total size.
func (s *Sessions) SessionFiles(id string) ([]executor.SessionFile, int64, error) {
	a, err := s.onWorker(sessionCall{Op: "files", ID: id}, sessionAnswer{Files: []executor.SessionFile{}})
	if a.Files == nil {
		a.Files = []executor.SessionFile{}
	}
	return a.Files, a.Total, err
}

// OpenSessionFile reads one of session id's files into a temporary file
// (removed already: it lives as long as the descriptor).
func (s *Sessions) OpenSessionFile(id, path string) (*os.File, error) {
	a, err := s.onWorker(sessionCall{Op: "read", ID: id, Path: path}, sessionAnswer{Kind: "notexist"})
	if err == nil && a.Kind == "notexist" {
		err = os.ErrNotExist
	}
	if err != nil {
		return nil, err
	}
	f, err := os.CreateTemp("", "sandbox-run-session-file-")
	if err != nil {
		return nil, err
	}
	os.Remove(f.Name())
	if _, err := f.Write(a.Data); err != nil {
		f.Close()
		return nil, err
	}
	if _, err := f.Seek(0, 0); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// RemoveSessionFile removes one of session id's files.
func (s *Sessions) RemoveSessionFile(id, path string) error {
	a, err := s.onWorker(sessionCall{Op: "remove", ID: id, Path: path}, sessionAnswer{Kind: "notexist"})
	if err == nil && a.Kind == "notexist" {
		err = os.ErrNotExist
	}
	return err
}

// SessionBusy says whether a run of session id goes on.
func (s *Sessions) SessionBusy(id string) bool {
	a, err := s.onWorker(sessionCall{Op: "busy", ID: id}, sessionAnswer{})
	return err == nil && a.Busy
}

// DeleteSession removes session id's files (on its worker and the copy)
// and its entry, waiting for a run of it to end.
func (s *Sessions) DeleteSession(id string) error { return s.deleteSession(id, "delete") }

// TryDeleteSession is DeleteSession unless a run of it goes on
// (executor.ErrSessionBusy).
func (s *Sessions) TryDeleteSession(id string) error { return s.deleteSession(id, "trydelete") }

func (s *Sessions) deleteSession(id, op string) error {
	ctx, cancel := opCtx()
	defer cancel()
	e, _, err := s.load(ctx, id)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return executor.ErrNoSession
	}
	if err != nil {
		// Not "no such session": Sweep would forget the session and leave
		// its files on its worker.
		return err
	}
	if e.Worker != "" {
		_, err = s.call(ctx, e.Worker, sessionCall{Op: op, ID: id})
		if err != nil && !errors.Is(err, errWorkerGone) && !errors.Is(err, executor.ErrNoSession) {
			return err
		}
	}
	s.forget(ctx, id)
	return nil
}

// RunOn runs job on worker (a session's run): Run, but straight to that
// worker instead of through the stream. A worker that is gone is
// errWorkerGone (IsWorkerGone).
func (c *Conn) RunOn(ctx context.Context, worker string, job Job, onEvent func(wire.Event)) (*wire.Result, error) {
	return c.run(ctx, job, onEvent, func(ctx context.Context, data []byte) (uint64, error) {
		rctx, cancel := context.WithTimeout(ctx, sessionCallWait)
		defer cancel()
		_, err := c.requestWorker(rctx, worker, ".run", data, job.ID)
		if errors.Is(err, nats.ErrNoResponders) {
			return 0, errWorkerGone
		}
		return 0, err
	})
}

// requestWorker sends data to worker's subject suffix and waits for its
// answer, or until the worker is found gone (watchedRequest). The probes
// are pings on its ".session", sealed for id: one subscription of the
// worker serves both.
func (c *Conn) requestWorker(ctx context.Context, worker, suffix string, data []byte, id string) (*nats.Msg, error) {
	ping, _ := json.Marshal(sessionCall{Op: "ping", ID: id})
	return c.watchedRequest(ctx, workerPrefix+worker+suffix, data, workerPrefix+worker+".session",
		func() []byte { return c.seal(kindCall, id, ping) })
}

// IsWorkerGone says whether err is RunOn's for a worker that is gone.
func IsWorkerGone(err error) bool { return errors.Is(err, errWorkerGone) }

// serveDirect answers what is sent straight to this worker: session runs
// and session operations. It returns the subscription to end.
func (w *worker) serveDirect(run func(Job), host SessionHost) (*nats.Subscription, error) {
	c := w.c
	store := c.sessionFiles
	w.snapshot = func(id string) {
		if host == nil {
			return
		}
		ctx, cancel := opCtx()
		defer cancel()
		fs, err := host.SessionSnapshot(id)
		if err == nil {
			var obs jetstream.ObjectStore
			if obs, err = store(ctx); err == nil {
				data, _ := json.Marshal(fs)
				_, err = obs.PutBytes(ctx, id, data)
			}
		}
		if err != nil {
			w.log().Error("session: cannot copy its files to the cluster", "session_id", id, "error", err)
		}
	}
	return c.nc.Subscribe(workerPrefix+w.info.ID+".*", func(m *nats.Msg) {
		switch {
		case strings.HasSuffix(m.Subject, ".run"):
			job, ok, err := c.openJob(m.Data, 0)
			if !ok || err != nil {
				return
			}
			job.Pinned, job.Attempt = true, 1
			_ = m.Respond(nil)
			go run(job)
		case strings.HasSuffix(m.Subject, ".session"):
			var op sessionCall
			payload := m.Data
			if _, p, sealed := splitSealed(m.Data); sealed {
				payload = p
			}
			if json.Unmarshal(payload, &op) != nil {
				return
			}
			if payload, ok := c.open(kindCall, op.ID, m.Data); !ok || json.Unmarshal(payload, &op) != nil {
				return
			}
			// Off the subscription's goroutine: a delete waits for a run.
			go func() {
				a := w.sessionOp(host, store, op)
				data, _ := json.Marshal(a)
				if int64(len(data)) > c.nc.MaxPayload()-replySlack {
					name, err := c.putBlob(op.ID, data)
					if err != nil {
						name, a = "", sessionAnswer{Err: err.Error()}
					}
					data, _ = json.Marshal(sessionAnswer{Large: name, Err: a.Err})
				}
				_ = m.Respond(data)
			}()
		}
	})
}

// sessionOp does op with the worker's executor.
func (w *worker) sessionOp(host SessionHost, store func(context.Context) (jetstream.ObjectStore, error), op sessionCall) sessionAnswer {
	if host == nil {
		return sessionAnswer{Err: "this worker keeps no sessions"}
	}
	var a sessionAnswer
	var err error
	switch op.Op {
	case "files":
		a.Files, a.Total, err = host.SessionFiles(op.ID)
	case "read":
		var f *os.File
		if f, err = host.OpenSessionFile(op.ID, op.Path); err == nil {
			a.Data, err = readAllFile(f)
		}
	case "remove":
		if err = host.RemoveSessionFile(op.ID, op.Path); err == nil {
			w.snapshot(op.ID)
		}
	case "delete":
		err = host.DeleteSession(op.ID)
	case "trydelete":
		err = host.TryDeleteSession(op.ID)
	case "busy":
		a.Busy = host.SessionBusy(op.ID)
	case "ping": // an API node waiting for another call asks whether this worker is still here
	case "restore":
		ctx, cancel := opCtx()
		defer cancel()
		var obs jetstream.ObjectStore
		if obs, err = store(ctx); err == nil {
			var data []byte
			data, err = getBytes(ctx, obs, op.ID)
			var fs []sandbox.File
			switch {
			case errors.Is(err, jetstream.ErrObjectNotFound):
				err = host.RestoreSession(op.ID, nil) // it never kept files
			case err == nil:
				if err = json.Unmarshal(data, &fs); err == nil {
					err = host.RestoreSession(op.ID, fs)
				}
			}
		}
	default:
		err = fmt.Errorf("unknown session operation %q", op.Op)
	}
	var invalid *executor.InvalidRequestError
	switch {
	case err == nil:
	case errors.Is(err, executor.ErrNoSession):
		a.Kind = "nosession"
	case errors.Is(err, executor.ErrSessionBusy):
		a.Kind = "busy"
	case errors.Is(err, os.ErrNotExist):
		a.Kind = "notexist"
	case errors.As(err, &invalid):
		a.Kind, a.Err = "invalid", invalid.Msg
	default:
		a.Err = err.Error()
	}
	return a
}

// readAllFile reads f whole and closes it.
func readAllFile(f *os.File) ([]byte, error) {
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	data := make([]byte, st.Size())
	_, err = f.ReadAt(data, 0)
	return data, err
}
