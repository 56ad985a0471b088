package gvisor

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/sandbox-run/sandbox-run/pkg/sandbox"
)

// The pool: sandboxes booted ahead (runsc create and start, their first
// program the shim, waiting on its stdin: ShimMain), so that a run's cost
// is its program's, not gVisor's boot. A booted sandbox fits the specs
// with the same mounts, sizes of /work and /tmp, rlimits and hostname (its
// key); its cgroup takes the run's limits when it is taken, and its CPU
// time is counted from then. Each kind of spec gets its sandboxes ahead
// after its first run; at most maxPoolKeys kinds are kept, the least
// recently used let go.
//
// Runs of one kind that come faster than sandboxes boot (a boot takes
// 100-200 ms of CPU, a bash run from the pool about 40 ms) empty its
// pool, and each run that then finds none boots its own. So a kind that
// ran out keeps twice as many ahead, up to maxBurst times Config.Pool,
// until burstFor passes without it running out again. At most as many
// sandboxes boot ahead at once as the host has CPUs (at least 2): more
// only slow down the runs going on.

const (
	// maxPoolKeys bounds the kinds of specs the pool keeps sandboxes for.
	maxPoolKeys = 4
	// maxBurst bounds how many times Config.Pool a kind keeps after it
	// ran out.
	maxBurst = 4
	// burstFor is how long a kind keeps more after it ran out.
	burstFor = time.Minute
)

// pool keeps booted sandboxes by key.
type pool struct {
	mu      sync.Mutex
	ready   map[string][]*box
	filling map[string]int       // boots going on or waiting their turn
	target  map[string]int       // how many a kind keeps: Config.Pool, more after it ran out
	emptied map[string]time.Time // when a run of the kind last found none
	used    []string             // keys, least recently used first
	closed  bool
	turns   chan struct{} // the boots that may go on at once
	fills   sync.WaitGroup
}

// poolKey is what a sandbox booted for spec fixes; "" when spec cannot be
// run by one (an image's root: its mounts are the image's).
func poolKey(spec *sandbox.Spec, l sandbox.Limits) string {
	if spec.Root != "" {
		return ""
	}
	var network any
	if n := spec.Network; n != nil {
		network = []any{n.Address, n.Gateway, n.Address6, n.Gateway6, n.MTU}
	}
	b, _ := json.Marshal([]any{spec.Mounts, spec.Hostname, network, l.WorkSize, l.TmpSize, l.Inodes, l.OpenFiles, l.FileSize, l.Stack, l.Processes, sandbox.CPUBackstop(l.CPUTime)})
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:12])
}

// take is a booted sandbox for spec, or nil; either way the pool boots
// more for its kind.
func (p *pool) take(g *Runner, spec *sandbox.Spec, l sandbox.Limits) *box {
	key := poolKey(spec, l)
	if g.cfg.Pool <= 0 || key == "" || !shimReady.Load() {
		return nil
	}
	cp := *spec
	cp.Files, cp.Stdin, cp.Stdout, cp.Stderr, cp.Budget, cp.ResultOut = nil, nil, nil, nil, nil, nil
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	if p.ready == nil {
		p.ready, p.filling, p.target, p.emptied = map[string][]*box{}, map[string]int{}, map[string]int{}, map[string]time.Time{}
		p.turns = make(chan struct{}, max(2, runtime.NumCPU()))
	}
	p.used = append(slices.DeleteFunc(p.used, func(k string) bool { return k == key }), key)
	var spare []*box
	for len(p.used) > maxPoolKeys {
		old := p.used[0]
		p.used = p.used[1:]
		spare = append(spare, p.ready[old]...)
		delete(p.ready, old)
		delete(p.target, old)
		delete(p.emptied, old)
	}
	known := p.target[key] != 0 // a kind's first run finds none, as it should
	if !known || p.target[key] > g.cfg.Pool && time.Since(p.emptied[key]) > burstFor {
		p.target[key] = g.cfg.Pool
		if n := len(p.ready[key]); n > g.cfg.Pool {
			spare = append(spare, p.ready[key][g.cfg.Pool:]...)
			p.ready[key] = p.ready[key][:g.cfg.Pool]
		}
	}
	var b *box
	if boxes := p.ready[key]; len(boxes) > 0 {
		b, p.ready[key] = boxes[0], boxes[1:]
	} else if known {
		p.emptied[key] = time.Now()
		p.target[key] = min(2*p.target[key], maxBurst*g.cfg.Pool)
	}
	p.refill(g, key, &cp, l)
	p.mu.Unlock()
	for _, s := range spare {
		s.close(g)
	}
	return b
}

// refill starts the boots key's kind needs to have its target ready or
// booting. p.mu is held.
func (p *pool) refill(g *Runner, key string, spec *sandbox.Spec, l sandbox.Limits) {
	for ; !p.closed && len(p.ready[key])+p.filling[key] < p.target[key]; p.filling[key]++ {
		p.fills.Go(func() { p.bootOne(g, key, spec, l) })
	}
}

// bootOne boots a sandbox of key's kind, in its turn, and keeps it while
// the kind is kept.
func (p *pool) bootOne(g *Runner, key string, spec *sandbox.Spec, l sandbox.Limits) {
	p.turns <- struct{}{}
	p.mu.Lock()
	wanted := !p.closed && slices.Contains(p.used, key)
	p.mu.Unlock()
	var b *box
	if wanted {
		b, _ = g.boot(spec, l, key)
	}
	<-p.turns
	p.mu.Lock()
	p.filling[key]--
	keep := b != nil && !p.closed && slices.Contains(p.used, key)
	if keep {
		p.ready[key] = append(p.ready[key], b)
	}
	p.mu.Unlock()
	if b != nil && !keep {
		b.close(g)
	}
}

