// Package repl is sandbox-run's read-eval-print loop on an interpreter
// session (wire.SessionRequest.Interpreter), in this process (the run
// service, as `sandbox-run mcp` has it) or on a server (pkg/client). Each
// cell the user completes runs in the session's long-lived interpreter,
// so state persists; its output, the value of its last expression, what
// it displayed and its exception are printed as Python's REPL prints
// them. `sandbox-run repl` is its command.
package repl

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/sandbox-run/sandbox-run/internal/app/cli"
	"github.com/sandbox-run/sandbox-run/pkg/client"
	"github.com/sandbox-run/sandbox-run/pkg/config"
	"github.com/sandbox-run/sandbox-run/pkg/executor"
	"github.com/sandbox-run/sandbox-run/pkg/local"
	"github.com/sandbox-run/sandbox-run/pkg/runner"
	"github.com/sandbox-run/sandbox-run/pkg/wire"
)

// Exit codes, as the command's.
const (
	exitUsage       = cli.ExitUsage
	exitSetup       = cli.ExitSetup
	exitInterrupted = cli.ExitInterrupted
)

// Options are a loop's and its session's.
type Options struct {
	Language   string  // python or javascript
	Image      string  // an OCI image for the interpreter's root, if any
	Timeout    float64 // each cell's wall-clock limit in seconds (0: the default)
	SaveImages string  // a directory for the images cells display, if any
	// Console is where output and messages go.
	Console *cli.Console
	// LogLevelSet: the user asked for a log level (a local service logs
	// warnings only otherwise).
	LogLevelSet bool
}

// Cells runs the cells of one interpreter session, local or remote.
type Cells interface {
	// Cell runs code as the session's next cell. A cell that did not run
	// (refused, the sandbox or server failed, interrupted before it had a
	// result) is a *Failed, said already.
	Cell(ctx context.Context, code string) (*wire.Result, error)
	// Language is the session's language, by its canonical name.
	Language() string
	// Close ends the session and frees what it holds.
	Close()
}

// Failed is a cell that did not run; what went wrong has been printed.
// Code is exitUsage when the request was refused (the loop goes on),
// exitSetup when the sandbox or the server failed, exitInterrupted when
// the cell was interrupted before it had a result.
type Failed struct{ Code int }

func (e *Failed) Error() string {
	return fmt.Sprintf("the cell did not run (exit code %d)", e.Code)
}

// ---------------------------------------------------------------------------
// Local: the run service in this process, as `sandbox-run mcp` has it.

type localCells struct {
	con     *cli.Console
	cfg     config.Config
	x       *executor.Executor
	svc     *runner.Service
	req     wire.SessionRequest
	lang    string
	timeout float64
	id      string
}

