package agent

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Main is the agent's entry point: when this process was started as Path
// it serves the host on stdin and descriptor 3 and exits; otherwise it
// returns at once. Call it first thing in main.
func Main() {
	if len(os.Args) == 0 || os.Args[0] != Path {
		return
	}
	if reapAsInit() {
		os.Exit(reap()) // PID 1 (reaper.go): the agent proper is its child
	}
	// An idle agent is most of an idle sandbox's memory: keep its heap
	// small, and give back what the program's start-up used (once it
	// serves: not on the way to its first command).
	debug.SetGCPercent(25)
	time.AfterFunc(time.Second, debug.FreeOSMemory)
	var err error
	if sock := os.Getenv(EnvSocket); sock != "" {
		err = mainSocket(sock)
	} else {
		// The events' descriptor came across exec: no process the agent
		// starts may inherit it (and write frames the host would believe).
		syscall.CloseOnExec(3)
		err = Serve(os.Stdin, os.NewFile(3, "events"))
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "sandbox-run agent:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// Serve answers the requests read from in with events written to out until
// in ends; then it kills what it started and returns.
func Serve(in io.Reader, out io.Writer) error {
	a := newAgent(writerOut{out})
	err := a.serve(in)
	a.killAll()
	a.unwatchAll()
	a.running.Wait()
	return err
}

func newAgent(out frameWriter) *agent {
	return &agent{out: out, procs: map[int]*proc{}, watches: map[uint64]*watch{}}
}

// serve answers the requests read from in until it ends.
func (a *agent) serve(in io.Reader) error {
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 64<<10), MaxFrame)
	for sc.Scan() {
		var r Request
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			a.send(Event{Type: EvError, Code: CodeInvalid, Error: "a frame that is not a request: " + err.Error()})
			continue
		}
		a.handle(r)
	}
	return sc.Err()
}

// frameWriter takes the agent's frames, each a line of JSON; keep marks
// one that must not be dropped (a process's end, an answer).
type frameWriter interface {
	writeFrame(b []byte, keep bool)
}

// writerOut writes frames to a writer (errors: the host is gone).
type writerOut struct{ w io.Writer }

func (o writerOut) writeFrame(b []byte, _ bool) { _, _ = o.w.Write(b) }

type agent struct {
	wmu sync.Mutex
	out frameWriter

	// relay is the host's socket for OpDial ("": none, the pipe mode);
	// relayed are the host's ends of the relays going on.
	relay   string
	relayMu sync.Mutex
	relayed map[net.Conn]bool

	mu      sync.Mutex
	procs   map[int]*proc
	watches map[uint64]*watch // by their request's ID
	running sync.WaitGroup
}

type proc struct {
	info  Process
	cmd   *exec.Cmd
	stdin io.WriteCloser // nil: none
	pty   *os.File       // its terminal's master; nil: none
}

// watch is a running OpWatch.
type watch struct {
	w    *watcher
	done chan struct{} // closed once its stream ended
}

func (a *agent) send(ev Event) {
	b, err := json.Marshal(ev)
	if err != nil {
		return
	}
	keep := ev.Type != EvStdout && ev.Type != EvStderr && ev.Type != EvPTY && ev.Type != EvFS
	a.wmu.Lock()
	defer a.wmu.Unlock()
	a.out.writeFrame(append(b, '\n'), keep)
}

func (a *agent) fail(id uint64, err error) {
	code := CodeInternal
	switch {
	case errors.Is(err, fs.ErrNotExist):
		code = CodeNotFound
	case errors.Is(err, fs.ErrExist):
		code = CodeExists
	case errors.Is(err, fs.ErrPermission):
		code = CodeDenied
	case errors.Is(err, errInvalid):
		code = CodeInvalid
	case errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) || errors.Is(err, syscall.EFBIG):
		code = CodeNoSpace
	}
	a.send(Event{ID: id, Type: EvError, Code: code, Error: err.Error()})
}

var errInvalid = errors.New("invalid request")

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errInvalid, fmt.Sprintf(format, args...))
}

