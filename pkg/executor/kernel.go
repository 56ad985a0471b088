package executor

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/sandbox-run/sandbox-run/pkg/intercept/carry"
	"github.com/sandbox-run/sandbox-run/pkg/sandbox"
	"github.com/sandbox-run/sandbox-run/pkg/wire"
)

// Interpreter sessions: a session's runs are cells executed by one
// long-lived interpreter (a kernel: runners/kernel.py) in one sandbox, so
// that variables, imports and functions persist from cell to cell. The
// kernel reads a command per line on its stdin and answers each cell with
// a line of JSON on descriptor 3; the cell's output goes to its stdout and
// stderr as it comes, closed by a marker the command carries (a random
// one per cell), which the executor's splitters take out. The sandbox's
// limits (memory, processes, disk) are the session's; each cell has its
// own wall-time limit: past it the kernel is interrupted (Python's
// KeyboardInterrupt) and, if it does not stop within kernelGrace, killed
// and started again on the next cell (the result says restarted: the
// state is lost).

// kernelRunners are the languages that have a kernel, and how it starts.
var kernelRunners = map[string]func(bin string) []string{
	"python":     func(bin string) []string { return []string{bin, "-B", "-u", RunnerTarget + "/kernel.py"} },
	"javascript": func(bin string) []string { return []string{bin, RunnerTarget + "/kernel.js"} },
}

// SupportsInterpreter reports whether a language has interpreter sessions.
func SupportsInterpreter(language string) bool {
	_, ok := kernelRunners[language]
	return ok
}

// kernelGrace is how long an interrupted cell has to stop before its
// kernel is killed.
const kernelGrace = 2 * time.Second

// maxCellOutput bounds what one cell's stdout and stderr keep each.
const maxCellOutput = 1 << 20

// kernel is one interpreter session's interpreter.
type kernel struct {
	cells sync.Mutex // one cell at a time; the others wait

	proc      kernelProc
	isolation string      // the wall it runs behind (Request.Isolation)
	send      chan []byte // lines for the kernel's stdin, in order (startKernel's writer)
	out, err  *splitter
	answers   chan []byte   // lines from descriptor 3
	ended     chan struct{} // the kernel's sandbox run is over
	endErr    error
	lang      *Language
	tc        *Toolchain
	// network, for a session with network access, is what the kernel's
	// egress saw since it started (every cell's result carries it).
	network func() *wire.NetworkReport
	// proxy and secrets, for a session with secrets, carry its requests
	// with the values each cell brings (the store's as the cell starts)
	// in place of the placeholders the kernel has had since it started.
	proxy   carry.Carrier
	secrets *SecretSession
}

// kernels are the executor's live kernels, and the sessions that have
// had one (a new one for them means their state was lost), by session id.
type kernels struct {
	mu      sync.Mutex
	live    map[string]*kernel
	started map[string]bool
}

// runCell runs req's code as a cell of its session's interpreter,
// starting the interpreter when the session has none running.
func (x *Executor) runCell(ctx context.Context, req *Request, lang *Language, tc *Toolchain, res *Result) (*Result, error) {
	if _, ok := kernelRunners[lang.Name]; !ok {
		return nil, invalid("%s has no interpreter sessions (python and javascript have)", lang.Name)
	}
	k, restarted, err := x.kernelFor(req, lang, tc)
	if err != nil {
		res.Status, res.ExitCode, res.Error = StatusSetupError, -1, err.Error()
		return res, nil
	}
	k.cells.Lock()
	defer k.cells.Unlock()
	if k.proxy != nil {
		k.proxy.SetSecrets(k.secrets.carried(req.Secrets))
	}
	wall := x.limits(req.Limits, lang.Limits, x.defaults).WallTime
	out := k.cell(ctx, string(req.Code), req.Stdin, wall, req.Stdout, req.Stderr)
	res.Stdout, res.StdoutEncoding = EncodeOutput(out.stdout)
	res.Stderr, res.StderrEncoding = EncodeOutput(out.stderr)
	res.StdoutTruncated, res.StderrTruncated = out.stdoutCut, out.stderrCut
	res.DurationMs = ms(out.wall)
	res.Restarted = restarted || out.killed
	switch {
	case out.ended:
		x.dropKernel(req.SessionID, k)
		res.Status, res.ExitCode, res.Error = StatusRuntimeError, -1, "the interpreter ended: "+out.why
	case out.killed:
		x.dropKernel(req.SessionID, k)
		fallthrough
	case out.timedOut || out.canceled:
		res.Status, res.ExitCode, res.LimitReason = StatusTimeout, -1, "wall_time"
		if out.canceled {
			res.Status, res.LimitReason = StatusRuntimeError, "canceled"
		}
	case out.answer.Status == "completed":
		res.Status, res.ExitCode = StatusCompleted, 0
	default:
		res.Status, res.ExitCode = StatusRuntimeError, 1
	}
	res.Value = out.answer.Result
	res.Display = out.answer.Display
	res.Exception = out.answer.Exception
	if k.network != nil {
		res.Network = k.network()
	}
	return res, nil
}