// close lets every booted sandbox go.
func (p *pool) close(g *Runner) {
	p.mu.Lock()
	p.closed = true
	var all []*box
	for _, boxes := range p.ready {
		all = append(all, boxes...)
	}
	p.ready = nil
	p.mu.Unlock()
	for _, b := range all {
		b.close(g)
	}
	p.fills.Wait() // a sandbox booting now is let go as it is ready
}

// boot boots a sandbox for spec's kind: its container run detached
// with our pipes for its stdio and a pipe of ours for the shim's report
// (its descriptor 3), the shim waiting for its program.
func (g *Runner) boot(spec *sandbox.Spec, l sandbox.Limits, key string) (_ *box, err error) {
	b, err := g.newBox(spec, l, nil, true)
	if err != nil {
		return nil, err
	}
	b.key = key
	defer func() {
		if err != nil {
			b.close(g)
		}
	}()
	var theirs []*os.File
	defer func() {
		for _, f := range theirs {
			f.Close()
		}
	}()
	for _, mine := range []**os.File{&b.in, &b.out, &b.err, &b.status, &b.result} {
		r, w, err := os.Pipe()
		if err != nil {
			return nil, err
		}
		if mine == &b.in {
			*mine, theirs = w, append(theirs, r)
		} else {
			*mine, theirs = r, append(theirs, w)
		}
	}
	run := exec.Command(g.cfg.Runsc, g.runArgs(b, "run", "--detach", "--pass-fd", "3:3", "--pass-fd", "4:4", "--bundle", b.bundle, b.id)...)
	run.Dir = b.bundle
	run.Stdin, run.Stdout, run.Stderr = theirs[0], theirs[1], theirs[2]
	run.ExtraFiles = theirs[3:]
	if err := run.Run(); err != nil {
		return nil, fmt.Errorf("gvisor: runsc run --detach: %v", err)
	}
	b.booted = time.Now()
	return b, nil
}

// runPooled runs spec in b, a sandbox booted ahead.
func (g *Runner) runPooled(ctx context.Context, b *box, spec *sandbox.Spec, l sandbox.Limits) (*sandbox.Result, error) {
	// Removed once the result is out (Close waits for it): its processes
	// are gone by then, what it holds is left to remove.
	g.closing.Add(1)
	defer func() {
		go func() {
			defer g.closing.Done()
			b.close(g)
		}()
	}()
	if err := b.work.WriteFiles(spec.Files, uid); err != nil {
		return nil, err
	}
	if err := b.attach(spec); err != nil {
		return nil, err
	}
	if err := b.cg.setLimits(l); err != nil {
		return nil, &sandbox.SetupError{Step: "cgroup", Err: err}
	}
	cpuBase := b.cg.cpu()
	w := g.watch(ctx, b, l, cpuBase)
	stdout, stderr := w.captures(spec, l)
	// The result pipe (Spec.ResultPipe): the program's descriptor 3,
	// bounded as its output is.
	result := &sandbox.Capture{Max: l.OutputBytes, Budget: spec.Budget, Live: spec.ResultOut, Stream: spec.Stream, Exceeded: stdout.Exceeded}
	var copies sync.WaitGroup
	for _, c := range []struct {
		w io.Writer
		r *os.File
	}{{stdout, b.out}, {stderr, b.err}, {result, b.result}} {
		copies.Go(func() { io.Copy(c.w, c.r) })
	}
	dir := spec.Dir
	if dir == "" {
		dir = "/work"
	}
	h := frame(header{Args: spec.Args, Env: spec.Env, Dir: dir, Result: spec.ResultPipe})
	start := time.Now()
	if _, err := b.in.Write(h); err != nil {
		w.stop()
		return nil, &sandbox.SetupError{Step: "runsc", Err: fmt.Errorf("the booted sandbox is gone: %w", err)}
	}
	in := b.in
	b.in = nil
	go func() {
		if spec.Stdin != nil {
			io.Copy(in, spec.Stdin)
		}
		in.Close()
	}()
	// The shim's report comes once the program has ended; nothing comes
	// when the sandbox was killed (a limit) or died (its memory).
	var st shimStatus
	reported := json.NewDecoder(b.status).Decode(&st) == nil
	copies.Wait() // the sandbox ends with the shim
	wall := time.Since(start)
	limit := w.stop()
	b.detachNetwork()
	if !reported {
		st.Signal = int(syscall.SIGKILL) // the sandbox was ended
	}
	res := g.result(b, spec, l, limit, st.Exit, syscall.Signal(st.Signal), wall, cpuBase, stdout, stderr)
	res.ResultData, res.ResultTruncated = result.Bytes()
	if !reported && res.Limit == "" {
		return nil, &sandbox.SetupError{Step: "runsc", Err: errors.New("the sandbox ended without its program's status")}
	}
	return res, nil
}

// ids are the sandboxes booted ahead now.
func (p *pool) ids() map[string]bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	ids := map[string]bool{}
	for _, boxes := range p.ready {
		for _, b := range boxes {
			ids[b.id] = true
		}
	}
	return ids
}
