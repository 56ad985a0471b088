package api

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/coder/websocket"

	"github.com/sandbox-run/sandbox-run/pkg/live"
	"github.com/sandbox-run/sandbox-run/pkg/live/agent"
	"github.com/sandbox-run/sandbox-run/pkg/runner"
	"github.com/sandbox-run/sandbox-run/pkg/wire"
)

// Live sandboxes over the native API: /api/sandbox/sandboxes. A live
// sandbox (pkg/live) stays up between calls until it is deleted or its
// timeout passes; processes run in it (waited for, streamed as Server-Sent
// Events, or in the background, with stdin, signals and a terminal), its
// files are read and written, its directories watched, and its ports
// reached through the server. Everything is behind the API keys (the
// execute scope); a key sees only its own sandboxes (another key's is
// 404). The run service (pkg/runner) keeps the sandboxes and lets callers
// in; the sandbox's agent (pkg/live/agent) does the work inside. The E2B
// door (pkg/e2b) is a sibling transport over the same sandboxes.

const (
	sandboxesPath = "/api/sandbox/sandboxes"
	// sandboxHome is a sandbox's home: relative paths and processes'
	// working directories start there.
	sandboxHome = "/work"
	// kernelTag marks the processes the E2B door starts for itself
	// (interpreter kernels): the process list does not show them.
	kernelTag = "sandbox-run:kernel"
	// maxSandboxFile bounds a file written in one request.
	maxSandboxFile = 64 << 20
	// maxStdinBody bounds one POST of a process's stdin.
	maxStdinBody = 1 << 20
	// maxListDepth bounds a directory listing's depth.
	maxListDepth = 16
)

// signalNumbers are the signals a process may be sent by name.
var signalNumbers = map[string]int{"SIGHUP": 1, "SIGINT": 2, "SIGQUIT": 3, "SIGKILL": 9, "SIGUSR1": 10,
	"SIGUSR2": 12, "SIGTERM": 15, "SIGCONT": 18, "SIGSTOP": 19}

func (s *Server) registerSandboxes() {
	b := sandboxesPath
	s.route("POST "+b, ScopeExecute, s.handleSandboxCreate)
	s.route("GET "+b, ScopeExecute, s.handleSandboxList)
	s.route("GET "+b+"/{id}", ScopeExecute, s.withSandbox(s.handleSandboxGet))
	s.route("DELETE "+b+"/{id}", ScopeExecute, s.handleSandboxDelete)
	s.route("POST "+b+"/{id}/timeout", ScopeExecute, s.withSandbox(s.handleSandboxTimeout))
	s.route("POST "+b+"/{id}/pause", ScopeExecute, s.withSandbox(s.handleSandboxPause))
	s.route("PUT "+b+"/{id}/network", ScopeExecute, s.withSandbox(s.handleSandboxNetwork))
	s.route("GET "+b+"/{id}/network", ScopeExecute, s.withSandbox(s.handleSandboxNetworkReport))
	s.route("POST "+b+"/{id}/resume", ScopeExecute, s.withSandbox(s.handleSandboxResume))
	s.route("POST "+b+"/{id}/processes", ScopeExecute, s.withSandbox(s.handleProcessStart))
	s.route("GET "+b+"/{id}/processes", ScopeExecute, s.withSandbox(s.handleProcessList))
	s.route("GET "+b+"/{id}/processes/{pid}/events", ScopeExecute, s.withSandbox(s.handleProcessEvents))
	s.route("POST "+b+"/{id}/processes/{pid}/stdin", ScopeExecute, s.withSandbox(s.handleProcessStdin))
	s.route("POST "+b+"/{id}/processes/{pid}/signal", ScopeExecute, s.withSandbox(s.handleProcessSignal))
	s.route("POST "+b+"/{id}/processes/{pid}/resize", ScopeExecute, s.withSandbox(s.handleProcessResize))
	s.route("GET "+b+"/{id}/pty", "", s.handleSandboxPTY) // authenticates itself (the subprotocol)
	s.route("GET "+b+"/{id}/files", ScopeExecute, s.withSandbox(s.handleSandboxFileGet))
	s.route("PUT "+b+"/{id}/files", ScopeExecute, s.withSandbox(s.handleSandboxFilePut))
	s.route("DELETE "+b+"/{id}/files", ScopeExecute, s.withSandbox(s.handleSandboxFileDelete))
	s.route("GET "+b+"/{id}/files/list", ScopeExecute, s.withSandbox(s.handleSandboxFileList))
	s.route("GET "+b+"/{id}/files/stat", ScopeExecute, s.withSandbox(s.handleSandboxFileStat))
	s.route("POST "+b+"/{id}/files/mkdir", ScopeExecute, s.withSandbox(s.handleSandboxMkdir))
	s.route("POST "+b+"/{id}/files/move", ScopeExecute, s.withSandbox(s.handleSandboxMove))
	s.route("GET "+b+"/{id}/files/watch", ScopeExecute, s.withSandbox(s.handleSandboxWatch))
	// Every method, to any path of the port: the methods map has the
	// documented path, for the document's test of what is routed.
	s.route(b+"/{id}/ports/{port}/{path...}", ScopeExecute, s.withSandbox(s.handleSandboxPort))
	s.methods[b+"/{id}/ports/{port}/{path}"] = []string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"}
	s.allowOnly(b+"/{id}", "GET", "HEAD", "DELETE")
	for _, p := range []string{"timeout", "pause", "resume"} {
		s.allowOnly(b+"/{id}/"+p, "POST")
	}
	s.allowOnly(b+"/{id}/network", "GET", "HEAD", "PUT")
	s.allowOnly(b+"/{id}/processes", "GET", "HEAD", "POST")
	s.allowOnly(b+"/{id}/processes/{pid}/events", "GET", "HEAD")
	for _, p := range []string{"stdin", "signal", "resize"} {
		s.allowOnly(b+"/{id}/processes/{pid}/"+p, "POST")
	}
	s.allowOnly(b+"/{id}/pty", "GET", "HEAD")
	s.allowOnly(b+"/{id}/files", "GET", "HEAD", "PUT", "DELETE")
	for _, p := range []string{"list", "stat", "watch"} {
		s.allowOnly(b+"/{id}/files/"+p, "GET", "HEAD")
	}
	for _, p := range []string{"mkdir", "move"} {
		s.allowOnly(b+"/{id}/files/"+p, "POST")
	}
}

