package e2b

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"mime"
	"net/http"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sandbox-run/sandbox-run/pkg/live"
	"github.com/sandbox-run/sandbox-run/pkg/live/agent"
)

// envd: the services process.Process and filesystem.Filesystem, /files
// and /health, each call routed to its sandbox by E2b-Sandbox-Id and let
// in by the sandbox's access token. The agent in the sandbox does the work.

// kernelTag marks the processes the door starts for itself (code
// contexts' kernels): commands.list does not show them.
const kernelTag = "sandbox-run:kernel"

func (d *Door) routeEnvd() {
	d.mux.HandleFunc("GET /health", d.health)
	d.mux.HandleFunc("GET /files", d.readFile)
	d.mux.HandleFunc("POST /files", d.writeFiles)
	rpc := func(name string, fn func(http.ResponseWriter, *http.Request, *live.Sandbox)) {
		d.mux.HandleFunc("POST /"+name, func(w http.ResponseWriter, r *http.Request) {
			fail := unaryFail
			if strings.HasPrefix(r.Header.Get("Content-Type"), "application/connect+") {
				fail = func(w http.ResponseWriter, status int, msg string) {
					failStream(w, &connectError{Code: codeOf(status), Msg: msg})
				}
			}
			if sb, ok := d.sandboxOf(w, r, fail); ok {
				fn(w, r, sb)
			}
		})
	}
	rpc("process.Process/Start", d.start)
	rpc("process.Process/Connect", d.attach)
	rpc("process.Process/List", func(w http.ResponseWriter, r *http.Request, sb *live.Sandbox) { unary(w, r, listProcs(sb)) })
	rpc("process.Process/SendInput", func(w http.ResponseWriter, r *http.Request, sb *live.Sandbox) { unary(w, r, sendInput(sb)) })
	rpc("process.Process/CloseStdin", func(w http.ResponseWriter, r *http.Request, sb *live.Sandbox) { unary(w, r, closeStdin(sb)) })
	rpc("process.Process/SendSignal", func(w http.ResponseWriter, r *http.Request, sb *live.Sandbox) { unary(w, r, sendSignal(sb)) })
	rpc("process.Process/Update", func(w http.ResponseWriter, r *http.Request, sb *live.Sandbox) { unary(w, r, update(sb)) })
	rpc("filesystem.Filesystem/Stat", func(w http.ResponseWriter, r *http.Request, sb *live.Sandbox) { unary(w, r, stat(sb)) })
	rpc("filesystem.Filesystem/MakeDir", func(w http.ResponseWriter, r *http.Request, sb *live.Sandbox) { unary(w, r, makeDir(sb)) })
	rpc("filesystem.Filesystem/Move", func(w http.ResponseWriter, r *http.Request, sb *live.Sandbox) { unary(w, r, move(sb)) })
	rpc("filesystem.Filesystem/ListDir", func(w http.ResponseWriter, r *http.Request, sb *live.Sandbox) { unary(w, r, listDir(sb)) })
	rpc("filesystem.Filesystem/Remove", func(w http.ResponseWriter, r *http.Request, sb *live.Sandbox) { unary(w, r, remove(sb)) })
	rpc("filesystem.Filesystem/WatchDir", d.watchDir)
}

// stopping says the server is shutting down.
func stopping(d *Door) bool {
	select {
	case <-d.svc.Stopping():
		return true
	default:
		return false
	}
}

// codeOf is the Connect code of an HTTP status (a sandbox gone, 502:
// unavailable).
func codeOf(status int) string {
	switch status {
	case http.StatusBadGateway:
		return "unavailable"
	case http.StatusBadRequest:
		return "invalid_argument"
	}
	for c, s := range connectStatus {
		if s == status {
			return c
		}
	}
	return "internal"
}

// health is envd's GET /health: 204 while the sandbox runs, 502 once gone.
func (d *Door) health(w http.ResponseWriter, r *http.Request) {
	if _, ok := d.sandboxOfHealth(w, r); ok {
		w.WriteHeader(http.StatusNoContent)
	}
}