func (a *agent) handle(r Request) {
	switch r.Op {
	case OpStart:
		a.start(r)
	case OpInput, OpCloseStdin, OpSignal, OpResize:
		a.toProcess(r)
	case OpDial:
		go a.dial(r)
	case OpWatch:
		a.watch(r)
	case OpUnwatch:
		a.unwatch(r)
	case OpList:
		a.mu.Lock()
		procs := make([]Process, 0, len(a.procs))
		for _, p := range a.procs {
			procs = append(procs, p.info)
		}
		a.mu.Unlock()
		sort.Slice(procs, func(i, j int) bool { return procs[i].PID < procs[j].PID })
		a.send(Event{ID: r.ID, Type: EvOK, Procs: procs})
	default:
		// File operations may take a while (a large file): off the loop.
		go a.file(r)
	}
}

// withShell is args, except that a shell command line for bash (bash -l
// -c LINE, as the doors send one) runs as sh -c LINE where the sandbox
// has no bash (an image of its own: alpine, busybox).
func withShell(args []string) []string {
	if len(args) != 4 || (args[0] != "bash" && args[0] != "/bin/bash") || args[1] != "-l" || args[2] != "-c" {
		return args
	}
	if _, err := exec.LookPath(args[0]); err == nil {
		return args
	}
	if sh, err := exec.LookPath("sh"); err == nil {
		return []string{sh, "-c", args[3]}
	}
	return args
}

// start starts r's process in a process group of its own (with r.PTY,
// in a session of its own, on a new terminal): its events follow under
// r.ID, started first and exit last.
func (a *agent) start(r Request) {
	if len(r.Args) == 0 {
		a.fail(r.ID, invalid("start without a command"))
		return
	}
	args := withShell(r.Args)
	cmd := exec.Command(args[0], args[1:]...)
	// The sandbox's environment (the agent's own), then the request's.
	cmd.Env, cmd.Dir = append(os.Environ(), r.Env...), r.Dir
	// What the agent reads of it, by the type of their events, and the
	// other ends, the process's (the agent's copies closed once it
	// started). Its outputs are pipes or a terminal of the agent's own
	// (not exec's copying), so that their end is known when it exits,
	// even while a process it left in the background still holds them.
	streams := map[string]*os.File{}
	var theirs []*os.File
	pipe := func(typ string) (*os.File, error) {
		rd, w, err := os.Pipe()
		if err == nil {
			streams[typ] = rd
			theirs = append(theirs, w)
		}
		return w, err
	}
	var pty *os.File
	var stdin io.WriteCloser
	var err error
	if r.PTY != nil {
		// The terminal is its stdin, stdout and stderr, and the
		// controlling terminal of its session (whose leader it is, and
		// so of a process group of its own).
		var tty *os.File
		if pty, tty, err = openPTY(*r.PTY); err == nil {
			streams[EvPTY] = pty
			theirs = append(theirs, tty)
			cmd.Stdin, cmd.Stdout, cmd.Stderr = tty, tty, tty
			cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
		}
	} else {
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if cmd.Stdout, err = pipe(EvStdout); err == nil {
			cmd.Stderr, err = pipe(EvStderr)
		}
	}
	if err == nil && r.Result {
		var w *os.File
		if w, err = pipe(EvResult); err == nil {
			cmd.ExtraFiles = []*os.File{w} // its descriptor 3
		}
	}
	if err == nil && r.Stdin && r.PTY == nil {
		stdin, err = cmd.StdinPipe() // last: Start closes it if it fails
	}
	if err == nil {
		err = cmd.Start()
	}
	for _, f := range theirs {
		f.Close()
	}
	if err != nil {
		for _, f := range streams {
			f.Close()
		}
		a.fail(r.ID, err)
		return
	}
	// When the sandbox runs out of memory, the kernel is to kill what the
	// agent started before the agent (without which the sandbox is lost).
	_ = os.WriteFile(fmt.Sprintf("/proc/%d/oom_score_adj", cmd.Process.Pid), []byte(oomScoreAdj), 0)
	p := &proc{info: Process{PID: cmd.Process.Pid, Args: r.Args, Dir: r.Dir, Tag: r.Tag, PTY: pty != nil}, cmd: cmd, stdin: stdin, pty: pty}
	a.mu.Lock()
	a.procs[p.info.PID] = p
	a.mu.Unlock()
	a.send(Event{ID: r.ID, Type: EvStarted, PID: p.info.PID})
	a.running.Add(1)
	go func() {
		defer a.running.Done()
		var copied sync.WaitGroup
		for typ, rd := range streams {
			copied.Go(func() { a.stream(r.ID, p.info.PID, typ, rd) })
		}
		err := cmd.Wait()
		// What it wrote before it exited is in the pipes (or the
		// terminal): read that, but not what a process it left behind
		// may write for hours.
		drain := time.Now().Add(drainAfterExit)
		for _, rd := range streams {
			rd.SetReadDeadline(drain)
		}
		copied.Wait()
		a.mu.Lock()
		delete(a.procs, p.info.PID)
		a.mu.Unlock()
		for _, rd := range streams {
			rd.Close()
		}
		ev := Event{ID: r.ID, Type: EvExit, PID: p.info.PID, Status: cmd.ProcessState.String()}
		code := cmd.ProcessState.ExitCode()
		ev.Exit = &code
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			ev.Error = err.Error()
		} else if code < 0 {
			ev.Error = ev.Status // killed by a signal
		}
		a.send(ev)
	}()
}