// ---------------------------------------------------------------------------
// The sandboxes.

// sandboxTimeoutRequest is POST .../{id}/timeout's body.
type sandboxTimeoutRequest struct {
	TimeoutSeconds float64 `json:"timeout_seconds"`
}

// sandboxJSON is sb as the API shows it (without its access token).
func sandboxJSON(sb *live.Sandbox) wire.Sandbox {
	return wire.Sandbox{ID: sb.ID, Template: sb.Template, Languages: sb.Languages, Metadata: sb.Metadata,
		MemoryMB: sb.Memory >> 20, StartedAt: sb.Started.UTC(), EndAt: sb.End().UTC(), State: sb.State(),
		AutoPause: sb.AutoPause, Network: sb.Network, NetworkBudgets: sb.NetworkBudgets, Secrets: sb.Secrets, Image: sb.Image, Isolation: cmp.Or(sb.Isolation, "native"), ForkedMemory: sb.ForkedMemory,
		IdlePauseSeconds: sb.IdlePause.Seconds(), Evicted: sb.Evicted()}
}

// withSandbox finds the request's sandbox, the caller's (404 otherwise),
// for h.
func (s *Server) withSandbox(h func(http.ResponseWriter, *http.Request, *live.Sandbox)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		sb, err := s.run.LiveSandbox(runner.CallerOf(r.Context()), r.PathValue("id"))
		if err != nil {
			s.writeLiveError(w, err)
			return
		}
		h(w, r, sb)
	}
}

// sandboxOptions are the options req asks a sandbox for: its languages,
// or its template's (the run service's templates).
func (s *Server) sandboxOptions(req wire.SandboxRequest) (live.CreateOptions, error) {
	o := live.CreateOptions{Languages: req.Languages, Env: req.Env, Metadata: req.Metadata, Template: req.Template, AutoPause: req.AutoPause,
		Snapshot: req.Snapshot, Isolation: req.Isolation}
	if req.Snapshot == "" && (req.Template != "" || len(req.Languages) == 0) {
		tpl, err := s.run.LiveTemplate(req.Template)
		if err != nil {
			return o, badRequest("%s, or give languages", err)
		}
		if len(req.Languages) == 0 {
			o.Template = tpl.Name
			if !tpl.Default {
				o.Languages = tpl.Languages // base: the server's defaults
			}
		}
	}
	switch t := req.TimeoutSeconds; {
	case t < 0 || t > 1e9:
		return o, badRequest("timeout_seconds %v: give a positive number of seconds", t)
	case t > 0:
		o.Timeout = seconds(t)
	}
	switch t := req.IdlePauseSeconds; {
	case t < 0 || t > 1e9:
		return o, badRequest("idle_pause_seconds %v: give a positive number of seconds", t)
	case t > 0:
		o.IdlePause = seconds(t)
	}
	if req.MemoryMB < 0 || req.MemoryMB > 1<<30 {
		return o, badRequest("memory_mb %d: give a positive number of MiB", req.MemoryMB)
	}
	o.MemoryBytes = req.MemoryMB << 20
	if req.Network != nil {
		// Checked against the server's network.allow by the run service.
		o.Network, o.NetworkBudgets = append([]string{}, req.Network.Allow...), req.Network.Budgets
	}
	if req.Image != "" {
		o.Image, o.Languages, o.Template = req.Image, nil, req.Image
	}
	o.Secrets = req.Secrets // checked by the run service
	if err := checkEnv(req.Env); err != nil {
		return o, err
	}
	return o, nil
}

// checkEnv refuses environment variables that no process can have.
func checkEnv(env map[string]string) error {
	for k, v := range env {
		if k == "" || strings.ContainsAny(k, "=\x00") || strings.ContainsRune(v, 0) {
			return badRequest("env: %q is not a valid environment variable name (or its value holds a NUL byte)", k)
		}
	}
	return nil
}

func (s *Server) handleSandboxCreate(w http.ResponseWriter, r *http.Request) {
	var req wire.SandboxRequest
	if !s.decodeJSONBody(w, r, &req) {
		return
	}
	o, err := s.sandboxOptions(req)
	if err != nil {
		s.reject(w, err, "invalid")
		return
	}
	sb, err := s.run.CreateLive(r.Context(), runner.CallerOf(r.Context()), o)
	if err != nil {
		s.writeLiveError(w, err)
		return
	}
	out := sandboxJSON(sb)
	out.AccessToken = sb.Token
	w.Header().Set("Location", sandboxesPath+"/"+sb.ID)
	writeJSON(w, http.StatusCreated, out)
}

func (s *Server) handleSandboxList(w http.ResponseWriter, r *http.Request) {
	out := []wire.Sandbox{}
	if m := s.run.Live(); m != nil {
		for _, sb := range m.List(runner.CallerOf(r.Context()).Tenant()) {
			out = append(out, sandboxJSON(sb))
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"sandboxes": out})
}

func (s *Server) handleSandboxGet(w http.ResponseWriter, _ *http.Request, sb *live.Sandbox) {
	writeJSON(w, http.StatusOK, sandboxJSON(sb))
}

