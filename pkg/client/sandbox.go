package client

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/sandbox-run/sandbox-run/pkg/wire"
)

// Live sandboxes (/api/sandbox/sandboxes): sandboxes that stay up between
// calls, with processes, files, a terminal and ports, until they are
// killed or their timeout passes.
//
//	sb, err := c.CreateSandbox(ctx, wire.SandboxRequest{Languages: []string{"python"}})
//	res, err := c.Exec(ctx, sb.ID, wire.ProcessRequest{Command: "echo hello > f.txt; cat f.txt"})
//	f, err := c.ReadFile(ctx, sb.ID, "f.txt")
//	err = c.KillSandbox(ctx, sb.ID)
//
// Paths in a sandbox are relative to its home, /work, unless absolute.
// A sandbox that does not exist (or is another key's, or has ended) is an
// *Error of status 404: IsNotFound tells it.

const sandboxesPath = "/api/sandbox/sandboxes"

// sandboxPath is the URL path of sandbox id, with suffix.
func sandboxPath(id, suffix string) string {
	return sandboxesPath + "/" + url.PathEscape(id) + suffix
}

// IsNotFound reports whether err is an *Error of status 404: for a live
// sandbox, one that does not exist, is another key's or has ended; for a
// file, one that is not there.
func IsNotFound(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.StatusCode == http.StatusNotFound
}

// CreateSandbox creates a live sandbox (POST /api/sandbox/sandboxes). The
// answer carries its AccessToken, which no other call shows.
func (c *Client) CreateSandbox(ctx context.Context, req wire.SandboxRequest) (*wire.Sandbox, error) {
	var sb wire.Sandbox
	if err := c.call(ctx, http.MethodPost, sandboxesPath, req, &sb); err != nil {
		return nil, err
	}
	return &sb, nil
}

// ListSandboxes lists the key's live sandboxes.
func (c *Client) ListSandboxes(ctx context.Context) ([]wire.Sandbox, error) {
	var out struct {
		Sandboxes []wire.Sandbox `json:"sandboxes"`
	}
	if err := c.call(ctx, http.MethodGet, sandboxesPath, nil, &out); err != nil {
		return nil, err
	}
	return out.Sandboxes, nil
}

// GetSandbox returns a live sandbox.
func (c *Client) GetSandbox(ctx context.Context, id string) (*wire.Sandbox, error) {
	var sb wire.Sandbox
	if err := c.call(ctx, http.MethodGet, sandboxPath(id, ""), nil, &sb); err != nil {
		return nil, err
	}
	return &sb, nil
}

// KillSandbox ends a live sandbox and everything in it.
func (c *Client) KillSandbox(ctx context.Context, id string) error {
	return c.call(ctx, http.MethodDelete, sandboxPath(id, ""), nil, nil)
}

// SetSandboxTimeout makes a live sandbox end d from now (sooner or later
// than it would have), and returns it with its new EndAt.
func (c *Client) SetSandboxTimeout(ctx context.Context, id string, d time.Duration) (*wire.Sandbox, error) {
	var sb wire.Sandbox
	in := map[string]float64{"timeout_seconds": d.Seconds()}
	if err := c.call(ctx, http.MethodPost, sandboxPath(id, "/timeout"), in, &sb); err != nil {
		return nil, err
	}
	return &sb, nil
}

// SetSandboxNetwork changes what a live sandbox's network may reach, while
// it runs, to allow (within the server's network.allow; empty or nil: it
// reaches nothing), and returns it with its new Network. Its open
// connections the new list leaves out are reset. A sandbox made without a
// network (wire.SandboxRequest.Network) cannot be given one: an *Error of
// status 400. It is UpdateSandboxNetwork without budgets: any the sandbox
// had are dropped.
func (c *Client) SetSandboxNetwork(ctx context.Context, id string, allow []string) (*wire.Sandbox, error) {
	return c.UpdateSandboxNetwork(ctx, id, wire.NetworkRequest{Allow: allow})
}