// Local opens an interpreter session of a run service in this process,
// configured by cfg; on failure it says why and returns the exit code.
func Local(cfg config.Config, o Options) (Cells, int) {
	fatalf := sayer(o.Console)
	if err := cfg.ValidateLocal(); err != nil {
		return nil, fatalf(exitUsage, "config: %v", err)
	}
	if o.Image != "" {
		// images.allow is a server's policy for its clients: here the
		// image is the user's own choice, as for execute --image.
		cfg.Images.Allow = append(cfg.Images.Allow, o.Image)
	}
	// The CLI's messages say what matters: the service logs only
	// warnings, unless asked.
	level := slog.LevelWarn
	if o.LogLevelSet || cfg.LogLevel == "debug" {
		level = slog.LevelInfo
		if cfg.LogLevel == "debug" {
			level = slog.LevelDebug
		}
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	x, err := local.NewExecutor(cfg)
	if err != nil {
		return nil, fatalf(exitSetup, "cannot sandbox on this host: %v", err)
	}
	// Sessions in memory, for the process's life, as mcp's.
	rc := runner.ConfigFrom(cfg)
	rc.SessionDir = ""
	l := &localCells{con: o.Console, cfg: cfg, x: x, svc: runner.New(rc, local.New(x), log, nil), timeout: o.Timeout,
		req: wire.SessionRequest{Language: o.Language, Interpreter: true, Image: o.Image,
			// The session lasts as long as the loop: as long as it may.
			TTLSeconds: cfg.SessionMaxTTLSeconds, SessionLimits: wire.SessionLimits{TimeoutSeconds: o.Timeout}}}
	if err := l.open(); err != nil {
		l.Close()
		if runner.KindOf(err) == runner.Invalid {
			return nil, fatalf(exitUsage, "%v", err)
		}
		return nil, fatalf(exitSetup, "%v", err)
	}
	return l, 0
}

// sayer is the command's fatalf on con: it prints "sandbox-run: ..." and
// returns code.
func sayer(con *cli.Console) func(code int, format string, a ...any) int {
	return func(code int, format string, a ...any) int {
		con.Printf("sandbox-run: "+format+"\n", a...)
		return code
	}
}

// open creates the session.
func (l *localCells) open() error {
	sess, err := l.svc.CreateSession("", l.req)
	if err != nil {
		return err
	}
	l.id, l.lang = sess.ID, sess.Language
	return nil
}

func (l *localCells) Language() string { return l.lang }

func (l *localCells) Cell(ctx context.Context, code string) (*wire.Result, error) {
	restarted := false
	if _, ok := l.svc.Sessions().Get(l.id, ""); !ok {
		// Expired (idle past session_max_ttl_seconds): a new one.
		l.svc.EndSession(l.id, "")
		if err := l.open(); err != nil {
			return nil, l.fail(ctx, err)
		}
		restarted = true
	}
	// What run_in_session does: the checks of POST /api/sandbox/execute,
	// the session's defaults (UseSession), then the run service.
	req := wire.ExecuteRequest{Language: l.lang, Code: code, SessionID: l.id, Limits: wire.Limits{TimeoutSeconds: l.timeout}}
	if err := l.svc.Prepare(ctx, &req, ""); err != nil {
		return nil, l.fail(ctx, err)
	}
	res, err := l.svc.Run(ctx, runner.Run{Request: &req, Via: "cli", Session: l.id})
	if err != nil {
		return nil, l.fail(ctx, err)
	}
	if res.Status == executor.StatusSetupError {
		return nil, &Failed{sayer(l.con)(exitSetup, "the sandbox could not be set up (execution %s): %s", res.ExecutionID, res.Error)}
	}
	res.Restarted = res.Restarted || restarted
	return res, nil
}

func (l *localCells) fail(ctx context.Context, err error) error {
	fatalf := sayer(l.con)
	switch k := runner.KindOf(err); {
	case ctx.Err() != nil || k == runner.Canceled:
		return &Failed{fatalf(exitInterrupted, "interrupted")}
	case k == runner.Invalid || k == runner.Full:
		return &Failed{fatalf(exitUsage, "%v", err)}
	default:
		return &Failed{fatalf(exitSetup, "%v", err)}
	}
}

func (l *localCells) Close() {
	l.svc.EndAllSessions()
	l.x.Engine().Close()
}

// ---------------------------------------------------------------------------
// Remote: a session of a sandbox-run server, as execute --server talks to it.

type remoteCells struct {
	con     *cli.Console
	failure func(context.Context, error) int
	c       *client.Client
	server  string
	req     wire.SessionRequest
	lang    string
	timeout float64
	id      string
}

// Remote opens an interpreter session on the server c talks to (at
// server); failure says why a call to it failed and returns the exit code
// (the command's remoteFailure).
func Remote(ctx context.Context, c *client.Client, server string, o Options, failure func(context.Context, error) int) (Cells, int) {
	r := &remoteCells{con: o.Console, failure: failure, c: c, server: server, timeout: o.Timeout,
		req: wire.SessionRequest{Language: o.Language, Interpreter: true, Image: o.Image,
			SessionLimits: wire.SessionLimits{TimeoutSeconds: o.Timeout}}}
	if err := r.open(ctx); err != nil {
		return nil, failure(ctx, err)
	}
	return r, 0
}

func (r *remoteCells) open(ctx context.Context) error {
	info, err := r.c.CreateSession(ctx, &r.req)
	if err != nil {
		return err
	}
	r.id, r.lang = info.SessionID, info.Language
	return nil
}

func (r *remoteCells) Language() string { return r.lang }

func (r *remoteCells) Cell(ctx context.Context, code string) (*wire.Result, error) {
	req := &wire.ExecuteRequest{Language: r.lang, Code: code, SessionID: r.id, Limits: wire.Limits{TimeoutSeconds: r.timeout}}
	res, err := r.c.Execute(ctx, req)
	var ae *client.Error
	if res == nil && errors.As(err, &ae) && ae.StatusCode == http.StatusBadRequest &&
		strings.HasPrefix(ae.Message, "unknown session") && ctx.Err() == nil {
		// The server ended the session (idle past its session_idle_seconds):
		// a new one, whose state is fresh.
		if err := r.open(ctx); err != nil {
			return nil, &Failed{r.failure(ctx, err)}
		}
		req.SessionID = r.id
		if res, err = r.c.Execute(ctx, req); res != nil {
			res.Restarted = true
		}
	}
	if res == nil {
		return nil, &Failed{r.failure(ctx, err)}
	}
	if err != nil || res.Status == wire.StatusSetupError {
		// 500: the sandbox could not be set up.
		return nil, &Failed{sayer(r.con)(exitSetup, "the sandbox could not be set up (execution %s): %s", res.ExecutionID, res.Error)}
	}
	return res, nil
}

func (r *remoteCells) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var ae *client.Error
	if err := r.c.DeleteSession(ctx, r.id); err != nil && !(errors.As(err, &ae) && ae.StatusCode == http.StatusNotFound) {
		r.con.Printf("sandbox-run: deleting session %s: %v\n", r.id, err)
	}
}