func (s *Server) handleSandboxDelete(w http.ResponseWriter, r *http.Request) {
	if err := s.run.KillLive(runner.CallerOf(r.Context()), r.PathValue("id")); err != nil {
		s.writeLiveError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) handleSandboxTimeout(w http.ResponseWriter, r *http.Request, sb *live.Sandbox) {
	var req sandboxTimeoutRequest
	if !s.decodeJSONBody(w, r, &req) {
		return
	}
	if !(req.TimeoutSeconds > 0) || req.TimeoutSeconds > 1e9 {
		writeError(w, http.StatusBadRequest, "timeout_seconds: give a positive number of seconds")
		return
	}
	c := runner.CallerOf(r.Context())
	if err := s.run.SetLiveTimeout(c, sb.ID, seconds(req.TimeoutSeconds)); err != nil {
		s.writeLiveError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, sandboxJSON(sb))
}

// handleSandboxNetwork changes what the sandbox may reach, as its create's
// network did (within the server's network.allow; an empty allow: nothing),
// at once: its open connections the new list leaves out are reset. A
// sandbox made without a network cannot be given one (400).
func (s *Server) handleSandboxNetwork(w http.ResponseWriter, r *http.Request, sb *live.Sandbox) {
	var req wire.NetworkRequest
	if !s.decodeJSONBody(w, r, &req) {
		return
	}
	if req.Allow == nil {
		req.Allow = []string{}
	}
	if err := s.run.SetLiveNetwork(runner.CallerOf(r.Context()), sb.ID, req); err != nil {
		s.writeLiveError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, sandboxJSON(sb))
}

// handleSandboxNetworkReport answers what the sandbox's network did since
// this server took it: its destinations and bytes, and with secrets its
// HTTP and HTTPS requests (404 when it has no network served now).
func (s *Server) handleSandboxNetworkReport(w http.ResponseWriter, r *http.Request, sb *live.Sandbox) {
	rep, err := s.run.LiveNetworkReport(runner.CallerOf(r.Context()), sb.ID)
	if err != nil {
		s.writeLiveError(w, err)
		return
	}
	if rep == nil {
		writeError(w, http.StatusNotFound, "the sandbox has no network served now (made without one, or evicted to disk)")
		return
	}
	writeJSON(w, http.StatusOK, rep)
}

// handleSandboxPause pauses the sandbox (409 when it is paused already);
// with the body's evict, it also writes it to disk and gives its memory
// back (paused already is fine then). An empty body is fine.
func (s *Server) handleSandboxPause(w http.ResponseWriter, r *http.Request, sb *live.Sandbox) {
	var req struct {
		Evict bool `json:"evict"`
	}
	if r.ContentLength != 0 && !s.decodeJSONBody(w, r, &req) {
		return
	}
	pause := s.run.PauseLive
	if req.Evict {
		pause = s.run.EvictLive
	}
	if err := pause(r.Context(), runner.CallerOf(r.Context()), sb.ID); err != nil {
		s.writeLiveError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, sandboxJSON(sb))
}

// handleSandboxResume resumes the sandbox if it is paused; its timeout is
// the body's timeout_seconds from now, or what was left of it. An empty
// body is fine.
func (s *Server) handleSandboxResume(w http.ResponseWriter, r *http.Request, sb *live.Sandbox) {
	var req struct {
		TimeoutSeconds float64 `json:"timeout_seconds"`
	}
	if r.ContentLength != 0 && !s.decodeJSONBody(w, r, &req) {
		return
	}
	if req.TimeoutSeconds < 0 || req.TimeoutSeconds > 1e9 {
		writeError(w, http.StatusBadRequest, "timeout_seconds: give a positive number of seconds")
		return
	}
	if _, err := s.run.ResumeLive(runner.CallerOf(r.Context()), sb.ID, seconds(req.TimeoutSeconds)); err != nil {
		s.writeLiveError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, sandboxJSON(sb))
}

// ---------------------------------------------------------------------------
// Errors and bodies.

// writeLiveError answers a failure of a call on a live sandbox: the run
// service's refusals as the API answers them (httpError), the agent's by
// their kind, a sandbox that ended meanwhile as 404.
func (s *Server) writeLiveError(w http.ResponseWriter, err error) {
	var le *live.Error
	switch {
	case errors.As(err, &le):
		writeError(w, le.Kind().HTTPStatus(), le.Msg)
	case errors.Is(err, live.ErrGone):
		writeError(w, http.StatusNotFound, "the sandbox has ended")
	default:
		s.writeExecuteError(w, httpError(err), nil)
	}
}

// decodeJSONBody reads r's body into v as the execute endpoint reads its
// own: JSON in UTF-8, one value, only known fields (exact names), at most
// max_body_bytes. When it cannot, it has answered and returns false.
func (s *Server) decodeJSONBody(w http.ResponseWriter, r *http.Request, v any) bool {
	if err := checkContentType(r); err != nil {
		s.reject(w, err, "content_type")
		return false
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes))
	if err != nil {
		var big *http.MaxBytesError
		if errors.As(err, &big) {
			s.reject(w, &requestError{status: http.StatusRequestEntityTooLarge, msg: fmt.Sprintf("request body larger than %d bytes", big.Limit)}, "too_large")
		} else {
			s.reject(w, badRequest("read body: %v", err), "invalid")
		}
		return false
	}
	if !utf8.Valid(body) {
		s.reject(w, badRequest("malformed JSON: the body is not valid UTF-8"), "invalid")
		return false
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		s.reject(w, badRequest("malformed JSON: %s", jsonProblem(err)), "invalid")
		return false
	}
	if _, err := dec.Token(); err != io.EOF {
		s.reject(w, badRequest("malformed JSON: more than one value in the body"), "invalid")
		return false
	}
	// encoding/json matched keys case-insensitively: only exact names.
	if err := wire.CheckKeys(body, v); err != nil {
		s.reject(w, badRequest("malformed JSON: %s", jsonProblem(err)), "invalid")
		return false
	}
	return true
}

// sandboxPath is p inside a sandbox: relative to its home unless
// absolute ("" stays "").
func sandboxPath(p string) string {
	if p == "" {
		return ""
	}
	if !path.IsAbs(p) {
		p = path.Join(sandboxHome, p)
	}
	return path.Clean(p)
}

// ---------------------------------------------------------------------------
// Processes.

// processOutput is a "stdout" or "stderr" event's payload (text, or
// base64 when it is not UTF-8 or mostly control bytes, as a run's
// stream events are); ptyOutput a "pty" event's (bytes, base64 in JSON).
type (
	processOutput struct {
		Data     string `json:"data"`
		Encoding string `json:"encoding,omitempty"`
	}
	ptyOutput struct {
		Data []byte `json:"data"`
	}
	processStart struct {
		PID int `json:"pid"`
	}
)

