package live

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/sandbox-run/sandbox-run/internal/lib/linktree"
	"github.com/sandbox-run/sandbox-run/internal/lib/records"
)

// Filer is a Running whose files (its home and its /tmp) can be copied
// out, frozen meanwhile, and into another (the engine's SaveFiles and
// LoadFiles). SaveFiles fails with an error that wraps ErrTooLarge past
// max bytes.
type Filer interface {
	SaveFiles(ctx context.Context, dir string, max int64) (int64, error)
	LoadFiles(dir string) error
}

// Errors of snapshots.
var (
	// ErrNoSnapshots is a Manager that cannot keep snapshots (no
	// StateDir, or a starter whose sandboxes' files cannot be copied).
	ErrNoSnapshots = errors.New("live: this server keeps no snapshots of sandboxes")
	// ErrTooLarge is a Filer's copy of files past the bound it was given.
	ErrTooLarge = errors.New("live: the sandbox's files are larger than the bound")
	// ErrNoSuchSnapshot is a snapshot that does not exist, or is another
	// owner's.
	ErrNoSuchSnapshot = errors.New("live: no such snapshot (it was deleted, or it is not yours)")
	// ErrNoCopyOnWrite is a FilesStarter's start from files
	// (StartOptions.Files) on a host that cannot: the files are copied
	// in instead.
	ErrNoCopyOnWrite = errors.New("live: this host cannot start a sandbox from files copy-on-write")
)

// Snapshot is a sandbox's files at one moment, kept under its owner's
// name, that new sandboxes start from (CreateOptions.Snapshot).
type Snapshot struct {
	ID, Owner string
	// Names are what its owner called it (at least its ID).
	Names []string
	// SandboxID is the sandbox it was taken of; Options what that
	// sandbox was made with (a sandbox made from it is made so).
	SandboxID string
	Options   CreateOptions
	Created   time.Time
	// Size is the bytes of its files (and memory).
	Size int64
	// Memory: it keeps the sandbox's memory and running processes too
	// (a sandbox that could be written out whole: gVisor's); a sandbox
	// made from it goes on from them, its agent saying Secret (the
	// agent's, in its memory: never shown).
	Memory bool   `json:",omitempty"`
	Secret string `json:",omitempty"`
}

// snapshotsDir keeps the snapshots: one directory each, its files and
// its record (snapshot.json).
func (m *Manager) snapshotsDir() string { return filepath.Join(m.cfg.StateDir, "snapshots") }

// filer is s's Filer, or why there is none.
func (m *Manager) filer(s *Sandbox) (Filer, error) {
	f, ok := s.box().(Filer)
	if !ok || m.cfg.StateDir == "" {
		return nil, ErrNoSnapshots
	}
	return f, nil
}

// SnapshotSandbox takes a snapshot of owner's sandbox id, named name (""
// for none but its id): its files are copied while it is frozen (it goes
// on after, as it was). An owner's snapshots hold at most
// Config.MaxSnapshotBytes together.
func (m *Manager) SnapshotSandbox(ctx context.Context, owner, id, name string) (*Snapshot, error) {
	s, err := m.Get(owner, id)
	if err != nil {
		return nil, err
	}
	c, _, whole := m.checkpointer(s)
	f, err := m.filer(s)
	if err != nil && !whole {
		return nil, err
	}
	used := int64(0)
	for _, sn := range m.Snapshots(owner, "") {
		used += sn.Size
	}
	left := m.cfg.MaxSnapshotBytes - used
	if left <= 0 {
		return nil, &LimitError{Msg: fmt.Sprintf("your snapshots hold %d MiB, the most one key may keep: delete some first", used>>20), Full: true}
	}
	snap := &Snapshot{ID: records.NewID("snap"), Owner: owner, SandboxID: s.ID, Options: s.options(), Created: time.Now().UTC()}
	snap.Names = []string{snap.ID}
	if name != "" {
		snap.Names = append(snap.Names, name)
	}
	dir := filepath.Join(m.snapshotsDir(), snap.ID)
	tmp := dir + ".new"
	os.RemoveAll(tmp)
	if whole {
		snap.Memory, snap.Secret = true, s.secret
		if snap.Size, err = m.checkpoint(ctx, s, c, tmp, left); err == nil && snap.Size > left {
			err = ErrTooLarge // its memory took it past the bound
		}
	} else {
		snap.Size, err = f.SaveFiles(ctx, tmp, left)
	}
	if err != nil {
		os.RemoveAll(tmp)
		if errors.Is(err, ErrTooLarge) {
			return nil, &LimitError{Msg: fmt.Sprintf("the sandbox's files would take your snapshots past the %d MiB one key may keep", m.cfg.MaxSnapshotBytes>>20), Full: true}
		}
		return nil, fmt.Errorf("live: copying the sandbox's files: %w", err)
	}
	if err := os.MkdirAll(tmp, 0o700); err != nil {
		return nil, err
	}
	if err := writeRecord(tmp, snap); err != nil {
		os.RemoveAll(tmp)
		return nil, err
	}
	if err := os.Rename(tmp, dir); err != nil {
		os.RemoveAll(tmp)
		return nil, err
	}
	if st := m.cfg.Snapshots; st != nil {
		// Kept where the cluster's every worker finds it, or not at all.
		if err := st.Put(ctx, snap, dir); err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("live: keeping the snapshot in the cluster: %w", err)
		}
	}
	return snap, nil
}