// UpdateSandboxNetwork changes a live sandbox's network while it runs, as
// SetSandboxNetwork does, to n.Allow, and the bytes it may move by entry
// of it to n.Budgets (none: no bound). An entry that keeps a budget keeps
// what it has moved; one given a budget anew starts from nothing. It
// returns the sandbox with its new Network and NetworkBudgets. A budget
// for an entry n.Allow lacks, or of no bytes, is an *Error of status 400.
func (c *Client) UpdateSandboxNetwork(ctx context.Context, id string, n wire.NetworkRequest) (*wire.Sandbox, error) {
	var sb wire.Sandbox
	in := wire.NetworkRequest{Allow: append([]string{}, n.Allow...), Budgets: n.Budgets}
	if err := c.call(ctx, http.MethodPut, sandboxPath(id, "/network"), in, &sb); err != nil {
		return nil, err
	}
	return &sb, nil
}

// PauseSandbox pauses a live sandbox: its processes frozen where they
// are, its timeout stopped, until ResumeSandbox or any call that needs it
// running. A sandbox paused already is an *Error with Status 409.
func (c *Client) PauseSandbox(ctx context.Context, id string) (*wire.Sandbox, error) {
	var sb wire.Sandbox
	if err := c.call(ctx, http.MethodPost, sandboxPath(id, "/pause"), nil, &sb); err != nil {
		return nil, err
	}
	return &sb, nil
}

// EvictSandbox pauses a live sandbox (paused already is fine) and writes
// it to disk, its memory given back: under gVisor its processes come back
// where they were on the next call, otherwise only its files do.
func (c *Client) EvictSandbox(ctx context.Context, id string) (*wire.Sandbox, error) {
	var sb wire.Sandbox
	if err := c.call(ctx, http.MethodPost, sandboxPath(id, "/pause"), map[string]bool{"evict": true}, &sb); err != nil {
		return nil, err
	}
	return &sb, nil
}

// ResumeSandbox resumes a paused live sandbox (one that runs is left
// so): its timeout is d from now, or with d 0 what was left of it when it
// was paused.
func (c *Client) ResumeSandbox(ctx context.Context, id string, d time.Duration) (*wire.Sandbox, error) {
	var sb wire.Sandbox
	var in any
	if d > 0 {
		in = map[string]float64{"timeout_seconds": d.Seconds()}
	}
	if err := c.call(ctx, http.MethodPost, sandboxPath(id, "/resume"), in, &sb); err != nil {
		return nil, err
	}
	return &sb, nil
}

// SnapshotSandbox keeps a live sandbox's files (its home and /tmp) as a
// snapshot, named name ("" for none but its id), that new sandboxes start
// from (wire.SandboxRequest.Snapshot).
func (c *Client) SnapshotSandbox(ctx context.Context, id, name string) (*wire.Snapshot, error) {
	var sn wire.Snapshot
	var in any
	if name != "" {
		in = map[string]string{"name": name}
	}
	if err := c.call(ctx, http.MethodPost, sandboxPath(id, "/snapshots"), in, &sn); err != nil {
		return nil, err
	}
	return &sn, nil
}

// ListSnapshots lists the key's snapshots (of sandbox id only, when not "").
func (c *Client) ListSnapshots(ctx context.Context, id string) ([]wire.Snapshot, error) {
	var out struct {
		Snapshots []wire.Snapshot `json:"snapshots"`
	}
	p := "/api/sandbox/snapshots"
	if id != "" {
		p += "?sandbox_id=" + url.QueryEscape(id)
	}
	if err := c.call(ctx, http.MethodGet, p, nil, &out); err != nil {
		return nil, err
	}
	return out.Snapshots, nil
}

// DeleteSnapshot deletes one of the key's snapshots.
func (c *Client) DeleteSnapshot(ctx context.Context, id string) error {
	return c.call(ctx, http.MethodDelete, "/api/sandbox/snapshots/"+url.PathEscape(id), nil, nil)
}