// kernelFor returns the session's kernel, starting one if it has none;
// restarted says the session had one before (its state is lost).
func (x *Executor) kernelFor(req *Request, lang *Language, tc *Toolchain) (k *kernel, restarted bool, err error) {
	ks := &x.kernels
	ks.mu.Lock()
	defer ks.mu.Unlock()
	if k, ok := ks.live[req.SessionID]; ok {
		select {
		case <-k.ended:
		default:
			if k.isolation == isolationOf(req) {
				return k, false, nil
			}
			// A cell behind another wall: never in this interpreter.
			k.proc.Kill()
		}
	}
	if k, err = x.startKernel(req, lang, tc); err != nil {
		return nil, false, err
	}
	if ks.live == nil {
		ks.live, ks.started = map[string]*kernel{}, map[string]bool{}
	}
	restarted = ks.started[req.SessionID]
	ks.live[req.SessionID], ks.started[req.SessionID] = k, true
	return k, restarted, nil
}

// dropKernel forgets (and kills) the session's kernel k.
func (x *Executor) dropKernel(session string, k *kernel) {
	x.kernels.mu.Lock()
	if x.kernels.live[session] == k {
		delete(x.kernels.live, session)
	}
	x.kernels.mu.Unlock()
	k.proc.Kill()
}

// EndInterpreter kills the session's interpreter, if it has one (the
// session ended), and waits until its run is over.
func (x *Executor) EndInterpreter(session string) {
	x.kernels.mu.Lock()
	k := x.kernels.live[session]
	delete(x.kernels.live, session)
	delete(x.kernels.started, session)
	x.kernels.mu.Unlock()
	if k != nil {
		k.proc.Kill()
		<-k.ended
	}
}

// EndInterpreters kills every session's interpreter and waits until their
// runs are over (the sessions' next cells start new ones, their state
// lost). An interpreter's run lasts as long as its session may, past the
// engine's Close: a process that ends calls this first, or its
// interpreters' sandboxes die with it and leave their cgroups behind.
func (x *Executor) EndInterpreters() {
	x.kernels.mu.Lock()
	var live []*kernel
	for session, k := range x.kernels.live {
		live = append(live, k)
		delete(x.kernels.live, session)
	}
	x.kernels.mu.Unlock()
	for _, k := range live {
		k.proc.Kill()
	}
	for _, k := range live {
		<-k.ended
	}
}

// startKernel starts an interpreter for req's session: a sandbox run
// with the session's limits that lasts as long as the session may.
func (x *Executor) startKernel(req *Request, lang *Language, tc *Toolchain) (*kernel, error) {
	if x.runnerDir == "" {
		return nil, fmt.Errorf("the interpreter is not installed: %v", x.runnerErr)
	}
	vars := map[string]string{"bin": tc.Bin, "home": tc.Home, "main": "main"}
	limits := x.runLimits(req, lang, vars)
	// The session lives on: its cells have their own wall limits.
	limits.WallTime, limits.CPUTime = kernelLifetime, kernelLifetime
	stdinR, stdinW := io.Pipe()
	k := &kernel{send: make(chan []byte, 4), answers: make(chan []byte, 4), ended: make(chan struct{}), lang: lang, tc: tc,
		out: newSplitter(), err: newSplitter()}
	answers := &lineWriter{lines: k.answers}
	spec := &sandbox.Spec{
		Args:       kernelRunners[lang.Name](tc.Bin),
		Env:        environment(lang, tc, vars, req.Env),
		Mounts:     x.mounts(tc),
		Root:       tc.Root,
		Limits:     limits,
		Tenant:     req.Tenant,
		Stdin:      stdinR,
		Stdout:     k.out,
		Stderr:     k.err,
		ResultPipe: true,
		ResultOut:  answers,
		Stream:     true,
	}
	release := func() {}
	if len(req.Secrets) > 0 {
		var err error
		if k.proxy, k.secrets, release, err = x.useSecrets(spec, req.Secrets, kernelLifetime); err != nil {
			return nil, err
		}
	}
	if len(req.Network) > 0 {
		report, err := x.network(context.Background(), spec, req.Network, nil, k.proxy)
		if err != nil {
			release()
			return nil, err
		}
		k.network = report
	}
	p, err := x.startProc(req, spec)
	if err != nil {
		release()
		return nil, err
	}
	k.proc, k.isolation = p, isolationOf(req)
	go func() {
		_, err := p.Wait()
		release()      // the CA's files
		stdinR.Close() // a write under way returns
		k.endErr = err
		close(k.ended)
	}()
	// One writer: commands and interrupts reach the kernel in the order
	// sent, and never block a cell's clock.
	go func() {
		for {
			select {
			case line := <-k.send:
				stdinW.Write(line)
			case <-k.ended:
				return
			}
		}
	}()
	return k, nil
}