// writeRecord writes sn's record into its directory dir.
func writeRecord(dir string, sn *Snapshot) error {
	b, err := json.Marshal(sn)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "snapshot.json"), b, 0o600)
}

// Snapshots are owner's snapshots (of sandbox id only, when not ""),
// oldest first.
func (m *Manager) Snapshots(owner, id string) []*Snapshot {
	return StoreSnapshots(m.cfg.Snapshots, owner, id, m.localSnapshots)
}

// StoreSnapshots are owner's snapshots in st (of sandbox id only, when
// not ""), oldest first; without st, or when it cannot answer, those
// local gives (none when local is nil).
func StoreSnapshots(st SnapshotStore, owner, id string, local func(owner string) []*Snapshot) []*Snapshot {
	var all []*Snapshot
	if st != nil {
		ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
		var err error
		all, err = st.List(ctx, owner)
		cancel()
		if err != nil {
			all = nil
			st = nil
		}
	}
	if st == nil && local != nil {
		all = local(owner)
	}
	var out []*Snapshot
	for _, sn := range all {
		if sn.Owner == owner && (id == "" || sn.SandboxID == id) {
			out = append(out, sn)
		}
	}
	slices.SortFunc(out, func(a, b *Snapshot) int { return a.Created.Compare(b.Created) })
	return out
}

// localSnapshots are owner's snapshots in the state directory.
func (m *Manager) localSnapshots(owner string) []*Snapshot {
	if m.cfg.StateDir == "" {
		return nil
	}
	entries, _ := os.ReadDir(m.snapshotsDir())
	var out []*Snapshot
	for _, e := range entries {
		if sn, err := m.readSnapshot(e.Name()); err == nil && sn.Owner == owner {
			out = append(out, sn)
		}
	}
	return out
}

// readSnapshot reads snapshot id's record.
func (m *Manager) readSnapshot(id string) (*Snapshot, error) {
	if id == "" || strings.ContainsAny(id, "/.") {
		return nil, ErrNoSuchSnapshot
	}
	b, err := os.ReadFile(filepath.Join(m.snapshotsDir(), id, "snapshot.json"))
	if err != nil {
		return nil, ErrNoSuchSnapshot
	}
	var sn Snapshot
	if err := json.Unmarshal(b, &sn); err != nil || sn.ID != id {
		return nil, ErrNoSuchSnapshot
	}
	return &sn, nil
}

// GetSnapshot is owner's snapshot id (ErrNoSuchSnapshot: none, or
// another's).
func (m *Manager) GetSnapshot(owner, id string) (*Snapshot, error) {
	if m.cfg.StateDir == "" {
		return nil, ErrNoSuchSnapshot
	}
	if m.cfg.Snapshots != nil {
		if id == "" || strings.ContainsAny(id, "/.") {
			return nil, ErrNoSuchSnapshot
		}
		return m.stored(context.Background(), owner, id)
	}
	sn, err := m.readSnapshot(id)
	if err != nil || sn.Owner != owner {
		return nil, ErrNoSuchSnapshot
	}
	return sn, nil
}

// DeleteSnapshot deletes owner's snapshot id.
func (m *Manager) DeleteSnapshot(owner, id string) error {
	if st := m.cfg.Snapshots; st != nil {
		ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
		err := st.Delete(ctx, owner, id)
		cancel()
		if err != nil {
			return err
		}
		if _, err := m.readSnapshot(id); err != nil {
			return nil // not here
		}
	} else if _, err := m.GetSnapshot(owner, id); err != nil {
		return err
	}
	dir := filepath.Join(m.snapshotsDir(), id)
	gone := dir + ".gone"
	if err := os.Rename(dir, gone); err != nil {
		return err
	}
	return os.RemoveAll(gone)
}

// Fork makes n sandboxes of owner's sandbox id (1 to 100), each a sandbox
// of its own made as id was, with id's files at one moment (id is frozen
// while they are copied, once for all, and goes on after), each living
// timeout (0: the default). The children come back in order; a child
// that could not be made is its error instead. A fork carries files, and
// memory too where the sandbox's backend can copy it (a Cloner: gVisor),
// its running processes going on in each child (ForkedMemory); elsewhere
// the children's processes start anew.
func (m *Manager) Fork(ctx context.Context, owner, id string, n int, timeout time.Duration) ([]*Sandbox, []error, error) {
	if n < 1 || n > 100 {
		return nil, nil, fmt.Errorf("%w: a fork of %d sandboxes: give 1 to 100", ErrInvalid, n)
	}
	s, err := m.Get(owner, id)
	if err != nil {
		return nil, nil, err
	}
	if c, _, ok := m.checkpointer(s); ok {
		return m.forkMemory(ctx, s, c, n, timeout)
	}
	f, err := m.filer(s)
	if err != nil {
		return nil, nil, err
	}
	dir, err := os.MkdirTemp(m.cfg.StateDir, ".fork-")
	if err != nil {
		return nil, nil, err
	}
	defer os.RemoveAll(dir)
	if _, err := f.SaveFiles(ctx, filepath.Join(dir, "files"), 2*m.cfg.DiskBytes); err != nil {
		return nil, nil, fmt.Errorf("live: copying the sandbox's files: %w", err)
	}
	o := s.options()
	o.Timeout = timeout
	kids, errs := make([]*Sandbox, n), make([]error, n)
	for i := range n {
		kids[i], errs[i] = m.createFrom(ctx, owner, o, filepath.Join(dir, "files"))
	}
	return kids, errs, nil
}