// agentRequest is the agent's start of what req describes, and its
// timeout.
func agentRequest(req wire.ProcessRequest) (agent.Request, time.Duration, error) {
	var ar agent.Request
	switch {
	case req.Command != "" && len(req.Args) > 0:
		return ar, 0, badRequest("give command or args, not both")
	case req.Command != "":
		ar.Args = []string{"bash", "-l", "-c", req.Command}
	case len(req.Args) > 0 && req.Args[0] != "":
		ar.Args = slices.Clone(req.Args)
	default:
		return ar, 0, badRequest("give the process as command (run by bash -l -c) or args (an argv)")
	}
	if slices.ContainsFunc(append([]string{req.Command, req.Cwd}, req.Args...), func(a string) bool { return strings.ContainsRune(a, 0) }) {
		return ar, 0, badRequest("command, args and cwd cannot hold NUL bytes")
	}
	ar.Dir = cmp.Or(sandboxPath(req.Cwd), sandboxHome)
	if err := checkEnv(req.Env); err != nil {
		return ar, 0, err
	}
	for _, k := range slices.Sorted(maps.Keys(req.Env)) {
		ar.Env = append(ar.Env, k+"="+req.Env[k])
	}
	ar.Stdin, ar.Tag = req.Stdin, req.Tag
	if req.PTY != nil {
		size, err := terminalSize(req.PTY.Cols, req.PTY.Rows)
		if err != nil {
			return ar, 0, err
		}
		ar.PTY, ar.Stdin = &size, false // the terminal is its input
	}
	if t := req.TimeoutSeconds; t < 0 || t > 1e9 {
		return ar, 0, badRequest("timeout_seconds %v: give a positive number of seconds, or 0 for none", t)
	}
	return ar, seconds(req.TimeoutSeconds), nil
}

// terminalSize checks a terminal's size (0 and 0: 80x24).
func terminalSize(cols, rows int) (agent.Size, error) {
	if cols == 0 && rows == 0 {
		return agent.Size{Cols: 80, Rows: 24}, nil
	}
	if cols < 1 || rows < 1 || cols > 65535 || rows > 65535 {
		return agent.Size{}, badRequest("a terminal of %dx%d: give cols and rows from 1 to 65535", cols, rows)
	}
	return agent.Size{Cols: uint16(cols), Rows: uint16(rows)}, nil
}

func (s *Server) handleProcessStart(w http.ResponseWriter, r *http.Request, sb *live.Sandbox) {
	var req wire.ProcessRequest
	if !s.decodeJSONBody(w, r, &req) {
		return
	}
	ar, timeout, err := agentRequest(req)
	if err != nil {
		s.reject(w, err, "invalid")
		return
	}
	if !req.Background && !wantsEventStream(r) {
		s.waitProcess(w, r, sb, ar, timeout)
		return
	}
	p, sub, err := sb.Start(r.Context(), ar)
	if err != nil {
		s.writeStartError(w, err)
		return
	}
	if req.Background {
		sub.Close()
		if timeout > 0 {
			time.AfterFunc(timeout, func() {
				if !p.Ended() {
					_ = sb.Signal(p.PID, 9)
				}
			})
		}
		writeJSON(w, http.StatusCreated, wire.ProcessResult{PID: p.PID})
		return
	}
	defer sub.Close()
	// The caller's process: it ends when its caller goes.
	if s.streamProcess(w, r, sb, p, sub, timeout) != nil && !p.Ended() {
		_ = sb.Signal(p.PID, 9)
	}
}

// writeStartError answers a process that did not start: a program or a
// working directory that is missing or not the sandbox's user's is the
// request's fault.
func (s *Server) writeStartError(w http.ResponseWriter, err error) {
	var le *live.Error
	if errors.As(err, &le) && (le.Kind() == wire.KindNotFound || le.Kind() == wire.KindForbidden) {
		writeError(w, http.StatusBadRequest, "the process cannot start: "+le.Msg)
		return
	}
	s.writeLiveError(w, err)
}

// pump calls on with each of sub's events in order, until the last (then
// it returns nil), ctx's end or on's failure (their error), or stop's
// closing (errStopping). Past timeout (0: none) it calls expire once;
// every keepaliveEvery, beat (if any).
func pump(ctx context.Context, sub *live.Sub, timeout time.Duration, expire func(), on func(agent.Event) error, beat func() error,
	stop <-chan struct{}) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	events, ended := make(chan agent.Event), make(chan error, 1)
	go func() {
		for {
			ev, err := sub.Next(ctx)
			if err != nil {
				ended <- err
				return
			}
			select {
			case events <- ev:
			case <-ctx.Done():
				ended <- ctx.Err()
				return
			}
		}
	}()
	var deadline <-chan time.Time
	if timeout > 0 {
		t := time.NewTimer(timeout)
		defer t.Stop()
		deadline = t.C
	}
	var tick <-chan time.Time
	if beat != nil {
		t := time.NewTicker(keepaliveEvery)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case ev := <-events:
			if err := on(ev); err != nil {
				return err
			}
		case err := <-ended:
			if errors.Is(err, live.ErrEnded) {
				return nil
			}
			return err
		case <-deadline:
			deadline = nil
			expire()
		case <-tick:
			if err := beat(); err != nil {
				return err
			}
		case <-stop:
			return errStopping
		}
	}
}

// endOf fills res with a process's last event.
func endOf(res *wire.ProcessResult, ev agent.Event) {
	switch ev.Type {
	case agent.EvExit:
		res.ExitCode, res.Status, res.Error = ev.Exit, ev.Status, ev.Error
	case agent.EvError: // the sandbox went away first
		res.Error = "the sandbox ended: " + ev.Error
	}
}

// outputText is output kept up to a bound: when it was cut, without half
// a character at its end.
func outputText(b []byte, cut bool) string {
	if cut {
		b = b[:len(b)-incompleteTail(b)]
	}
	return string(b)
}

// waitProcess runs ar to its end and answers its result, its outputs each
// cut at max_response_bytes. A client that goes away first kills it.
func (s *Server) waitProcess(w http.ResponseWriter, r *http.Request, sb *live.Sandbox, ar agent.Request, timeout time.Duration) {
	_ = http.NewResponseController(w).SetWriteDeadline(time.Time{}) // it lasts as long as the process
	run, err := sb.Run(r.Context(), ar, live.RunOptions{MaxOutput: int(min(s.cfg.MaxResponseBytes, 1<<40)), Timeout: timeout})
	switch {
	case r.Context().Err() != nil:
		return // the client went away
	case err != nil:
		s.writeStartError(w, err)
		return
	}
	res := wire.ProcessResult{PID: run.PID, Stdout: outputText(run.Stdout, run.StdoutTruncated), Stderr: outputText(run.Stderr, run.StderrTruncated),
		StdoutTruncated: run.StdoutTruncated, StderrTruncated: run.StderrTruncated, TimedOut: run.TimedOut}
	if run.Gone {
		res.Error = "the sandbox ended: " + run.Error
	} else {
		res.ExitCode, res.Status, res.Error = &run.ExitCode, run.Status, run.Error
	}
	writeJSON(w, http.StatusOK, res)
}