// ---------------------------------------------------------------------------
// The loop.

type repl struct {
	con      *cli.Console
	cells    Cells
	python   bool
	terminal bool   // standard input is a terminal: prompts, Ctrl-C clears the cell
	saveDir  string // --save-images
	n        int    // cells run
	buf      cellBuffer

	events chan inputEvent // standard input, read ahead
	queue  []inputEvent    // what came while a cell ran
}

// inputEvent is a line of standard input, Ctrl-C typed on the terminal,
// or the end of the input.
type inputEvent struct {
	text      string
	interrupt bool
	eof       bool
}

// readInput sends in's lines to events, then its end. intr (a terminal's
// interrupt character, when it reaches the input: see ctrlCAsInput) ends
// a line too, which is then dropped for an interrupt.
func readInput(in io.Reader, intr byte, events chan<- inputEvent) {
	buf := make([]byte, 64<<10)
	var line []byte
	for {
		n, err := in.Read(buf)
		for _, c := range buf[:n] {
			switch {
			case c == '\n':
				events <- inputEvent{text: strings.TrimSuffix(string(line), "\r")}
				line = line[:0]
			case intr != 0 && c == intr:
				events <- inputEvent{interrupt: true}
				line = line[:0]
			default:
				line = append(line, c)
			}
		}
		if err != nil {
			if len(line) > 0 {
				events <- inputEvent{text: string(line)}
			}
			events <- inputEvent{eof: true}
			return
		}
	}
}

// ctrlCAsInput, where the system allows, makes Ctrl-C on the terminal f
// input instead of SIGINT, and returns the character it reads as and how
// to set the terminal back; intr is 0 when it cannot (SIGINT then stands
// for Ctrl-C).
var ctrlCAsInput = func(f *os.File) (intr byte, restore func()) { return 0, func() {} }

// Loop reads cells from in and runs them on cells until EOF, exit() or a
// signal of sigs that ends it (SIGINT on a terminal interrupts the running
// cell instead), and returns the exit code. The caller closes cells.
func Loop(cells Cells, in *os.File, sigs <-chan os.Signal, o Options) int {
	r := &repl{con: o.Console, cells: cells, python: cells.Language() == "python", terminal: cli.IsTerminal(in), saveDir: o.SaveImages}
	return r.loop(in, sigs)
}