// createFrom creates a sandbox of owner's as o says, with the files saved
// in dir: copy-on-write where the starter can (a FilesStarter's, on a
// persistent Manager: dir's tree linked for the sandbox alone), else
// copied in.
func (m *Manager) createFrom(ctx context.Context, owner string, o CreateOptions, dir string) (*Sandbox, error) {
	o.Snapshot = ""
	if m.startsFromFiles() {
		cow := o
		cow.files = dir
		s, err := m.Create(ctx, owner, cow)
		if !errors.Is(err, ErrNoCopyOnWrite) {
			return s, err
		}
		// A host whose kernel cannot: its sandboxes get their files
		// copied.
		m.noCow.Store(true)
		m.cfg.Log.Warn("live: sandboxes cannot start from files copy-on-write here: they are copied in", "err", err)
	}
	s, err := m.Create(ctx, owner, o)
	if err != nil {
		return nil, err
	}
	f, ok := s.box().(Filer)
	if !ok {
		m.Kill(owner, s.ID)
		return nil, ErrNoSnapshots
	}
	if err := f.LoadFiles(dir); err != nil {
		m.Kill(owner, s.ID)
		return nil, fmt.Errorf("live: the files of its snapshot: %w", err)
	}
	return s, nil
}

// startsFromFiles says whether sandboxes start from files copy-on-write
// here (StartOptions.Files).
func (m *Manager) startsFromFiles() bool {
	_, ok := m.start.(FilesStarter)
	return ok && m.persistent() && !m.noCow.Load()
}

// filesDir is where sandbox id's files it started from are (linkFiles).
func (m *Manager) filesDir(id string) string { return filepath.Join(m.cfg.StateDir, "files", id) }

// linkFiles makes dir's tree the files sandbox id starts from
// (StartOptions.Files): hard-linked, no byte copied, into a directory of
// the sandbox's own, which lives as long as it does (forget), whatever
// becomes of dir. What an earlier start of id left there goes.
func (m *Manager) linkFiles(id, dir string) (string, error) {
	to := m.filesDir(id)
	if err := os.RemoveAll(to); err != nil {
		return "", err
	}
	if err := os.MkdirAll(filepath.Dir(to), 0o700); err != nil {
		return "", err
	}
	if _, err := linktree.Link(dir, to, -1); err != nil {
		os.RemoveAll(to)
		return "", fmt.Errorf("live: the files it starts from: %w", err)
	}
	return to, nil
}

// fromSnapshot is o with what snapshot o.Snapshot of owner's was made
// with, for what o leaves out, the snapshot, and its directory.
func (m *Manager) fromSnapshot(owner string, o CreateOptions) (CreateOptions, *Snapshot, string, error) {
	sn, err := m.GetSnapshot(owner, o.Snapshot)
	if err != nil {
		return o, nil, "", err
	}
	base := sn.Options
	if len(o.Languages) == 0 && o.Image == "" {
		o.Languages, o.Image = base.Languages, base.Image
	}
	if o.Network == nil {
		o.Network, o.NetworkBudgets = base.Network, base.NetworkBudgets
	}
	if o.Secrets == nil {
		o.Secrets = base.Secrets
	}
	if o.MemoryBytes == 0 {
		o.MemoryBytes = base.MemoryBytes
	}
	env := maps.Clone(base.Env)
	if env == nil {
		env = map[string]string{}
	}
	maps.Copy(env, o.Env)
	o.Env = env
	if o.Template == "" {
		o.Template = base.Template
	}
	if o.Isolation == "" {
		o.Isolation = base.Isolation
	}
	return o, sn, filepath.Join(m.snapshotsDir(), sn.ID), nil
}

// options are what s was made with (what a fork or a snapshot of it
// makes sandboxes with).
func (s *Sandbox) options() CreateOptions {
	s.mu.Lock()
	defer s.mu.Unlock()
	o := s.opts
	o.Metadata = maps.Clone(s.Metadata)
	o.Template, o.Languages, o.Network, o.Image, o.MemoryBytes = s.Template, slices.Clone(s.Languages), slices.Clone(s.Network), s.Image, s.Memory
	o.PrivatePorts, o.AutoPause, o.Timeout, o.Isolation, o.IdlePause = s.PrivatePorts, s.AutoPause, 0, s.Isolation, s.IdlePause
	o.Secrets, o.NetworkBudgets = slices.Clone(s.Secrets), maps.Clone(s.NetworkBudgets)
	return o
}