// sandboxOfHealth finds the sandbox without its token (health says only
// whether it runs).
func (d *Door) sandboxOfHealth(w http.ResponseWriter, r *http.Request) (*live.Sandbox, bool) {
	m := d.svc.Live()
	id := r.Header.Get("E2b-Sandbox-Id")
	if m == nil || id == "" {
		writeError(w, http.StatusBadGateway, "no sandbox named")
		return nil, false
	}
	sb, err := m.Find(id)
	if err != nil {
		writeError(w, http.StatusBadGateway, "sandbox "+id+" is not running")
		return nil, false
	}
	return sb, true
}

// processConfig is a process as process.Process describes it.
type processConfig struct {
	Cmd  string            `json:"cmd"`
	Args []string          `json:"args"`
	Envs map[string]string `json:"envs"`
	Cwd  *string           `json:"cwd,omitempty"`
}

type ptySize struct {
	Size *agent.Size `json:"size"`
}

// selector names a process by pid or tag.
type selector struct {
	PID *int   `json:"pid,omitempty"`
	Tag string `json:"tag,omitempty"`
}

type startRequest struct {
	Process processConfig `json:"process"`
	PTY     *ptySize      `json:"pty"`
	Tag     string        `json:"tag"`
	Stdin   *bool         `json:"stdin"`
}

// request is a start's agent request.
func (s startRequest) request() (agent.Request, error) {
	if s.Process.Cmd == "" {
		return agent.Request{}, badArg("process.cmd is empty")
	}
	r := agent.Request{Args: append([]string{s.Process.Cmd}, s.Process.Args...), Dir: home, Tag: s.Tag,
		Stdin: s.Stdin == nil || *s.Stdin}
	if s.Process.Cwd != nil && *s.Process.Cwd != "" {
		r.Dir = abs(*s.Process.Cwd)
	}
	for _, k := range slices.Sorted(maps.Keys(s.Process.Envs)) {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return agent.Request{}, badArg("env name %q", k)
		}
		r.Env = append(r.Env, k+"="+s.Process.Envs[k])
	}
	if s.PTY != nil {
		size := agent.Size{Cols: 80, Rows: 24}
		if s.PTY.Size != nil && s.PTY.Size.Cols > 0 && s.PTY.Size.Rows > 0 {
			size = *s.PTY.Size
		}
		r.PTY, r.Stdin = &size, false
	}
	return r, nil
}

// start is Process.Start: the process's events as they come, until its end.
func (d *Door) start(w http.ResponseWriter, r *http.Request, sb *live.Sandbox) {
	var req startRequest
	st, ctx, cancel, err := openStream(w, r, d.svc.Stopping(), &req)
	if err != nil {
		failStream(w, err)
		return
	}
	defer cancel()
	ar, err := req.request()
	if err != nil {
		st.end(err)
		return
	}
	p, sub, err := sb.Start(ctx, ar)
	if err != nil {
		st.end(err)
		return
	}
	d.follow(ctx, r, st, sb, p, sub, true)
}

// attach is Process.Connect: a running process's events from now on.
func (d *Door) attach(w http.ResponseWriter, r *http.Request, sb *live.Sandbox) {
	var req struct {
		Process selector `json:"process"`
	}
	st, ctx, cancel, err := openStream(w, r, d.svc.Stopping(), &req)
	if err != nil {
		failStream(w, err)
		return
	}
	defer cancel()
	pid, err := resolve(ctx, sb, req.Process)
	if err != nil {
		st.end(err)
		return
	}
	p, ok := sb.Proc(pid)
	if !ok {
		st.end(notFound("process %d is not running", pid))
		return
	}
	d.follow(ctx, r, st, sb, p, p.Subscribe(), false)
}