// ForkSandbox makes n sandboxes (1 to 100) with a live sandbox's files,
// each living d (0: the server's default).
func (c *Client) ForkSandbox(ctx context.Context, id string, n int, d time.Duration) (*wire.ForkResult, error) {
	var out wire.ForkResult
	in := map[string]any{"count": n}
	if d > 0 {
		in["timeout_seconds"] = d.Seconds()
	}
	if err := c.call(ctx, http.MethodPost, sandboxPath(id, "/fork"), in, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Exec runs a process in a live sandbox and waits for its end: its exit
// code (-1 and Status "signal: ..." when a signal killed it) and its
// output, each cut at the server's response budget. Command runs through
// `bash -l -c`; Args, instead, is an argv. Cancelling ctx kills the
// process. A process that cannot start (no such program or directory) is
// an *Error of status 400.
func (c *Client) Exec(ctx context.Context, id string, req wire.ProcessRequest) (*wire.ProcessResult, error) {
	if req.Background {
		return nil, errors.New("Exec waits for the process: use StartBackground for a background one")
	}
	var res wire.ProcessResult
	if err := c.call(ctx, http.MethodPost, sandboxPath(id, "/processes"), req, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// ExecStream runs a process as Exec does, with its output streamed
// (Server-Sent Events): onStdout and onStderr (either may be nil) get it
// as the process writes it, in order; a process on a terminal (req.PTY)
// has only the terminal's output, given to onStdout. The result has no
// output. Stdout and stderr travel as text: bytes that are not UTF-8
// arrive as U+FFFD.
func (c *Client) ExecStream(ctx context.Context, id string, req wire.ProcessRequest, onStdout, onStderr func([]byte)) (*wire.ProcessResult, error) {
	if req.Background {
		return nil, errors.New("ExecStream follows the process: use StartBackground, then FollowProcess")
	}
	body, err := encode(req)
	if err != nil {
		return nil, err
	}
	hreq, err := c.newRequest(ctx, http.MethodPost, sandboxPath(id, "/processes"), body, "application/json")
	if err != nil {
		return nil, err
	}
	return c.processEvents(hreq, nil, onStdout, onStderr)
}

// ExecWithInput runs a process as ExecStream does, with its standard
// input read from stdin: what a Read of stdin gives is sent as it comes,
// and stdin's end (io.EOF, or another error) ends the process's input. A
// Read still blocked when the process ends is left to return in its own
// time (what it gives then is dropped).
func (c *Client) ExecWithInput(ctx context.Context, id string, req wire.ProcessRequest, stdin io.Reader, onStdout, onStderr func([]byte)) (*wire.ProcessResult, error) {
	if req.Background {
		return nil, errors.New("ExecWithInput follows the process: use StartBackground, then SendStdin and FollowProcess")
	}
	req.Stdin = true
	body, err := encode(req)
	if err != nil {
		return nil, err
	}
	hreq, err := c.newRequest(ctx, http.MethodPost, sandboxPath(id, "/processes"), body, "application/json")
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // the input's sends stop with the process
	return c.processEvents(hreq, func(pid int) {
		go func() {
			buf := make([]byte, 32<<10)
			for {
				n, err := stdin.Read(buf)
				if ctx.Err() != nil {
					return
				}
				if n > 0 && c.SendStdin(ctx, id, pid, buf[:n], false) != nil {
					return // the process has ended
				}
				if err != nil {
					c.SendStdin(ctx, id, pid, nil, true)
					return
				}
			}
		}()
	}, onStdout, onStderr)
}

// FollowProcess streams the output of a running process (one started in
// the background) from now on, as ExecStream does, until it ends; leaving
// (cancelling ctx) does not end it.
func (c *Client) FollowProcess(ctx context.Context, id string, pid int, onStdout, onStderr func([]byte)) (*wire.ProcessResult, error) {
	hreq, err := c.newRequest(ctx, http.MethodGet, sandboxPath(id, "/processes/"+strconv.Itoa(pid)+"/events"), nil, "")
	if err != nil {
		return nil, err
	}
	return c.processEvents(hreq, nil, onStdout, onStderr)
}

// processEvents sends hreq for an event stream of a process and reads it
// to its "exit" event (or an "error" event: an *Error); onStart (if any)
// gets the pid of its "start".
func (c *Client) processEvents(hreq *http.Request, onStart func(pid int), onStdout, onStderr func([]byte)) (*wire.ProcessResult, error) {
	st, err := c.openSSE(hreq)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	pid := 0
	for {
		name, data, ok := st.next()
		if !ok {
			break
		}
		switch name {
		case "start":
			var start struct {
				PID int `json:"pid"`
			}
			json.Unmarshal(data, &start)
			pid = start.PID
			if onStart != nil && pid > 0 {
				onStart(pid)
			}
		case "stdout", "stderr":
			var out struct {
				Data     string `json:"data"`
				Encoding string `json:"encoding"`
			}
			if err := json.Unmarshal(data, &out); err != nil {
				return nil, fmt.Errorf("decode %s event: %w", name, err)
			}
			b := []byte(out.Data)
			if out.Encoding == "base64" { // output that is not UTF-8 text
				if b, err = base64.StdEncoding.DecodeString(out.Data); err != nil {
					return nil, fmt.Errorf("decode %s event: %w", name, err)
				}
			}
			if f := pick(name == "stdout", onStdout, onStderr); f != nil && len(b) > 0 {
				f(b)
			}
		case "pty":
			var out struct {
				Data []byte `json:"data"` // base64
			}
			if err := json.Unmarshal(data, &out); err != nil {
				return nil, fmt.Errorf("decode pty event: %w", err)
			}
			if onStdout != nil && len(out.Data) > 0 {
				onStdout(out.Data)
			}
		case "exit":
			var res wire.ProcessResult
			if err := json.Unmarshal(data, &res); err != nil {
				return nil, fmt.Errorf("decode exit event: %w", err)
			}
			if res.PID == 0 {
				res.PID = pid
			}
			return &res, nil
		case "error": // the server is shutting down: the process runs on
			return nil, streamError(data)
		}
	}
	if err := st.sc.Err(); err != nil {
		return nil, fmt.Errorf("read events: %w", err)
	}
	return nil, errors.New("the event stream ended before the process did (the server went away?)")
}

func pick(first bool, a, b func([]byte)) func([]byte) {
	if first {
		return a
	}
	return b
}

// StartBackground starts a process in a live sandbox and returns its pid
// at once; it runs on (until it ends, the sandbox does, or
// req.TimeoutSeconds passes). With req.Stdin its standard input stays
// open for SendStdin.
func (c *Client) StartBackground(ctx context.Context, id string, req wire.ProcessRequest) (int, error) {
	req.Background = true
	var res wire.ProcessResult
	if err := c.call(ctx, http.MethodPost, sandboxPath(id, "/processes"), req, &res); err != nil {
		return 0, err
	}
	return res.PID, nil
}

// Processes lists the processes running in a live sandbox.
func (c *Client) Processes(ctx context.Context, id string) ([]wire.ProcessInfo, error) {
	var out struct {
		Processes []wire.ProcessInfo `json:"processes"`
	}
	if err := c.call(ctx, http.MethodGet, sandboxPath(id, "/processes"), nil, &out); err != nil {
		return nil, err
	}
	return out.Processes, nil
}

// maxStdinPost is what one POST of stdin carries at most (the server
// takes 1 MiB).
const maxStdinPost = 512 << 10

// SendStdin writes data to the standard input of a process started with
// Stdin (in requests of at most 512 KiB); with close, its input then ends
// (it reads end-of-file after data).
func (c *Client) SendStdin(ctx context.Context, id string, pid int, data []byte, close bool) error {
	path := sandboxPath(id, "/processes/"+strconv.Itoa(pid)+"/stdin")
	for first := true; first || len(data) > 0; first = false {
		n := min(len(data), maxStdinPost)
		p := path
		if close && n == len(data) {
			p += "?close=true"
		}
		req, err := c.newRequest(ctx, http.MethodPost, p, bytes.NewReader(data[:n]), "application/octet-stream")
		if err != nil {
			return err
		}
		if err := c.send(req, nil); err != nil {
			return err
		}
		data = data[n:]
	}
	return nil
}

// Signal sends a signal to a process (and its process group): a name
// ("SIGTERM", "TERM", "kill") or a number ("9").
func (c *Client) Signal(ctx context.Context, id string, pid int, signal string) error {
	var sig any = signal
	if n, err := strconv.Atoi(strings.TrimSpace(signal)); err == nil {
		sig = n
	}
	return c.call(ctx, http.MethodPost, sandboxPath(id, "/processes/"+strconv.Itoa(pid)+"/signal"), map[string]any{"signal": sig}, nil)
}

// ResizeProcess resizes the terminal of a process started with a PTY.
func (c *Client) ResizeProcess(ctx context.Context, id string, pid, cols, rows int) error {
	return c.call(ctx, http.MethodPost, sandboxPath(id, "/processes/"+strconv.Itoa(pid)+"/resize"), wire.TerminalSize{Cols: cols, Rows: rows}, nil)
}

// filePath is the URL path of a files endpoint of sandbox id, with the
// query.
func filePath(id, suffix string, q url.Values) string {
	return sandboxPath(id, "/files"+suffix) + "?" + q.Encode()
}

// ReadFile opens a file of a live sandbox for reading; close it when
// done. Its bytes come as they are (up to any size).
func (c *Client) ReadFile(ctx context.Context, id, path string) (io.ReadCloser, error) {
	req, err := c.newRequest(ctx, http.MethodGet, filePath(id, "", url.Values{"path": {path}}), nil, "")
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/octet-stream")
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode/100 != 2 {
		defer resp.Body.Close()
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return nil, newError(resp, data)
	}
	return resp.Body, nil
}

// WriteFile writes content to a file of a live sandbox (created, or
// replaced; its directories are made), streamed as it is read, and
// returns the file. The server takes files of up to 64 MiB.
func (c *Client) WriteFile(ctx context.Context, id, path string, content io.Reader) (*wire.FileEntry, error) {
	if content == nil {
		content = strings.NewReader("")
	}
	req, err := c.newRequest(ctx, http.MethodPut, filePath(id, "", url.Values{"path": {path}}), content, "application/octet-stream")
	if err != nil {
		return nil, err
	}
	var e wire.FileEntry
	if err := c.send(req, &e); err != nil {
		return nil, err
	}
	return &e, nil
}

// ListFiles lists a directory of a live sandbox ("" is /work), to depth
// levels (1: its own entries; 0 is 1).
func (c *Client) ListFiles(ctx context.Context, id, path string, depth int) ([]wire.FileEntry, error) {
	q := url.Values{}
	if path != "" {
		q.Set("path", path)
	}
	if depth > 0 {
		q.Set("depth", strconv.Itoa(depth))
	}
	var out struct {
		Entries []wire.FileEntry `json:"entries"`
	}
	if err := c.call(ctx, http.MethodGet, filePath(id, "/list", q), nil, &out); err != nil {
		return nil, err
	}
	return out.Entries, nil
}

// StatFile describes a file, directory or symlink of a live sandbox.
func (c *Client) StatFile(ctx context.Context, id, path string) (*wire.FileEntry, error) {
	var e wire.FileEntry
	if err := c.call(ctx, http.MethodGet, filePath(id, "/stat", url.Values{"path": {path}}), nil, &e); err != nil {
		return nil, err
	}
	return &e, nil
}

// MakeDir makes a directory of a live sandbox, with its parents.
func (c *Client) MakeDir(ctx context.Context, id, path string) (*wire.FileEntry, error) {
	var e wire.FileEntry
	if err := c.call(ctx, http.MethodPost, sandboxPath(id, "/files/mkdir"), map[string]string{"path": path}, &e); err != nil {
		return nil, err
	}
	return &e, nil
}

// MoveFile renames a file or directory of a live sandbox, and returns it
// where it is now.
func (c *Client) MoveFile(ctx context.Context, id, from, to string) (*wire.FileEntry, error) {
	var e wire.FileEntry
	if err := c.call(ctx, http.MethodPost, sandboxPath(id, "/files/move"), map[string]string{"from": from, "to": to}, &e); err != nil {
		return nil, err
	}
	return &e, nil
}

// RemoveFile removes a file, or a directory with what it holds, from a
// live sandbox.
func (c *Client) RemoveFile(ctx context.Context, id, path string) error {
	return c.call(ctx, http.MethodDelete, filePath(id, "", url.Values{"path": {path}}), nil, nil)
}

// Terminal is an interactive shell (`bash -i -l`) on a terminal in a live
// sandbox, over the server's WebSocket (GET .../pty): Read gives the
// terminal's output, Write types, Resize resizes it. Read returns io.EOF
// once the shell has exited; ExitCode then tells its code. Closing it
// hangs up on the shell. Read and Write may be called from two
// goroutines at once.
type Terminal struct {
	conn *websocket.Conn
	ctx  context.Context

	rmu sync.Mutex // Read's
	cur io.Reader  // the binary message being read

	mu     sync.Mutex
	exited bool
	code   int
	status string
}

// PTY opens an interactive shell in live sandbox id on a terminal of cols
// by rows (0 and 0: 80x24). ctx bounds the whole session.
func (c *Client) PTY(ctx context.Context, id string, cols, rows int) (*Terminal, error) {
	h := http.Header{}
	h.Set("User-Agent", "sandbox-run-client")
	if c.apiKey != "" {
		h.Set("Authorization", "Bearer "+c.apiKey)
	}
	q := url.Values{}
	if cols > 0 || rows > 0 {
		q.Set("cols", strconv.Itoa(cols))
		q.Set("rows", strconv.Itoa(rows))
	}
	u := c.baseURL + sandboxPath(id, "/pty")
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	conn, resp, err := websocket.Dial(ctx, u, &websocket.DialOptions{
		HTTPClient:   c.hc,
		HTTPHeader:   h,
		Subprotocols: []string{wire.WSSubprotocol},
	})
	if err != nil {
		if resp != nil && resp.StatusCode != http.StatusSwitchingProtocols {
			var data []byte
			if resp.Body != nil {
				data, _ = io.ReadAll(io.LimitReader(resp.Body, 1<<20))
			}
			return nil, newError(resp, data)
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("websocket: %w", ctx.Err())
		}
		return nil, err
	}
	conn.SetReadLimit(16 << 20)
	return &Terminal{conn: conn, ctx: ctx, code: -1}, nil
}

// Read reads the terminal's output. At the shell's exit it returns
// io.EOF; a connection that ended otherwise is another error.
func (t *Terminal) Read(p []byte) (int, error) {
	t.rmu.Lock()
	defer t.rmu.Unlock()
	for {
		if t.cur != nil {
			n, err := t.cur.Read(p)
			if err == io.EOF {
				t.cur = nil
				err = nil
			}
			if n > 0 || err != nil {
				return n, err
			}
			continue
		}
		typ, r, err := t.conn.Reader(t.ctx)
		if err != nil {
			return 0, t.ended(err)
		}
		if typ == websocket.MessageBinary {
			t.cur = r
		}
	}
}

// ended makes the error of a read that failed: io.EOF for the server's
// normal close ("exit N", the shell's end), whose code it keeps.
func (t *Terminal) ended(err error) error {
	var ce websocket.CloseError
	if errors.As(err, &ce) {
		if ce.Code == websocket.StatusNormalClosure {
			t.mu.Lock()
			t.exited, t.status = true, ce.Reason
			if s, ok := strings.CutPrefix(ce.Reason, "exit "); ok {
				num, rest, _ := strings.Cut(s, " ")
				if n, err := strconv.Atoi(num); err == nil {
					t.code = n
				}
				t.status = strings.Trim(rest, "()")
				if t.status == "" {
					t.status = "exit status " + num
				}
			}
			t.mu.Unlock()
			return io.EOF
		}
		return fmt.Errorf("the terminal was closed: %d %s", ce.Code, ce.Reason)
	}
	if t.ctx.Err() != nil {
		return fmt.Errorf("websocket: %w", t.ctx.Err())
	}
	return err
}

// Write types p on the terminal.
func (t *Terminal) Write(p []byte) (int, error) {
	written := 0
	for len(p) > 0 {
		n := min(len(p), stdinChunk)
		if err := t.conn.Write(t.ctx, websocket.MessageBinary, p[:n]); err != nil {
			return written, err
		}
		written += n
		p = p[n:]
	}
	return written, nil
}

// Resize tells the shell its terminal's new size.
func (t *Terminal) Resize(cols, rows int) error {
	b, err := json.Marshal(map[string]wire.TerminalSize{"resize": {Cols: cols, Rows: rows}})
	if err != nil {
		return err
	}
	return t.conn.Write(t.ctx, websocket.MessageText, b)
}

// ExitCode is the shell's exit code once Read has returned io.EOF: -1
// (and ok true) when a signal ended it, ok false before its end.
func (t *Terminal) ExitCode() (code int, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.code, t.exited
}

// ExitStatus is how the shell ended, once it has: "exit status 3",
// "signal: killed", ...; "" before.
func (t *Terminal) ExitStatus() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.status
}

// Close ends the session: the server hangs up on the shell (if it has
// not exited).
func (t *Terminal) Close() error {
	if t.conn.Close(websocket.StatusNormalClosure, "") != nil {
		t.conn.CloseNow() // closed already, or the server does not answer
	}
	return nil
}