func (r *repl) loop(in *os.File, sigs <-chan os.Signal) int {
	r.buf.python = r.python
	var intr byte
	if r.terminal {
		var restore func()
		intr, restore = ctrlCAsInput(in)
		defer restore()
	}
	r.events = make(chan inputEvent)
	go readInput(in, intr, r.events)
	for {
		if r.terminal {
			prompt := ">>> "
			if r.buf.pending() {
				prompt = "... "
			}
			fmt.Fprint(os.Stderr, prompt)
		}
		var ev inputEvent
		if len(r.queue) > 0 {
			ev, r.queue = r.queue[0], r.queue[1:]
		} else {
			select {
			case ev = <-r.events:
			case s := <-sigs:
				if s != os.Interrupt || !r.terminal {
					return sayer(r.con)(exitInterrupted, "interrupted")
				}
				ev.interrupt = true
			}
		}
		var cells []string
		switch {
		case ev.interrupt:
			// Ctrl-C at the prompt: the line typed is gone, and the cell.
			r.buf.reset()
			fmt.Fprint(os.Stderr, "\nKeyboardInterrupt\n")
			continue
		case ev.eof:
			if r.terminal {
				fmt.Fprintln(os.Stderr)
			}
			cells = r.buf.flush()
		default:
			cells = r.buf.add(ev.text)
		}
		for _, c := range cells {
			if isExit(c, r.python) {
				return 0
			}
			if code, stop := r.run(c, sigs); stop {
				return code
			}
		}
		if ev.eof {
			return 0
		}
	}
}

// isExit says whether a cell asks to end the loop.
func isExit(cell string, python bool) bool {
	switch strings.TrimSpace(cell) {
	case "exit()", "quit()":
		return true
	case ".exit":
		return !python // node's
	}
	return false
}

// run runs one cell and prints what it did; stop says the loop ends with
// code. Ctrl-C (or SIGINT) interrupts the cell; input typed meanwhile
// waits for the next prompt.
func (r *repl) run(code string, sigs <-chan os.Signal) (exit int, stop bool) {
	r.n++
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type outcome struct {
		res *wire.Result
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := r.cells.Cell(ctx, code)
		done <- outcome{res, err}
	}()
	var o outcome
	var sig os.Signal
	for got := false; !got; {
		select {
		case o = <-done:
			got = true
		case ev := <-r.events:
			if ev.interrupt {
				sig = os.Interrupt
				fmt.Fprintln(os.Stderr) // after the "^C" the terminal echoed
			} else {
				r.queue = append(r.queue, ev)
			}
		case sig = <-sigs:
		}
		if sig != nil && !got {
			// The runner (or the server) interrupts the cell: the session
			// lives on.
			cancel()
			o, got = <-done, true
		}
	}
	if o.res != nil {
		r.show(o.res)
	}
	if sig != nil && (sig != os.Interrupt || !r.terminal) {
		if o.res != nil {
			r.con.Message("sandbox-run: interrupted\n")
		}
		return exitInterrupted, true
	}
	var failed *Failed
	if errors.As(o.err, &failed) && failed.Code == exitSetup && !r.terminal {
		// A script goes no further than a cell that could not run.
		return exitSetup, true
	}
	return 0, false
}

// imageTypes are the image types of a display bundle, as files.
var imageTypes = []struct{ mime, ext string }{{"image/png", "png"}, {"image/jpeg", "jpg"}, {"image/gif", "gif"}, {"image/webp", "webp"}}