// follow streams p's events from sub: start first, then output, then end.
// Past the call's deadline the process is killed when kill says so (the
// command's timeout); a client that goes away leaves it running.
func (d *Door) follow(ctx context.Context, r *http.Request, st *stream, sb *live.Sandbox, p *live.Proc, sub *live.Sub, kill bool) {
	defer sub.Close()
	if st.send(map[string]any{"event": map[string]any{"start": map[string]int{"pid": p.PID}}}) != nil {
		return
	}
	keep := keepalive(r)
	for {
		wait, stop := context.WithTimeout(ctx, keep)
		ev, err := sub.Next(wait)
		stop()
		switch {
		case errors.Is(err, live.ErrEnded):
			st.end(nil)
			return
		case err != nil && ctx.Err() == nil:
			if st.send(map[string]any{"event": map[string]any{"keepalive": struct{}{}}}) != nil {
				return
			}
			continue
		case err != nil:
			if r.Context().Err() != nil {
				return // the client went away
			}
			if stopping(d) {
				st.end(errStopping)
				return
			}
			msg := "the stream's deadline passed"
			if kill {
				_ = sb.Signal(p.PID, 9)
				msg = "the command ran past its timeout and was killed"
			}
			st.end(&connectError{Code: "deadline_exceeded", Msg: msg})
			return
		}
		var msg map[string]any
		switch ev.Type {
		case agent.EvStdout, agent.EvStderr, agent.EvPTY:
			msg = map[string]any{"data": map[string][]byte{ev.Type: ev.Data}}
		case agent.EvExit:
			end := map[string]any{"exited": true, "status": ev.Status}
			code := -1
			if ev.Exit != nil {
				code = *ev.Exit
			}
			end["exitCode"] = code
			if code != 0 {
				end["error"] = ev.Status
			}
			if ev.Error != "" {
				end["error"] = ev.Error
			}
			msg = map[string]any{"end": end}
		case agent.EvError:
			st.end(&connectError{Code: "unavailable", Msg: ev.Error})
			return
		default:
			continue
		}
		if st.send(map[string]any{"event": msg}) != nil {
			return
		}
	}
}

// keepalive is how often a quiet stream says it lives (the client's
// Keepalive-Ping-Interval, at most 50 s).
func keepalive(r *http.Request) time.Duration {
	if s, err := strconv.Atoi(r.Header.Get("Keepalive-Ping-Interval")); err == nil && s > 0 && s < 50 {
		return time.Duration(s) * time.Second
	}
	return 50 * time.Second
}

// resolve is the pid a selector names.
func resolve(ctx context.Context, sb *live.Sandbox, s selector) (int, error) {
	if s.PID != nil {
		return *s.PID, nil
	}
	if s.Tag == "" {
		return 0, badArg("name the process by pid or tag")
	}
	ev, err := sb.Client().Call(ctx, agent.Request{Op: agent.OpList})
	if err != nil {
		return 0, err
	}
	for _, p := range ev.Procs {
		if p.Tag == s.Tag {
			return p.PID, nil
		}
	}
	return 0, notFound("no process tagged %q", s.Tag)
}

type processInfo struct {
	PID    int           `json:"pid"`
	Config processConfig `json:"config"`
	Tag    string        `json:"tag,omitempty"`
}

func listProcs(sb *live.Sandbox) func(context.Context, *struct{}) (any, error) {
	return func(ctx context.Context, _ *struct{}) (any, error) {
		ev, err := sb.Client().Call(ctx, agent.Request{Op: agent.OpList})
		if err != nil {
			return nil, err
		}
		out := []processInfo{}
		for _, p := range ev.Procs {
			if strings.HasPrefix(p.Tag, kernelTag) || len(p.Args) == 0 {
				continue
			}
			dir := p.Dir
			out = append(out, processInfo{PID: p.PID, Tag: p.Tag, Config: processConfig{Cmd: p.Args[0], Args: p.Args[1:], Envs: map[string]string{}, Cwd: &dir}})
		}
		return map[string]any{"processes": out}, nil
	}
}

type inputRequest struct {
	Process selector `json:"process"`
	Input   struct {
		Stdin []byte `json:"stdin"`
		PTY   []byte `json:"pty"`
	} `json:"input"`
}