// sseStream is a response of Server-Sent Events, written by one goroutine.
type sseStream struct {
	w  http.ResponseWriter
	rc *http.ResponseController
	// pending holds each text stream's incomplete UTF-8 sequence.
	pending map[string][]byte
}

// startSSE answers 200 with an event stream that outlives the server's
// write timeout.
func startSSE(w http.ResponseWriter) *sseStream {
	rc := http.NewResponseController(w)
	_ = rc.SetWriteDeadline(time.Time{})
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	_ = rc.Flush()
	return &sseStream{w: w, rc: rc, pending: map[string][]byte{}}
}

func (e *sseStream) send(event string, v any) error {
	b, err := marshalJSON(v)
	if err != nil {
		return err
	}
	if _, err := fmt.Fprintf(e.w, "event: %s\ndata: %s\n", event, b); err != nil {
		return err
	}
	return e.rc.Flush()
}

func (e *sseStream) keepalive() error {
	if _, err := io.WriteString(e.w, ": keepalive\n\n"); err != nil {
		return err
	}
	return e.rc.Flush()
}

// text sends output of a text stream, holding back a character cut in
// two for the next chunk (final: sends what is held).
func (e *sseStream) text(stream string, p []byte, final bool) error {
	data := append(e.pending[stream], p...)
	e.pending[stream] = nil
	if cut := incompleteTail(data); cut > 0 && !final {
		e.pending[stream] = slices.Clone(data[len(data)-cut:])
		data = data[:len(data)-cut]
	}
	if len(data) == 0 {
		return nil
	}
	out := processOutput{}
	out.Data, out.Encoding = wire.EncodeOutput(data)
	return e.send(stream, out)
}

// errStopping ends a live sandbox's event stream when the server begins
// to shut down: what it followed goes on.
var errStopping = errors.New("the server is shutting down: connect again later")

// stopping ends the stream at the server's shutdown: what output it holds
// back, then an "error" event (as an execution's stream ends with one).
func (e *sseStream) stopping() error {
	for _, st := range []string{agent.EvStdout, agent.EvStderr} {
		if err := e.text(st, nil, true); err != nil {
			return err
		}
	}
	return e.send("error", wire.StreamError{Error: errStopping.Error(), Status: http.StatusServiceUnavailable})
}

// followProcess streams p's events from sub: start, output as it comes,
// exit last; or, when the server begins to shut down, an "error" event
// last (p runs on: it returns nil).
func (s *Server) followProcess(ctx context.Context, e *sseStream, p *live.Proc, sub *live.Sub, timeout time.Duration, expire func()) error {
	if err := e.send("start", processStart{PID: p.PID}); err != nil {
		return err
	}
	res := wire.ProcessResult{PID: p.PID}
	err := pump(ctx, sub, timeout, func() {
		res.TimedOut = true
		expire()
	}, func(ev agent.Event) error {
		switch ev.Type {
		case agent.EvStdout, agent.EvStderr:
			return e.text(ev.Type, ev.Data, false)
		case agent.EvPTY:
			return e.send("pty", ptyOutput{Data: ev.Data})
		case agent.EvExit, agent.EvError:
			for _, st := range []string{agent.EvStdout, agent.EvStderr} {
				if err := e.text(st, nil, true); err != nil {
					return err
				}
			}
			endOf(&res, ev)
			return e.send("exit", res)
		}
		return nil
	}, e.keepalive, s.run.Stopping())
	if errors.Is(err, errStopping) {
		return e.stopping()
	}
	return err
}

func (s *Server) streamProcess(w http.ResponseWriter, r *http.Request, sb *live.Sandbox, p *live.Proc, sub *live.Sub, timeout time.Duration) error {
	return s.followProcess(r.Context(), startSSE(w), p, sub, timeout, func() { _ = sb.Signal(p.PID, 9) })
}

// queryBool is the request's boolean query parameter name (false when it
// is not given), or a 400.
func queryBool(w http.ResponseWriter, r *http.Request, name string) (v, ok bool) {
	q := r.URL.Query().Get(name)
	if q == "" {
		return false, true
	}
	v, err := strconv.ParseBool(q)
	if err != nil {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("%s=%.20q: give true or false", name, q))
		return false, false
	}
	return v, true
}

// pidOf is the request's pid, or 404.
func pidOf(w http.ResponseWriter, r *http.Request) (int, bool) {
	pid, err := strconv.Atoi(r.PathValue("pid"))
	if err != nil || pid < 1 {
		writeError(w, http.StatusNotFound, fmt.Sprintf("no process %.40q: a pid is a positive integer", r.PathValue("pid")))
		return 0, false
	}
	return pid, true
}

func (s *Server) handleProcessEvents(w http.ResponseWriter, r *http.Request, sb *live.Sandbox) {
	pid, ok := pidOf(w, r)
	if !ok {
		return
	}
	p, ok := sb.Proc(pid)
	if !ok {
		writeError(w, http.StatusNotFound, fmt.Sprintf("process %d is not running (or was not started through the API)", pid))
		return
	}
	sub := p.Subscribe()
	defer sub.Close()
	_ = s.followProcess(r.Context(), startSSE(w), p, sub, 0, nil) // it runs on when the client goes
}

func (s *Server) handleProcessList(w http.ResponseWriter, r *http.Request, sb *live.Sandbox) {
	ev, err := sb.Client().Call(r.Context(), agent.Request{Op: agent.OpList})
	if err != nil {
		s.writeLiveError(w, err)
		return
	}
	out := []wire.ProcessInfo{}
	for _, p := range ev.Procs {
		if strings.HasPrefix(p.Tag, kernelTag) {
			continue
		}
		args := p.Args
		if args == nil {
			args = []string{}
		}
		out = append(out, wire.ProcessInfo{PID: p.PID, Args: args, Cwd: p.Dir, Tag: p.Tag, PTY: p.PTY})
	}
	writeJSON(w, http.StatusOK, map[string]any{"processes": out})
}