// show prints a cell's result as a REPL does: its output, then what it
// displayed and its value, its exception, and how it ended when that was
// not of its own accord.
func (r *repl) show(res *wire.Result) {
	stopped := res.Status == wire.StatusTimeout || res.LimitReason == "canceled"
	if res.Restarted && !stopped {
		r.con.Message("sandbox-run: the interpreter was restarted: the session's state (variables, imports, functions) is lost\n")
	}
	stdout, stderr := decodeOutput(res.Stdout, res.StdoutEncoding), decodeOutput(res.Stderr, res.StderrEncoding)
	r.con.Stdout().Write(stdout)
	r.con.Stderr().Write(stderr)
	if res.StdoutTruncated || res.StderrTruncated {
		r.con.Message("sandbox-run: the cell's output was cut at its limit\n")
	}
	out := &lineStart{w: r.con.Stdout(), mid: len(stdout) > 0 && stdout[len(stdout)-1] != '\n'}
	k := 0
	for _, b := range res.Display {
		r.showBundle(out, b, &k)
	}
	if len(res.Value) > 0 {
		r.showBundle(out, res.Value, &k)
	}
	if e := res.Exception; e != nil {
		// The interpreters print the traceback on stderr themselves.
		tb := strings.TrimSpace(e.Traceback)
		switch {
		case tb != "" && strings.Contains(string(stderr), tb):
		case tb != "":
			r.con.Message(tb + "\n")
		default:
			r.con.Message(e.Type + ": " + e.Message + "\n")
		}
	}
	switch {
	case res.Status == wire.StatusTimeout:
		r.con.Message("sandbox-run: timeout: the cell ran past its time limit and was interrupted\n")
	case res.Error != "":
		r.con.Message("sandbox-run: " + res.Error + "\n")
	}
	if res.Restarted && stopped {
		r.con.Message("sandbox-run: the interpreter did not stop and was killed: the session's state is lost\n")
	}
	if r.terminal && out.mid {
		out.w.Write([]byte("\n")) // the prompt starts a line
	}
}

// showBundle prints one MIME bundle (a displayed object, or the value):
// an image is written to --save-images (its path printed), else its
// text/plain form, else a line naming it.
func (r *repl) showBundle(out *lineStart, b map[string]string, k *int) {
	for _, im := range imageTypes {
		data, ok := b[im.mime]
		if !ok {
			continue
		}
		raw, err := base64.StdEncoding.DecodeString(data)
		if err != nil {
			break
		}
		*k++
		if r.saveDir != "" {
			path := filepath.Join(r.saveDir, fmt.Sprintf("cell-%d-%d.%s", r.n, *k, im.ext))
			if err := os.WriteFile(path, raw, 0o644); err != nil {
				r.con.Printf("sandbox-run: --save-images: %v\n", err)
			} else {
				out.line(path)
			}
			return
		}
		if text, ok := b["text/plain"]; ok {
			out.line(text)
		} else {
			out.line(fmt.Sprintf("[%s, %d bytes]", im.mime, len(raw)))
		}
		return
	}
	if text, ok := b["text/plain"]; ok {
		out.line(text)
		return
	}
	mimes := make([]string, 0, len(b))
	for m := range b {
		mimes = append(mimes, m)
	}
	sort.Strings(mimes)
	if len(mimes) > 0 {
		out.line(fmt.Sprintf("[%s, %d bytes]", mimes[0], len(b[mimes[0]])))
	}
}

// lineStart writes lines to w, each on a line of its own.
type lineStart struct {
	w   io.Writer
	mid bool // what w got last ended no line
}

func (l *lineStart) line(s string) {
	if l.mid {
		l.w.Write([]byte("\n"))
	}
	l.w.Write([]byte(s + "\n"))
	l.mid = false
}

func decodeOutput(s, encoding string) []byte {
	if encoding == "base64" {
		if b, err := base64.StdEncoding.DecodeString(s); err == nil {
			return b
		}
	}
	return []byte(s)
}

// ---------------------------------------------------------------------------
// Cells from lines.

// cellBuffer gathers lines into cells. A cell goes on while a bracket
// ( [ { is open, a string or comment runs on (Python's triple quotes,
// JavaScript's template literals and block comments), or a line ends
// with '\'; in Python also while a line ends with ':' or is a decorator,
// and then until an empty line: a block ends with an empty line (as in
// Python's REPL) or with a line that is not indented and continues no
// clause (else, elif, except, finally), which starts the next cell.
// Quotes and brackets are told roughly: enough for a REPL.
type cellBuffer struct {
	python bool
	lines  []string
}

// pending says whether a cell has begun.
func (b *cellBuffer) pending() bool { return len(b.lines) > 0 }

// reset drops the cell begun.
func (b *cellBuffer) reset() { b.lines = nil }