func sendInput(sb *live.Sandbox) func(context.Context, *inputRequest) (any, error) {
	return func(ctx context.Context, req *inputRequest) (any, error) {
		pid, err := resolve(ctx, sb, req.Process)
		if err != nil {
			return nil, err
		}
		data := req.Input.Stdin
		if data == nil {
			data = req.Input.PTY
		}
		_, err = sb.Client().Call(ctx, agent.Request{Op: agent.OpInput, PID: pid, Data: data})
		return struct{}{}, err
	}
}

func closeStdin(sb *live.Sandbox) func(context.Context, *struct {
	Process selector `json:"process"`
}) (any, error) {
	return func(ctx context.Context, req *struct {
		Process selector `json:"process"`
	}) (any, error) {
		pid, err := resolve(ctx, sb, req.Process)
		if err != nil {
			return nil, err
		}
		_, err = sb.Client().Call(ctx, agent.Request{Op: agent.OpCloseStdin, PID: pid})
		return struct{}{}, err
	}
}

type signalRequest struct {
	Process selector `json:"process"`
	Signal  any      `json:"signal"`
}

// signals are process.Process's Signal enum, by name and number.
var signals = map[string]int{"SIGNAL_SIGKILL": 9, "SIGNAL_SIGTERM": 15, "9": 9, "15": 15}

func sendSignal(sb *live.Sandbox) func(context.Context, *signalRequest) (any, error) {
	return func(ctx context.Context, req *signalRequest) (any, error) {
		pid, err := resolve(ctx, sb, req.Process)
		if err != nil {
			return nil, err
		}
		sig, ok := signals[fmt.Sprint(req.Signal)]
		if !ok {
			return nil, badArg("signal %v: send SIGNAL_SIGKILL or SIGNAL_SIGTERM", req.Signal)
		}
		_, err = sb.Client().Call(ctx, agent.Request{Op: agent.OpSignal, PID: pid, Signal: sig})
		return struct{}{}, err
	}
}

type updateRequest struct {
	Process selector `json:"process"`
	PTY     *ptySize `json:"pty"`
}

func update(sb *live.Sandbox) func(context.Context, *updateRequest) (any, error) {
	return func(ctx context.Context, req *updateRequest) (any, error) {
		pid, err := resolve(ctx, sb, req.Process)
		if err != nil {
			return nil, err
		}
		if req.PTY == nil || req.PTY.Size == nil {
			return struct{}{}, nil
		}
		_, err = sb.Client().Call(ctx, agent.Request{Op: agent.OpResize, PID: pid, Size: req.PTY.Size})
		return struct{}{}, err
	}
}

// entryInfo is filesystem.Filesystem's EntryInfo.
type entryInfo struct {
	Name          string    `json:"name"`
	Type          string    `json:"type"`
	Path          string    `json:"path"`
	Size          string    `json:"size"`
	Mode          uint32    `json:"mode"`
	Permissions   string    `json:"permissions"`
	Owner         string    `json:"owner"`
	Group         string    `json:"group"`
	ModifiedTime  time.Time `json:"modifiedTime"`
	SymlinkTarget *string   `json:"symlinkTarget,omitempty"`
}

var fileTypes = map[string]string{"file": "FILE_TYPE_FILE", "dir": "FILE_TYPE_DIRECTORY", "symlink": "FILE_TYPE_SYMLINK"}

func entryOf(e *agent.Entry) *entryInfo {
	if e == nil {
		return nil
	}
	out := &entryInfo{Name: e.Name, Type: fileTypes[e.Type], Path: e.Path, Size: strconv.FormatInt(e.Size, 10),
		Mode: uint32(e.Mode.Perm()), Permissions: e.Mode.String(), Owner: "user", Group: "user", ModifiedTime: e.ModTime.UTC()}
	if out.Type == "" {
		out.Type = "FILE_TYPE_UNSPECIFIED"
	}
	if e.Target != "" {
		t := e.Target
		out.SymlinkTarget = &t
	}
	return out
}