// call makes an agent request on sb and answers 204, or the error.
func (s *Server) call(w http.ResponseWriter, r *http.Request, sb *live.Sandbox, reqs ...agent.Request) {
	for _, ar := range reqs {
		if _, err := sb.Client().Call(r.Context(), ar); err != nil {
			s.writeLiveError(w, err)
			return
		}
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) handleProcessStdin(w http.ResponseWriter, r *http.Request, sb *live.Sandbox) {
	pid, ok := pidOf(w, r)
	if !ok {
		return
	}
	closeIt, ok := queryBool(w, r, "close")
	if !ok {
		return
	}
	if r.ContentLength > maxStdinBody {
		writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("stdin of %d bytes in one request: send at most %d", r.ContentLength, maxStdinBody))
		return
	}
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxStdinBody))
	if err != nil {
		var big *http.MaxBytesError
		if errors.As(err, &big) {
			writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("stdin larger than %d bytes in one request", maxStdinBody))
		} else {
			writeError(w, http.StatusBadRequest, "read body: "+err.Error())
		}
		return
	}
	var reqs []agent.Request
	if len(data) > 0 || !closeIt {
		reqs = append(reqs, agent.Request{Op: agent.OpInput, PID: pid, Data: data})
	}
	if closeIt {
		reqs = append(reqs, agent.Request{Op: agent.OpCloseStdin, PID: pid})
	}
	s.call(w, r, sb, reqs...)
}

// signalRequest is POST .../signal's body: a name or a number.
type signalRequest struct {
	Signal json.RawMessage `json:"signal"`
}

// signalNumber is the signal raw names.
func signalNumber(raw json.RawMessage) (int, error) {
	var name string
	var n int
	switch {
	case json.Unmarshal(raw, &name) == nil:
		name = strings.ToUpper(strings.TrimSpace(name))
		if !strings.HasPrefix(name, "SIG") {
			name = "SIG" + name
		}
		if sig, ok := signalNumbers[name]; ok {
			return sig, nil
		}
	case json.Unmarshal(raw, &n) == nil && n >= 1 && n <= 64:
		return n, nil
	}
	return 0, badRequest("signal %.40s: give SIGTERM, SIGKILL, SIGINT, SIGHUP (or another by name) or a number from 1 to 64", raw)
}

func (s *Server) handleProcessSignal(w http.ResponseWriter, r *http.Request, sb *live.Sandbox) {
	pid, ok := pidOf(w, r)
	if !ok {
		return
	}
	var req signalRequest
	if !s.decodeJSONBody(w, r, &req) {
		return
	}
	sig, err := signalNumber(req.Signal)
	if err != nil {
		s.reject(w, err, "invalid")
		return
	}
	s.call(w, r, sb, agent.Request{Op: agent.OpSignal, PID: pid, Signal: sig})
}

func (s *Server) handleProcessResize(w http.ResponseWriter, r *http.Request, sb *live.Sandbox) {
	pid, ok := pidOf(w, r)
	if !ok {
		return
	}
	var req wire.TerminalSize
	if !s.decodeJSONBody(w, r, &req) {
		return
	}
	size, err := terminalSize(req.Cols, req.Rows)
	if err != nil || req.Cols == 0 {
		s.reject(w, cmp.Or(err, badRequest("give cols and rows from 1 to 65535")), "invalid")
		return
	}
	s.call(w, r, sb, agent.Request{Op: agent.OpResize, PID: pid, Size: &size})
}

// ---------------------------------------------------------------------------
// The terminal: a WebSocket to an interactive shell.

// ptyMessage is a text message of the terminal's client.
type ptyMessage struct {
	Resize *wire.TerminalSize `json:"resize"`
}

// handleSandboxPTY serves GET .../pty: a WebSocket (authenticated as
// /api/sandbox/ws is, by header or subprotocol; cross-origin handshakes
// refused) to `bash -i -l` on a new terminal. Binary messages are its
// input and its output; a text message {"resize": {"cols", "rows"}}
// resizes it. When the shell exits the server closes (1000, "exit N");
// when the client closes, the shell is hung up on (then killed).
func (s *Server) handleSandboxPTY(w http.ResponseWriter, r *http.Request) {
	key, status, msg := s.authenticate(wsAuthRequest(r), ScopeExecute)
	if status != 0 {
		refuseAuth(w, status, msg, nil)
		return
	}
	c := callerOf(r, key)
	sb, err := s.run.LiveSandbox(c, r.PathValue("id"))
	if err != nil {
		s.writeLiveError(w, err)
		return
	}
	if !headerHasToken(r.Header, "Upgrade", "websocket") {
		w.Header().Set("Upgrade", "websocket")
		w.Header().Set("Connection", "Upgrade")
		s.reject(w, &requestError{status: http.StatusUpgradeRequired, msg: "this endpoint speaks WebSocket: send a WebSocket handshake (Upgrade: websocket)"}, "invalid")
		return
	}
	var cols, rows int
	q := r.URL.Query()
	for _, v := range []struct {
		name string
		n    *int
	}{{"cols", &cols}, {"rows", &rows}} {
		if val := q.Get(v.name); val != "" {
			n, err := strconv.Atoi(val)
			if err != nil {
				writeError(w, http.StatusBadRequest, fmt.Sprintf("%s=%.20q: give a number", v.name, val))
				return
			}
			*v.n = n
		}
	}
	if cols == 0 && rows != 0 || rows == 0 && cols != 0 {
		cols, rows = cmp.Or(cols, 80), cmp.Or(rows, 24)
	}
	size, err := terminalSize(cols, rows)
	if err != nil {
		s.reject(w, err, "invalid")
		return
	}
	conn, err := websocket.Accept(w, r, &websocket.AcceptOptions{
		Subprotocols:    []string{WSSubprotocol},
		CompressionMode: websocket.CompressionDisabled,
	})
	if err != nil {
		s.metrics.Rejected.WithLabelValues("invalid").Inc()
		return // Accept answered
	}
	defer conn.CloseNow()
	ctx := r.Context()
	p, sub, err := sb.Start(ctx, agent.Request{Args: []string{"bash", "-i", "-l"}, Env: []string{"TERM=xterm-256color"},
		Dir: sandboxHome, PTY: &size})
	if err != nil {
		conn.Close(websocket.StatusInternalError, closeReason("the shell did not start: "+err.Error()))
		return
	}
	defer sub.Close()
	var once sync.Once
	hangUp := func() { once.Do(func() { hangUpShell(sb, p) }) }
	readerDone := make(chan struct{})
	go func() {
		// The client's messages until it goes: then the shell goes too
		// (and its exit ends the handler).
		defer close(readerDone)
		for {
			typ, data, err := readMessage(ctx, conn, wsMessageLimit)
			if err != nil {
				hangUp()
				return
			}
			ar := agent.Request{Op: agent.OpInput, PID: p.PID, Data: data}
			if typ == websocket.MessageText {
				var m ptyMessage
				if json.Unmarshal(data, &m) != nil || m.Resize == nil {
					conn.Close(websocket.StatusPolicyViolation, `a text message is {"resize": {"cols": N, "rows": N}}; input goes in binary messages`)
					hangUp()
					return
				}
				size, err := terminalSize(m.Resize.Cols, m.Resize.Rows)
				if err != nil || m.Resize.Cols == 0 {
					conn.Close(websocket.StatusPolicyViolation, "resize: give cols and rows from 1 to 65535")
					hangUp()
					return
				}
				ar = agent.Request{Op: agent.OpResize, PID: p.PID, Size: &size}
			}
			if _, err := sb.Client().Call(ctx, ar); err != nil && !p.Ended() {
				s.log.Info("live sandbox terminal: a request failed", "sandbox", sb.ID, "op", ar.Op, "error", err)
			}
		}
	}()
	defer func() {
		conn.CloseNow() // the reader's read fails, if it has not yet
		<-readerDone
	}()
	var reason string
	code := websocket.StatusNormalClosure
	err = pump(ctx, sub, 0, nil, func(ev agent.Event) error {
		switch ev.Type {
		case agent.EvPTY:
			wctx, cancel := context.WithTimeout(ctx, wsWriteTimeout)
			defer cancel()
			return conn.Write(wctx, websocket.MessageBinary, ev.Data)
		case agent.EvExit:
			reason = "exit -1 (" + ev.Status + ")"
			if ev.Exit != nil && *ev.Exit >= 0 {
				reason = "exit " + strconv.Itoa(*ev.Exit)
			}
		case agent.EvError:
			code, reason = websocket.StatusInternalError, "the sandbox ended"
		}
		return nil
	}, nil, nil)
	if err != nil {
		// The client went away or cannot keep up, or the server is
		// shutting down: the shell ends.
		hangUp()
		return
	}
	conn.Close(code, closeReason(reason))
}