// add adds a line and returns the cells it completes, in order.
func (b *cellBuffer) add(line string) []string {
	var ready []string
	if b.python && len(b.lines) > 0 && b.endsBlock(line) {
		ready = b.flush()
	}
	if len(b.lines) == 0 && strings.TrimSpace(line) == "" {
		return ready // no empty cells
	}
	b.lines = append(b.lines, line)
	if !b.incomplete() {
		ready = append(ready, b.flush()...)
	}
	return ready
}

// flush returns the cell begun, if any, and starts a new one.
func (b *cellBuffer) flush() []string {
	cell := strings.TrimRight(strings.Join(b.lines, "\n"), " \t\n")
	b.lines = nil
	if strings.TrimSpace(cell) == "" {
		return nil
	}
	return []string{cell}
}

// incomplete says whether the lines so far need more.
func (b *cellBuffer) incomplete() bool {
	st := scanCell(b.lines, b.python)
	if st.depth > 0 || st.open || st.cont {
		return true
	}
	if !b.python {
		return false
	}
	last := strings.TrimSpace(b.lines[len(b.lines)-1])
	if strings.HasPrefix(last, "@") {
		return true // a decorator: its definition follows
	}
	return st.block && last != ""
}

// endsBlock says whether line, which comes after a Python block that no
// empty line ended, starts a new cell instead.
func (b *cellBuffer) endsBlock(line string) bool {
	st := scanCell(b.lines, true)
	if !st.block || st.depth > 0 || st.open || st.cont || line == "" || strings.TrimSpace(b.lines[len(b.lines)-1]) == "" {
		return false
	}
	if line[0] == ' ' || line[0] == '\t' || line[0] == '#' || line[0] == ')' || line[0] == ']' || line[0] == '}' {
		return false
	}
	for _, kw := range []string{"else", "elif", "except", "finally"} {
		if rest, ok := strings.CutPrefix(line, kw); ok && (rest == "" || strings.IndexByte(" \t:", rest[0]) >= 0) {
			return false
		}
	}
	return true
}

// cellState is what scanCell learns of a cell's lines.
type cellState struct {
	depth int  // brackets open
	open  bool // inside a string or comment that runs on
	cont  bool // the last line ends with '\' outside strings
	block bool // Python: a line ends with ':' outside brackets
}

// scanCell reads lines as Python (or JavaScript) roughly: brackets,
// strings and comments.
func scanCell(lines []string, python bool) cellState {
	var st cellState
	quote := ""      // the string's closing quote, while in one
	comment := false // in a /* */ comment
	for _, line := range lines {
		var last byte // the line's last character outside strings and comments
		for i := 0; i < len(line); {
			c := line[i]
			switch {
			case comment:
				if strings.HasPrefix(line[i:], "*/") {
					comment = false
					i += 2
					continue
				}
				i++
				continue
			case quote != "":
				if c == '\\' {
					i += 2
					continue
				}
				if strings.HasPrefix(line[i:], quote) {
					i += len(quote)
					quote, last = "", c
					continue
				}
				i++
				continue
			case python && c == '#', !python && strings.HasPrefix(line[i:], "//"):
				i = len(line)
				continue
			case !python && strings.HasPrefix(line[i:], "/*"):
				comment = true
				i += 2
				continue
			case c == '"' || c == '\'' || !python && c == '`':
				quote = string(c)
				if python && (strings.HasPrefix(line[i:], `"""`) || strings.HasPrefix(line[i:], `'''`)) {
					quote = line[i : i+3]
				}
				i += len(quote)
				continue
			case c == '(' || c == '[' || c == '{':
				st.depth++
			case c == ')' || c == ']' || c == '}':
				st.depth = max(st.depth-1, 0)
			}
			if c != ' ' && c != '\t' {
				last = c
			}
			i++
		}
		// A one-line string ends with its line, unless a '\' continues it.
		if (quote == `"` || quote == `'`) && !strings.HasSuffix(line, `\`) {
			quote = ""
		}
		st.cont = quote == "" && !comment && last == '\\'
		if python && quote == "" && last == ':' && st.depth == 0 {
			st.block = true
		}
	}
	st.open = quote != "" || comment
	return st
}