type pathRequest struct {
	Path  string `json:"path"`
	Depth int    `json:"depth"`
}

func stat(sb *live.Sandbox) func(context.Context, *pathRequest) (any, error) {
	return func(ctx context.Context, req *pathRequest) (any, error) {
		ev, err := sb.Client().Call(ctx, agent.Request{Op: agent.OpStat, Path: abs(req.Path)})
		if err != nil {
			return nil, err
		}
		return map[string]any{"entry": entryOf(ev.Entry)}, nil
	}
}

func makeDir(sb *live.Sandbox) func(context.Context, *pathRequest) (any, error) {
	return func(ctx context.Context, req *pathRequest) (any, error) {
		p := abs(req.Path)
		if _, err := sb.Client().Call(ctx, agent.Request{Op: agent.OpStat, Path: p}); err == nil {
			return nil, &connectError{Code: agent.CodeExists, Msg: p + " exists already"}
		}
		ev, err := sb.Client().Call(ctx, agent.Request{Op: agent.OpMkdir, Path: p})
		if err != nil {
			return nil, err
		}
		return map[string]any{"entry": entryOf(ev.Entry)}, nil
	}
}

func move(sb *live.Sandbox) func(context.Context, *struct{ Source, Destination string }) (any, error) {
	return func(ctx context.Context, req *struct{ Source, Destination string }) (any, error) {
		ev, err := sb.Client().Call(ctx, agent.Request{Op: agent.OpMove, Path: abs(req.Source), To: abs(req.Destination)})
		if err != nil {
			return nil, err
		}
		return map[string]any{"entry": entryOf(ev.Entry)}, nil
	}
}

func listDir(sb *live.Sandbox) func(context.Context, *pathRequest) (any, error) {
	return func(ctx context.Context, req *pathRequest) (any, error) {
		depth := max(req.Depth, 1)
		ev, err := sb.Client().Call(ctx, agent.Request{Op: agent.OpListDir, Path: abs(req.Path), Depth: depth})
		if err != nil {
			return nil, err
		}
		out := []*entryInfo{}
		for i := range ev.Entries {
			out = append(out, entryOf(&ev.Entries[i]))
		}
		return map[string]any{"entries": out}, nil
	}
}

func remove(sb *live.Sandbox) func(context.Context, *pathRequest) (any, error) {
	return func(ctx context.Context, req *pathRequest) (any, error) {
		_, err := sb.Client().Call(ctx, agent.Request{Op: agent.OpRemove, Path: abs(req.Path)})
		return struct{}{}, err
	}
}

// watchDir is Filesystem.WatchDir: start, then an event per change, until
// the client goes or the call's deadline.
func (d *Door) watchDir(w http.ResponseWriter, r *http.Request, sb *live.Sandbox) {
	var req struct {
		Path         string `json:"path"`
		Recursive    bool   `json:"recursive"`
		IncludeEntry bool   `json:"includeEntry"`
	}
	st, ctx, cancel, err := openStream(w, r, d.svc.Stopping(), &req)
	if err != nil {
		failStream(w, err)
		return
	}
	defer cancel()
	dir := abs(req.Path)
	events := make(chan agent.Event, 256)
	stop, err := sb.Client().Watch(ctx, dir, req.Recursive, func(ev agent.Event) {
		select {
		case events <- ev:
		default: // a client this far behind loses events
		}
	})
	if err != nil {
		st.end(err)
		return
	}
	defer stop()
	if st.send(map[string]any{"start": struct{}{}}) != nil {
		return
	}
	tick := time.NewTicker(keepalive(r))
	defer tick.Stop()
	for {
		select {
		case ev := <-events:
			if ev.Type == agent.EvExit || ev.Type == agent.EvError {
				st.end(nil)
				return
			}
			fe := map[string]any{"name": ev.Name, "type": watchTypes[ev.FSOp]}
			if req.IncludeEntry && ev.FSOp != agent.FSRemove {
				if e, err := sb.Client().Call(ctx, agent.Request{Op: agent.OpStat, Path: path.Join(dir, ev.Name)}); err == nil {
					fe["entry"] = entryOf(e.Entry)
				}
			}
			if st.send(map[string]any{"filesystem": fe}) != nil {
				return
			}
		case <-tick.C:
			if st.send(map[string]any{"keepalive": struct{}{}}) != nil {
				return
			}
		case <-ctx.Done():
			switch {
			case r.Context().Err() != nil:
			case stopping(d):
				st.end(errStopping)
			default:
				st.end(nil)
			}
			return
		}
	}
}