// closeReason fits a close reason in a control frame (123 bytes).
func closeReason(s string) string {
	if len(s) <= 123 {
		return s
	}
	s = s[:123]
	return s[:len(s)-incompleteTail([]byte(s))]
}

// hangUpShell ends a terminal's shell as a terminal's loss does: SIGHUP (an
// interactive shell passes it to its jobs), then SIGKILL if it lingers.
func hangUpShell(sb *live.Sandbox, p *live.Proc) {
	if p.Ended() {
		return
	}
	_ = sb.Signal(p.PID, 1)
	go func() {
		deadline := time.Now().Add(5 * time.Second)
		for !p.Ended() && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
		if !p.Ended() {
			_ = sb.Signal(p.PID, 9)
		}
	}()
}

// ---------------------------------------------------------------------------
// Files.

// fileEntry is an agent's entry as the API shows it.
func fileEntry(e *agent.Entry) wire.FileEntry {
	if e == nil {
		return wire.FileEntry{}
	}
	kind := "-"
	switch e.Type {
	case "dir":
		kind = "d"
	case "symlink":
		kind = "l"
	}
	return wire.FileEntry{Name: e.Name, Path: e.Path, Type: e.Type, Size: e.Size, Mode: kind + e.Mode.Perm().String()[1:],
		ModTime: e.ModTime.UTC(), Target: e.Target}
}

// pathParam is the request's ?path= in the sandbox, or (dflt "") a 400.
func pathParam(w http.ResponseWriter, r *http.Request, dflt string) (string, bool) {
	p := sandboxPath(r.URL.Query().Get("path"))
	if p == "" {
		p = dflt
	}
	if p == "" {
		writeError(w, http.StatusBadRequest, "give the file as ?path= (relative to /work unless absolute)")
		return "", false
	}
	if strings.ContainsRune(p, 0) {
		writeError(w, http.StatusBadRequest, "a path cannot hold a NUL byte")
		return "", false
	}
	return p, true
}

func (s *Server) handleSandboxFileGet(w http.ResponseWriter, r *http.Request, sb *live.Sandbox) {
	p, ok := pathParam(w, r, "")
	if !ok {
		return
	}
	f, err := sb.Open(r.Context(), p) // its first chunk: an error comes before any byte
	if err != nil {
		s.writeLiveError(w, err)
		return
	}
	rc := http.NewResponseController(w)
	_ = rc.SetWriteDeadline(time.Time{}) // a large file takes its time
	h := w.Header()
	h.Set("Content-Type", "application/octet-stream")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		_, _ = io.Copy(w, f) // a failure past here cuts the answer short
	}
}

func (s *Server) handleSandboxFilePut(w http.ResponseWriter, r *http.Request, sb *live.Sandbox) {
	p, ok := pathParam(w, r, "")
	if !ok {
		return
	}
	tooLarge := func() {
		writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("a file is at most %d bytes (%d MiB) here", maxSandboxFile, maxSandboxFile>>20))
	}
	if r.ContentLength > maxSandboxFile {
		tooLarge()
		return
	}
	// Written in chunks as the body comes.
	body := &countingReader{r: http.MaxBytesReader(w, r.Body, maxSandboxFile)}
	e, err := sb.WriteFile(r.Context(), p, body, 0o644)
	var big *http.MaxBytesError
	switch {
	case err == nil:
		writeJSON(w, http.StatusCreated, fileEntry(e))
	case errors.As(body.err, &big):
		// What was written of it is no file the client wanted.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _ = sb.Client().Call(ctx, agent.Request{Op: agent.OpRemove, Path: p})
		tooLarge()
	case body.err != nil:
		writeError(w, http.StatusBadRequest, "reading the upload: "+body.err.Error())
	default:
		s.writeLiveError(w, err)
	}
}

func (s *Server) handleSandboxFileDelete(w http.ResponseWriter, r *http.Request, sb *live.Sandbox) {
	p, ok := pathParam(w, r, "")
	if !ok {
		return
	}
	s.call(w, r, sb, agent.Request{Op: agent.OpRemove, Path: p})
}