// oomScoreAdj is the agent's processes' (and their children's) standing
// with the out-of-memory killer: ahead of the agent's own 0.
const oomScoreAdj = "500"

// drainAfterExit is how long a process's output is read after it exited
// while something else still holds its pipes.
const drainAfterExit = 200 * time.Millisecond

// stream sends what rd gives as events of typ until it ends (a
// terminal's master reads EIO once no process holds the terminal), or
// until its read deadline (the process exited): then what is left in
// it, without waiting for more.
func (a *agent) stream(id uint64, pid int, typ string, rd *os.File) {
	buf := make([]byte, 32<<10)
	for {
		n, err := rd.Read(buf)
		if n > 0 {
			a.send(Event{ID: id, Type: typ, PID: pid, Data: slices.Clone(buf[:n])})
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			break
		}
		if err != nil {
			return
		}
	}
	// A reader late past the deadline must still take what was written
	// before the exit: read until the pipe is empty.
	rc, err := rd.SyscallConn()
	if err != nil {
		return
	}
	for {
		n := 0
		_ = rc.Read(func(fd uintptr) bool {
			n, _ = syscall.Read(int(fd), buf)
			return true // never wait
		})
		if n <= 0 {
			return
		}
		a.send(Event{ID: id, Type: typ, PID: pid, Data: slices.Clone(buf[:n])})
	}
}

func (a *agent) toProcess(r Request) {
	a.mu.Lock()
	p := a.procs[r.PID]
	a.mu.Unlock()
	if p == nil {
		a.fail(r.ID, fmt.Errorf("process %d: %w", r.PID, fs.ErrNotExist))
		return
	}
	var err error
	switch r.Op {
	case OpInput:
		switch {
		case p.pty != nil:
			_, err = p.pty.Write(r.Data)
		case p.stdin == nil:
			err = invalid("process %d was started without stdin", r.PID)
		default:
			_, err = p.stdin.Write(r.Data)
		}
	case OpCloseStdin:
		// A terminal has no end: its end-of-file is a character (^D,
		// \x04, in canonical mode), for the host to send as input.
		if p.pty != nil {
			err = invalid("process %d reads a terminal: send its end-of-file character as input", r.PID)
		} else if p.stdin != nil {
			err = p.stdin.Close()
		}
	case OpResize:
		switch {
		case p.pty == nil:
			err = invalid("process %d has no terminal", r.PID)
		case r.Size == nil:
			err = invalid("resize without a size")
		default:
			err = setSize(p.pty, *r.Size)
		}
	case OpSignal:
		sig := syscall.Signal(r.Signal)
		if r.Signal <= 0 || r.Signal > 64 {
			err = invalid("signal %d", r.Signal)
		} else if err = syscall.Kill(-r.PID, sig); errors.Is(err, syscall.ESRCH) {
			err = p.cmd.Process.Signal(sig) // its group is gone; the process may not be
		}
	}
	if err != nil {
		a.fail(r.ID, err)
		return
	}
	a.send(Event{ID: r.ID, Type: EvOK})
}

// killAll ends every process group the agent started.
func (a *agent) killAll() {
	a.mu.Lock()
	defer a.mu.Unlock()
	for pid := range a.procs {
		_ = syscall.Kill(-pid, syscall.SIGKILL)
	}
}