var watchTypes = map[string]string{agent.FSCreate: "EVENT_TYPE_CREATE", agent.FSWrite: "EVENT_TYPE_WRITE",
	agent.FSRemove: "EVENT_TYPE_REMOVE", agent.FSRename: "EVENT_TYPE_RENAME", agent.FSChmod: "EVENT_TYPE_CHMOD"}

// readFile is GET /files?path=: the file's bytes.
func (d *Door) readFile(w http.ResponseWriter, r *http.Request) {
	sb, ok := d.sandboxOf(w, r, writeError)
	if !ok {
		return
	}
	f, err := sb.Open(r.Context(), abs(r.URL.Query().Get("path")))
	if err != nil {
		writeFileError(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.WriteHeader(http.StatusOK)
	_, _ = io.Copy(w, f)
}

// writeFiles is POST /files: multipart parts (named file, each to its
// filename, or to ?path= when there is one) or an octet-stream body to
// ?path=.
func (d *Door) writeFiles(w http.ResponseWriter, r *http.Request) {
	sb, ok := d.sandboxOf(w, r, writeError)
	if !ok {
		return
	}
	target := r.URL.Query().Get("path")
	type written struct {
		Name string `json:"name"`
		Type string `json:"type"`
		Path string `json:"path"`
	}
	var out []written
	put := func(p string, body io.Reader) error {
		if p == "" {
			return badArg("no destination: give ?path= or the part's filename")
		}
		p = abs(p)
		if _, err := sb.WriteFile(r.Context(), p, body, 0o644); err != nil {
			return err
		}
		out = append(out, written{Name: path.Base(p), Type: "file", Path: p})
		return nil
	}
	if strings.HasPrefix(r.Header.Get("Content-Type"), "multipart/") {
		mr, err := r.MultipartReader()
		if err != nil {
			writeError(w, http.StatusBadRequest, err.Error())
			return
		}
		for {
			part, err := mr.NextPart()
			if err == io.EOF {
				break
			}
			if err != nil {
				writeError(w, http.StatusBadRequest, "the multipart body: "+err.Error())
				return
			}
			if part.FormName() != "file" {
				continue
			}
			// The filename is the destination path (FileName would keep
			// only its last element).
			_, params, _ := mime.ParseMediaType(part.Header.Get("Content-Disposition"))
			p := params["filename"]
			if target != "" {
				p = target
			}
			if err := put(p, part); err != nil {
				writeFileError(w, err)
				return
			}
		}
	} else if err := put(target, r.Body); err != nil {
		writeFileError(w, err)
		return
	}
	if len(out) == 0 {
		writeError(w, http.StatusBadRequest, "no file in the request: send multipart parts named file")
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// writeFileError answers a /files error in the control plane's shape: the
// agent's refusals by their kind's status (a full disk 507, as E2B's),
// the rest by their Connect code's (a sandbox gone 502).
func writeFileError(w http.ResponseWriter, err error) {
	ce := errCode(err)
	status := cmp.Or(connectStatus[ce.Code], http.StatusInternalServerError)
	var le *live.Error
	switch {
	case errors.As(err, &le):
		status = le.Kind().HTTPStatus()
	case ce.Code == "unavailable":
		status = http.StatusBadGateway
	case errors.Is(err, os.ErrNotExist):
		status = http.StatusNotFound
	}
	writeError(w, status, ce.Msg)
}