// kernelLifetime bounds a kernel's run: a session's longest life.
const kernelLifetime = 24 * time.Hour

// cellOutcome is how a cell went.
type cellOutcome struct {
	answer               kernelAnswer
	stdout, stderr       []byte
	stdoutCut, stderrCut bool
	wall                 time.Duration
	timedOut, killed     bool
	canceled             bool // the caller went away
	ended                bool // the kernel ended (why says how)
	why                  string
}

// kernelAnswer is the kernel's line for a cell.
type kernelAnswer struct {
	Status    string              `json:"status"`
	Result    map[string]string   `json:"result"`
	Display   []map[string]string `json:"display"`
	Exception *Exception          `json:"exception"`
}

// cell runs one cell on k and waits for its answer and the end of its
// output, interrupting it past wall and killing the kernel if it does not
// stop within kernelGrace.
func (k *kernel) cell(ctx context.Context, code string, stdin io.Reader, wall time.Duration, liveOut, liveErr io.Writer) cellOutcome {
	var o cellOutcome
	marker := newMarker()
	var outBuf, errBuf capped
	outBuf.max, errBuf.max = maxCellOutput, maxCellOutput
	outSeen := k.out.begin(marker, &outBuf, liveOut)
	errSeen := k.err.begin(marker, &errBuf, liveErr)
	input := ""
	if stdin != nil {
		b, _ := io.ReadAll(io.LimitReader(stdin, MaxTotalBytes))
		input = string(b)
	}
	line, _ := json.Marshal(map[string]string{"cell": code, "marker": marker, "stdin": input})
	// An answer no cell waited for (a killed cell's, or lines the code
	// wrote on descriptor 3 itself) is not this cell's.
	for len(k.answers) > 0 {
		<-k.answers
	}
	start := time.Now()
	send := func(b []byte) {
		select {
		case k.send <- append(b, '\n'):
		case <-k.ended:
		}
	}
	send(line)
	timer := time.NewTimer(wall)
	defer timer.Stop()
	var grace <-chan time.Time
	var gotAnswer bool
	var answer []byte
	for !gotAnswer || outSeen != nil || errSeen != nil {
		select {
		case answer = <-k.answers:
			gotAnswer = true
		case <-outSeen:
			outSeen = nil
		case <-errSeen:
			errSeen = nil
		case <-k.ended:
			o.killed, o.ended = true, true
			o.why = "its sandbox ended"
			if k.endErr != nil {
				o.why = k.endErr.Error()
			}
			goto done
		case <-timer.C:
			o.timedOut = true
			send([]byte(`{"interrupt": true}`))
			grace = time.After(kernelGrace)
		case <-ctx.Done():
			o.canceled = true
			send([]byte(`{"interrupt": true}`))
			grace = time.After(kernelGrace)
			ctx = context.Background()
		case <-grace:
			o.killed = true
			goto done
		}
	}
done:
	o.wall = time.Since(start)
	k.out.end()
	k.err.end()
	o.stdout, o.stdoutCut = outBuf.buf.Bytes(), outBuf.cut
	o.stderr, o.stderrCut = errBuf.buf.Bytes(), errBuf.cut
	if answer != nil {
		if err := json.Unmarshal(answer, &o.answer); err != nil {
			o.answer = kernelAnswer{Status: "error", Exception: &Exception{Type: "KernelError", Message: "an unreadable answer: " + err.Error()}}
		}
	}
	return o
}