// watch starts watching r.Path (and, with r.Recursive, the directories
// under it): EvStarted, then EvFS events under r.ID until OpUnwatch (or
// the watch ends on its own: its directory gone, events lost), then
// EvExit, with Error when it ended on its own.
func (a *agent) watch(r Request) {
	if r.Path == "" {
		a.fail(r.ID, invalid("watch without a path"))
		return
	}
	a.mu.Lock()
	_, dup := a.watches[r.ID]
	a.mu.Unlock()
	if dup {
		a.fail(r.ID, invalid("watch %d runs already", r.ID))
		return
	}
	w, err := newWatcher(r.Path, r.Recursive)
	if err != nil {
		a.fail(r.ID, err)
		return
	}
	wt := &watch{w: w, done: make(chan struct{})}
	a.mu.Lock()
	a.watches[r.ID] = wt
	a.mu.Unlock()
	a.send(Event{ID: r.ID, Type: EvStarted})
	a.running.Add(1)
	go func() {
		defer a.running.Done()
		err := w.run(func(name, op string) {
			a.send(Event{ID: r.ID, Type: EvFS, Name: name, FSOp: op})
		})
		w.close()
		a.mu.Lock()
		if a.watches[r.ID] == wt {
			delete(a.watches, r.ID)
		}
		a.mu.Unlock()
		ev := Event{ID: r.ID, Type: EvExit}
		if err != nil {
			ev.Error = err.Error()
		}
		a.send(ev)
		close(wt.done)
	}()
}

// unwatch stops watch r.Watch and answers once its stream ended.
func (a *agent) unwatch(r Request) {
	a.mu.Lock()
	wt := a.watches[r.Watch]
	delete(a.watches, r.Watch)
	a.mu.Unlock()
	if wt == nil {
		a.fail(r.ID, fmt.Errorf("watch %d: %w", r.Watch, fs.ErrNotExist))
		return
	}
	wt.w.close()
	<-wt.done
	a.send(Event{ID: r.ID, Type: EvOK})
}

// unwatchAll stops every watch.
func (a *agent) unwatchAll() {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, wt := range a.watches {
		wt.w.close()
	}
}

func (a *agent) file(r Request) {
	if r.Path == "" {
		a.fail(r.ID, invalid("%s without a path", r.Op))
		return
	}
	ev := Event{ID: r.ID, Type: EvOK}
	var err error
	switch r.Op {
	case OpReadFile:
		ev.Data, ev.EOF, err = readChunk(r.Path, r.Offset, r.Limit)
	case OpWriteFile:
		mode := r.Mode.Perm()
		if mode == 0 {
			mode = 0o644
		}
		switch {
		case len(r.Data) > MaxChunk:
			err = invalid("a write of %d bytes: at most %d at once (append the rest)", len(r.Data), MaxChunk)
		case r.Append:
			err = appendFile(r.Path, r.Data, mode)
		default:
			if err = os.MkdirAll(filepath.Dir(r.Path), 0o755); err == nil {
				err = writeFile(r.Path, r.Data, mode)
			}
		}
		if err == nil {
			ev.Entry, err = stat(r.Path)
		}
	case OpStat:
		ev.Entry, err = stat(r.Path)
	case OpListDir:
		ev.Entries, err = listDir(r.Path, max(r.Depth, 1))
	case OpMkdir:
		if _, serr := os.Lstat(r.Path); serr == nil {
			err = fmt.Errorf("%s: %w", r.Path, fs.ErrExist)
		} else if err = os.MkdirAll(r.Path, 0o755); err == nil {
			ev.Entry, err = stat(r.Path)
		}
	case OpMove:
		if r.To == "" {
			err = invalid("move without a destination")
		} else if err = os.Rename(r.Path, r.To); err == nil {
			ev.Entry, err = stat(r.To)
		}
	case OpRemove:
		if _, err = os.Lstat(r.Path); err == nil {
			err = os.RemoveAll(r.Path)
		}
	default:
		err = invalid("unknown op %q", r.Op)
	}
	if err != nil {
		a.fail(r.ID, err)
		return
	}
	a.send(ev)
}

// writeFile writes data to path through a temporary file beside it, so a
// reader never sees half of it.
// readChunk reads at most limit bytes (MaxChunk at most) of the file at
// path from offset, and says whether it reached the file's end (a file
// that never ends, /dev/zero, gives a chunk at a time all the same).
func readChunk(path string, offset, limit int64) ([]byte, bool, error) {
	if offset < 0 {
		return nil, false, invalid("offset %d", offset)
	}
	if limit <= 0 || limit > MaxChunk {
		limit = MaxChunk
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, false, err
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.IsDir() {
		return nil, false, invalid("%s is a directory", path)
	}
	if offset > 0 {
		if _, err := f.Seek(offset, io.SeekStart); err != nil {
			return nil, false, err
		}
	}
	buf := make([]byte, limit)
	n, err := io.ReadFull(f, buf)
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		return buf[:n], true, nil
	}
	if err != nil {
		return nil, false, err
	}
	// A full chunk: the end if nothing follows.
	var one [1]byte
	m, _ := f.Read(one[:])
	return buf[:n], m == 0, nil
}