func (s *Server) handleSandboxFileList(w http.ResponseWriter, r *http.Request, sb *live.Sandbox) {
	p, ok := pathParam(w, r, sandboxHome)
	if !ok {
		return
	}
	depth := 1
	if v := r.URL.Query().Get("depth"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxListDepth {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("depth=%.20q: give a number from 1 to %d", v, maxListDepth))
			return
		}
		depth = n
	}
	ev, err := sb.Client().Call(r.Context(), agent.Request{Op: agent.OpListDir, Path: p, Depth: depth})
	if err != nil {
		s.writeLiveError(w, err)
		return
	}
	out := []wire.FileEntry{}
	for i := range ev.Entries {
		out = append(out, fileEntry(&ev.Entries[i]))
	}
	writeJSON(w, http.StatusOK, map[string]any{"entries": out})
}

func (s *Server) handleSandboxFileStat(w http.ResponseWriter, r *http.Request, sb *live.Sandbox) {
	p, ok := pathParam(w, r, "")
	if !ok {
		return
	}
	ev, err := sb.Client().Call(r.Context(), agent.Request{Op: agent.OpStat, Path: p})
	if err != nil {
		s.writeLiveError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, fileEntry(ev.Entry))
}

// mkdirRequest and moveRequest are the bodies of .../files/mkdir and
// .../files/move.
type (
	mkdirRequest struct {
		Path string `json:"path"`
	}
	moveRequest struct {
		From string `json:"from"`
		To   string `json:"to"`
	}
)

func (s *Server) handleSandboxMkdir(w http.ResponseWriter, r *http.Request, sb *live.Sandbox) {
	var req mkdirRequest
	if !s.decodeJSONBody(w, r, &req) {
		return
	}
	if req.Path == "" {
		writeError(w, http.StatusBadRequest, "give the directory as path (relative to /work unless absolute)")
		return
	}
	ev, err := sb.Client().Call(r.Context(), agent.Request{Op: agent.OpMkdir, Path: sandboxPath(req.Path)})
	if err != nil {
		s.writeLiveError(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, fileEntry(ev.Entry))
}

func (s *Server) handleSandboxMove(w http.ResponseWriter, r *http.Request, sb *live.Sandbox) {
	var req moveRequest
	if !s.decodeJSONBody(w, r, &req) {
		return
	}
	if req.From == "" || req.To == "" {
		writeError(w, http.StatusBadRequest, "give from and to (relative to /work unless absolute)")
		return
	}
	ev, err := sb.Client().Call(r.Context(), agent.Request{Op: agent.OpMove, Path: sandboxPath(req.From), To: sandboxPath(req.To)})
	if err != nil {
		s.writeLiveError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, fileEntry(ev.Entry))
}

// fsEvent is a watch's "fs" event.
type fsEvent struct {
	// Name is relative to the watched directory, Path absolute.
	Name string `json:"name"`
	Path string `json:"path"`
	Op   string `json:"op"`
}

// handleSandboxWatch streams a directory's changes as "fs" events until
// the client goes (or the directory or the sandbox does). The response's
// headers come once the watch is in place.
func (s *Server) handleSandboxWatch(w http.ResponseWriter, r *http.Request, sb *live.Sandbox) {
	dir, ok := pathParam(w, r, sandboxHome)
	if !ok {
		return
	}
	recursive, ok := queryBool(w, r, "recursive")
	if !ok {
		return
	}
	ctx := r.Context()
	events := make(chan agent.Event, 1024)
	stop, err := sb.Client().Watch(ctx, dir, recursive, func(ev agent.Event) {
		select {
		case events <- ev:
		default: // a client this far behind loses events
		}
	})
	if err != nil {
		s.writeLiveError(w, err)
		return
	}
	defer stop()
	st := startSSE(w)
	tick := time.NewTicker(keepaliveEvery)
	defer tick.Stop()
	for {
		select {
		case ev := <-events:
			if ev.Type != agent.EvFS {
				return // the watch ended: its directory went, or the sandbox
			}
			if st.send("fs", fsEvent{Name: ev.Name, Path: path.Join(dir, ev.Name), Op: ev.FSOp}) != nil {
				return
			}
		case <-tick.C:
			if st.keepalive() != nil {
				return
			}
		case <-sb.Client().Done():
			return
		case <-ctx.Done():
			return
		case <-s.run.Stopping():
			_ = st.stopping()
			return
		}
	}
}

// ---------------------------------------------------------------------------
// Ports.

// handleSandboxPort relays a request, HTTP or a WebSocket upgrade, to a
// port on the sandbox's own loopback (its network namespace's: nothing
// else is reachable so), with the path after .../ports/{port} and the
// query. The API key goes no further.
func (s *Server) handleSandboxPort(w http.ResponseWriter, r *http.Request, sb *live.Sandbox) {
	port, err := strconv.Atoi(r.PathValue("port"))
	if err != nil || port < 1 || port > 65535 {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("port %.20q: give a port from 1 to 65535", r.PathValue("port")))
		return
	}
	// The rest of the path as sent (escapes kept): after the 7th slash.
	rest := ""
	if parts := strings.SplitN(r.URL.EscapedPath(), "/", 8); len(parts) == 8 {
		rest = parts[7]
	}
	target, err := url.Parse("/" + rest)
	if err != nil {
		writeError(w, http.StatusBadRequest, "the path: "+err.Error())
		return
	}
	prefix := sandboxesPath + "/" + sb.ID + "/ports/" + strconv.Itoa(port)
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme = "http"
			pr.Out.URL.Host = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
			pr.Out.URL.Path, pr.Out.URL.RawPath = target.Path, target.RawPath
			pr.Out.Host = ""
			for _, h := range []string{"Authorization", "X-Auth-Token", "X-API-Key"} {
				pr.Out.Header.Del(h)
			}
			pr.SetXForwarded()
			pr.Out.Header.Set("X-Forwarded-Prefix", prefix)
		},
		Transport: &http.Transport{
			// One connection per request, dialed in the sandbox's network
			// namespace: nothing is kept across sandboxes.
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				return sb.DialTCP(ctx, port)
			},
			DisableKeepAlives: true,
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			writeError(w, http.StatusBadGateway, fmt.Sprintf("port %d of sandbox %s: %v", port, sb.ID, err))
		},
		ErrorLog:      slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
		FlushInterval: -1,
	}
	_ = http.NewResponseController(w).SetWriteDeadline(time.Time{}) // a stream lasts as long as it does
	rp.ServeHTTP(w, r)
}