func newMarker() string {
	b := make([]byte, 12)
	rand.Read(b)
	return "\x00sandbox-run-cell-" + hex.EncodeToString(b) + "\x00"
}

// capped keeps up to max bytes.
type capped struct {
	buf bytes.Buffer
	max int
	cut bool
}

func (c *capped) Write(p []byte) (int, error) {
	keep := min(len(p), c.max-c.buf.Len())
	if keep > 0 {
		c.buf.Write(p[:keep])
	}
	if keep < len(p) {
		c.cut = true
	}
	return len(p), nil
}

// lineWriter passes each line written to it (without its newline) on.
type lineWriter struct {
	lines chan []byte
	buf   []byte
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			break
		}
		line := append([]byte(nil), w.buf[:i]...)
		w.buf = w.buf[i+1:]
		select {
		case w.lines <- line:
		default: // nobody waits for it: never block the kernel's output
		}
	}
	if len(w.buf) > 64<<20 {
		w.buf = nil // a line that never ends: the kernel misbehaves
	}
	return len(p), nil
}

// splitter takes one of a kernel's output streams and gives each cell what
// it printed before the cell's marker; what comes between cells goes to
// the next one.
type splitter struct {
	mu      sync.Mutex
	marker  []byte
	sink    io.Writer
	live    io.Writer
	pending []byte // a possible start of the marker
	seen    chan struct{}
	between capped
}

func newSplitter() *splitter {
	s := &splitter{}
	s.between.max = 64 << 10
	return s
}

// begin starts a cell: its output goes to sink (and live), until marker;
// the returned channel is closed when the marker has passed.
func (s *splitter) begin(marker string, sink, live io.Writer) <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.marker, s.sink, s.live = []byte(marker), sink, live
	s.seen = make(chan struct{})
	if s.between.buf.Len() > 0 {
		s.emit(s.between.buf.Bytes())
		s.between = capped{max: s.between.max}
	}
	return s.seen
}

// end ends the cell: what comes after goes to the next.
func (s *splitter) end() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pending != nil {
		s.emit(s.pending)
		s.pending = nil
	}
	s.marker, s.sink, s.live = nil, nil, nil
}

func (s *splitter) emit(p []byte) {
	if len(p) == 0 {
		return
	}
	if s.sink == nil {
		s.between.Write(p)
		return
	}
	s.sink.Write(p)
	if s.live != nil {
		s.live.Write(p)
	}
}

func (s *splitter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	data := append(s.pending, p...)
	s.pending = nil
	for len(data) > 0 {
		if s.marker == nil {
			s.emit(data)
			break
		}
		if i := bytes.Index(data, s.marker); i >= 0 {
			s.emit(data[:i])
			data = data[i+len(s.marker):]
			close(s.seen)
			s.marker, s.sink, s.live = nil, nil, nil
			continue
		}
		// Hold back the longest end of data that may begin the marker.
		k := min(len(s.marker)-1, len(data))
		for ; k > 0; k-- {
			if bytes.HasPrefix(s.marker, data[len(data)-k:]) {
				break
			}
		}
		s.emit(data[:len(data)-k])
		s.pending = append([]byte(nil), data[len(data)-k:]...)
		break
	}
	return len(p), nil
}

// kernelProc is an interpreter's sandbox run going on: the engine's
// (*sandbox.Process) or another wall's (isolatedRun).
type kernelProc interface {
	Wait() (*sandbox.Result, error)
	Kill()
}

// isolationOf is the wall req runs behind ("" and native are one).
func isolationOf(req *Request) string {
	if req.Isolation == IsolationGVisor {
		return IsolationGVisor
	}
	return IsolationNative
}

// startProc starts spec, a run that lasts, behind req's wall.
func (x *Executor) startProc(req *Request, spec *sandbox.Spec) (kernelProc, error) {
	if isolationOf(req) == IsolationNative {
		return x.engine.Start(context.Background(), spec)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &isolatedRun{kill: cancel, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		r.res, r.err = x.isolator(req).Run(ctx, spec)
	}()
	return r, nil
}

// isolatedRun is a run of an Isolator's in the background: Kill cancels
// it (the Isolator ends it as a caller gone), Wait returns its result.
type isolatedRun struct {
	kill func()
	done chan struct{}
	res  *sandbox.Result
	err  error
}

func (r *isolatedRun) Kill() { r.kill() }

func (r *isolatedRun) Wait() (*sandbox.Result, error) {
	<-r.done
	return r.res, r.err
}