// appendFile appends data to the file at path, made if need be.
func appendFile(path string, data []byte, mode os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, mode)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

func writeFile(path string, data []byte, mode os.FileMode) error {
	f, err := os.CreateTemp(filepath.Dir(path), ".sandbox-run-write-*")
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(f.Name(), mode)
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
	}
	return err
}

func stat(path string) (*Entry, error) {
	fi, err := os.Lstat(path)
	if err != nil {
		return nil, err
	}
	e := entryOf(path, fi)
	return &e, nil
}

func entryOf(path string, fi fs.FileInfo) Entry {
	e := Entry{Name: fi.Name(), Path: path, Size: fi.Size(), Mode: fi.Mode().Perm(), ModTime: fi.ModTime().UTC(), Type: "file"}
	switch {
	case fi.IsDir():
		e.Type = "dir"
	case fi.Mode()&fs.ModeSymlink != 0:
		e.Type = "symlink"
		e.Target, _ = os.Readlink(path)
	}
	return e
}

// listDir lists dir's entries, and theirs down to depth levels.
func listDir(dir string, depth int) ([]Entry, error) {
	fi, err := os.Stat(dir)
	if err != nil {
		return nil, err
	}
	if !fi.IsDir() {
		return nil, invalid("%s is not a directory", dir)
	}
	var out []Entry
	var walk func(string, int) error
	walk = func(d string, level int) error {
		des, err := os.ReadDir(d)
		if err != nil {
			return err
		}
		for _, de := range des {
			p := filepath.Join(d, de.Name())
			info, err := de.Info()
			if err != nil {
				continue // gone meanwhile
			}
			out = append(out, entryOf(p, info))
			if de.IsDir() && level < depth {
				if err := walk(p, level+1); err != nil && !errors.Is(err, fs.ErrPermission) {
					return err
				}
			}
		}
		return nil
	}
	return out, walk(dir, 1)
}

// dial is OpDial: a connection to r.Port on the sandbox's loopback,
// relayed to the host through its relay socket under r.Token, until
// either side ends it.
func (a *agent) dial(r Request) {
	switch {
	case a.relay == "":
		a.fail(r.ID, invalid("no relay for ports here"))
		return
	case r.Port < 1 || r.Port > 65535 || r.Token == "" || strings.ContainsAny(r.Token, "\n"):
		a.fail(r.ID, invalid("dial of port %d", r.Port))
		return
	}
	in, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(r.Port)), 5*time.Second)
	if err != nil {
		a.fail(r.ID, err)
		return
	}
	out, err := net.DialTimeout("unix", a.relay, 5*time.Second)
	if err == nil {
		_, err = out.Write([]byte(r.Token + "\n"))
	}
	if err != nil {
		in.Close()
		if out != nil {
			out.Close()
		}
		a.fail(r.ID, err)
		return
	}
	a.send(Event{ID: r.ID, Type: EvOK})
	a.relayMu.Lock()
	if a.relayed == nil {
		a.relayed = map[net.Conn]bool{}
	}
	a.relayed[out] = true
	a.relayMu.Unlock()
	splice(in.(*net.TCPConn), out.(*net.UnixConn))
	a.relayMu.Lock()
	delete(a.relayed, out)
	a.relayMu.Unlock()
}

// dropRelays ends the relays going on (after a checkpoint, whose end of
// their host connections their reads do not hear of).
func (a *agent) dropRelays() {
	a.relayMu.Lock()
	defer a.relayMu.Unlock()
	for c := range a.relayed {
		c.Close()
	}
}

// halfCloser is a connection whose sending side closes alone.
type halfCloser interface {
	net.Conn
	CloseWrite() error
}

// splice copies a to b and b to a, each direction's end passed on, and
// closes both once both ended.
func splice(a, b halfCloser) {
	var wg sync.WaitGroup
	for _, p := range [][2]halfCloser{{a, b}, {b, a}} {
		wg.Go(func() {
			io.Copy(p[1], p[0])
			p[1].CloseWrite()
		})
	}
	wg.Wait()
	a.Close()
	b.Close()
}
