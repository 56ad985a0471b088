package e2b

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/sandbox-run/sandbox-run/pkg/live"
	"github.com/sandbox-run/sandbox-run/pkg/live/agent"
)

// The code interpreter (@e2b/code-interpreter's port 49999): code contexts
// are interpreter kernels (the interpreter sessions' kernel.py and
// kernel.js) running in the sandbox, started by the door through the
// agent; POST /execute runs a cell in one and streams its output, rich
// results and error as NDJSON.

func (d *Door) routeInterpreter() {
	d.mux.HandleFunc("POST /execute", d.execute)
	d.mux.HandleFunc("POST /contexts", d.createContext)
	d.mux.HandleFunc("GET /contexts", d.listContexts)
	d.mux.HandleFunc("POST /contexts/{id}/restart", d.restartContext)
	d.mux.HandleFunc("DELETE /contexts/{id}", d.removeContext)
}

// codeContext is a kernel in a sandbox.
type codeContext struct {
	ID       string `json:"id"`
	Language string `json:"language"`
	Cwd      string `json:"cwd"`

	cells sync.Mutex // one cell at a time
	proc  *live.Proc
	sub   *live.Sub
	count int
}

// contexts are one sandbox's code contexts.
type contexts struct {
	mu       sync.Mutex
	byID     map[string]*codeContext
	defaults map[string]*codeContext // by language
}

// contextsOf are sb's contexts (dropped once it ends).
func (d *Door) contextsOf(sb *live.Sandbox) *contexts {
	d.mu.Lock()
	defer d.mu.Unlock()
	c := d.contexts[sb.ID]
	if c == nil {
		c = &contexts{byID: map[string]*codeContext{}, defaults: map[string]*codeContext{}}
		c.find(sb)
		d.contexts[sb.ID] = c
		go func() {
			<-sb.Done()
			d.mu.Lock()
			delete(d.contexts, sb.ID)
			d.mu.Unlock()
		}()
	}
	return c
}

// language is a context's language by the names the SDK sends.
func (d *Door) language(name string) (string, error) {
	switch strings.ToLower(name) {
	case "", "python", "python3":
		return "python", nil
	case "js", "javascript", "node", "nodejs":
		return "javascript", nil
	}
	if l, ok := d.svc.Lookup(name); ok {
		if _, has := live.Kernels[l.Name]; has {
			return l.Name, nil
		}
	}
	return "", fmt.Errorf("no code contexts in %q here: python and javascript have them", name)
}

// kernelInfo is what a kernel's tag says of its context (after
// kernelTag), for the door to find the context in a sandbox it has no
// record of: one taken over after a restart, forked with its memory, or
// made from a snapshot of its memory.
type kernelInfo struct {
	ID       string `json:"id"`
	Language string `json:"language"`
	Cwd      string `json:"cwd"`
	Default  bool   `json:"default,omitempty"`
}

// newContext starts a kernel of the context info describes in sb (a new
// id when it has none; its cwd the home when it has none).
func newContext(ctx context.Context, sb *live.Sandbox, info kernelInfo) (*codeContext, error) {
	if info.Cwd == "" {
		info.Cwd = home
	}
	if info.ID == "" {
		var id [8]byte
		_, _ = rand.Read(id[:])
		info.ID = hex.EncodeToString(id[:])
	}
	info.Cwd = abs(info.Cwd)
	tag, _ := json.Marshal(info)
	p, sub, err := sb.Start(ctx, agent.Request{Args: live.Kernels[info.Language], Dir: info.Cwd, Stdin: true, Result: true,
		Tag: kernelTag + " " + string(tag)})
	if err != nil {
		return nil, err
	}
	return &codeContext{ID: info.ID, Language: info.Language, Cwd: info.Cwd, proc: p, sub: sub}, nil
}

// find takes up the contexts whose kernels run in sb, by their tags.
func (c *contexts) find(sb *live.Sandbox) {
	for _, p := range sb.Procs() {
		rest, ok := strings.CutPrefix(p.Request.Tag, kernelTag+" ")
		var info kernelInfo
		if !ok || json.Unmarshal([]byte(rest), &info) != nil || info.ID == "" || p.Ended() {
			continue
		}
		cc := &codeContext{ID: info.ID, Language: info.Language, Cwd: info.Cwd, proc: p, sub: p.Subscribe()}
		c.byID[cc.ID] = cc
		if info.Default {
			c.defaults[cc.Language] = cc
		}
	}
}

func (d *Door) createContext(w http.ResponseWriter, r *http.Request) {
	sb, ok := d.sandboxOf(w, r, writeError)
	if !ok {
		return
	}
	var req struct {
		Language string `json:"language"`
		Cwd      string `json:"cwd"`
	}
	if err := decode(r, &req); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	lang, err := d.language(req.Language)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	cc, err := newContext(r.Context(), sb, kernelInfo{Language: lang, Cwd: req.Cwd})
	if err != nil {
		writeFileError(w, err)
		return
	}
	cs := d.contextsOf(sb)
	cs.mu.Lock()
	cs.byID[cc.ID] = cc
	cs.mu.Unlock()
	writeJSON(w, http.StatusOK, cc)
}

func (d *Door) listContexts(w http.ResponseWriter, r *http.Request) {
	sb, ok := d.sandboxOf(w, r, writeError)
	if !ok {
		return
	}
	cs := d.contextsOf(sb)
	cs.mu.Lock()
	out := []*codeContext{}
	for _, c := range cs.byID {
		out = append(out, c)
	}
	cs.mu.Unlock()
	writeJSON(w, http.StatusOK, out)
}

// context is sb's context id, or false once answered.
func (d *Door) context(w http.ResponseWriter, r *http.Request, sb *live.Sandbox, id string) (*contexts, *codeContext, bool) {
	cs := d.contextsOf(sb)
	cs.mu.Lock()
	cc := cs.byID[id]
	cs.mu.Unlock()
	if cc == nil {
		writeError(w, http.StatusNotFound, "no code context "+id)
		return nil, nil, false
	}
	return cs, cc, true
}

func (d *Door) removeContext(w http.ResponseWriter, r *http.Request) {
	sb, ok := d.sandboxOf(w, r, writeError)
	if !ok {
		return
	}
	cs, cc, ok := d.context(w, r, sb, r.PathValue("id"))
	if !ok {
		return
	}
	cs.mu.Lock()
	delete(cs.byID, cc.ID)
	for l, c := range cs.defaults {
		if c == cc {
			delete(cs.defaults, l)
		}
	}
	cs.mu.Unlock()
	cc.stop(sb)
	w.WriteHeader(http.StatusNoContent)
}

// restartContext starts the context's kernel again: its state is lost.
func (d *Door) restartContext(w http.ResponseWriter, r *http.Request) {
	sb, ok := d.sandboxOf(w, r, writeError)
	if !ok {
		return
	}
	cs, cc, ok := d.context(w, r, sb, r.PathValue("id"))
	if !ok {
		return
	}
	cs.mu.Lock()
	def := cs.defaults[cc.Language] == cc
	cs.mu.Unlock()
	cc.cells.Lock()
	defer cc.cells.Unlock()
	cc.stop(sb)
	fresh, err := newContext(r.Context(), sb, kernelInfo{ID: cc.ID, Language: cc.Language, Cwd: cc.Cwd, Default: def})
	if err != nil {
		writeFileError(w, err)
		return
	}
	cc.proc, cc.sub, cc.count = fresh.proc, fresh.sub, 0
	w.WriteHeader(http.StatusNoContent)
}

// stop kills the context's kernel.
func (cc *codeContext) stop(sb *live.Sandbox) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, _ = sb.Client().Call(ctx, agent.Request{Op: agent.OpSignal, PID: cc.proc.PID, Signal: 9})
	cc.sub.Close()
}

// executeRequest is POST /execute's body.
type executeRequest struct {
	Code      string            `json:"code"`
	ContextID string            `json:"context_id"`
	Language  string            `json:"language"`
	EnvVars   map[string]string `json:"env_vars"`
}

func (d *Door) execute(w http.ResponseWriter, r *http.Request) {
	sb, ok := d.sandboxOf(w, r, writeError)
	if !ok {
		return
	}
	var req executeRequest
	if err := decode(r, &req); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	cs := d.contextsOf(sb)
	var cc *codeContext
	if req.ContextID != "" {
		if _, cc, ok = d.context(w, r, sb, req.ContextID); !ok {
			return
		}
	} else {
		lang, err := d.language(req.Language)
		if err != nil {
			writeError(w, http.StatusBadRequest, err.Error())
			return
		}
		cs.mu.Lock()
		cc = cs.defaults[lang]
		if cc == nil || cc.proc.Ended() {
			if cc, err = newContext(r.Context(), sb, kernelInfo{Language: lang, Default: true}); err != nil {
				cs.mu.Unlock()
				writeFileError(w, err)
				return
			}
			cs.defaults[lang] = cc
			cs.byID[cc.ID] = cc
		}
		cs.mu.Unlock()
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	out := &ndjson{w: w}
	cc.run(r.Context(), sb, req.Code, out)
}

// ndjson writes the execution's lines, flushed, ignoring a client gone.
type ndjson struct {
	w  http.ResponseWriter
	mu sync.Mutex
}

func (n *ndjson) line(v map[string]any) {
	n.mu.Lock()
	defer n.mu.Unlock()
	b, _ := json.Marshal(v)
	_, _ = n.w.Write(append(b, '\n'))
	_ = http.NewResponseController(n.w).Flush()
}

// run runs one cell and writes its output, results and error to out. A
// client that goes away interrupts the cell; its events are read to its
// end all the same, so that the next cell starts clean.
func (cc *codeContext) run(ctx context.Context, sb *live.Sandbox, code string, out *ndjson) {
	cc.cells.Lock()
	defer cc.cells.Unlock()
	if cc.proc.Ended() {
		out.line(map[string]any{"type": "error", "name": "KernelDied", "value": "the context's interpreter has ended: restart the context", "traceback": ""})
		out.line(map[string]any{"type": "end_of_execution"})
		return
	}
	var m [12]byte
	_, _ = rand.Read(m[:])
	marker := "\x1e" + hex.EncodeToString(m[:]) + "\x1e"
	cmd, _ := json.Marshal(map[string]string{"cell": code, "marker": marker})
	cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	_, err := sb.Client().Call(cctx, agent.Request{Op: agent.OpInput, PID: cc.proc.PID, Data: append(cmd, '\n')})
	cancel()
	if err != nil {
		out.line(map[string]any{"type": "error", "name": "SandboxError", "value": err.Error(), "traceback": ""})
		out.line(map[string]any{"type": "end_of_execution"})
		return
	}
	streams := map[string]*markedStream{agent.EvStdout: {marker: []byte(marker)}, agent.EvStderr: {marker: []byte(marker)}}
	var answer []byte
	interrupted := false
	for {
		if ctx.Err() != nil && !interrupted {
			interrupted = true
			ictx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_, _ = sb.Client().Call(ictx, agent.Request{Op: agent.OpInput, PID: cc.proc.PID, Data: []byte("{\"interrupt\": true}\n")})
			cancel()
		}
		if streams[agent.EvStdout].done && streams[agent.EvStderr].done && bytes.HasSuffix(answer, []byte("\n")) {
			break
		}
		wait, stop := context.WithTimeout(context.Background(), time.Second)
		ev, err := cc.sub.Next(wait)
		stop()
		if err == context.DeadlineExceeded {
			continue
		}
		if err != nil || ev.Type == agent.EvExit || ev.Type == agent.EvError {
			out.line(map[string]any{"type": "error", "name": "KernelDied", "value": "the interpreter ended during the cell (a limit of the sandbox, such as its memory, may have killed it): its state is lost", "traceback": ""})
			out.line(map[string]any{"type": "end_of_execution"})
			return
		}
		switch ev.Type {
		case agent.EvStdout, agent.EvStderr:
			if text := streams[ev.Type].take(ev.Data); text != "" {
				out.line(map[string]any{"type": ev.Type, "text": text, "timestamp": time.Now().UTC().Format(time.RFC3339Nano)})
			}
		case agent.EvResult:
			answer = append(answer, ev.Data...)
		}
	}
	cc.count++
	var a struct {
		Result    map[string]any   `json:"result"`
		Display   []map[string]any `json:"display"`
		Exception *struct {
			Type, Message, Traceback string
		} `json:"exception"`
	}
	_ = json.Unmarshal(answer, &a)
	for _, d := range a.Display {
		out.line(result(d, false))
	}
	if a.Result != nil {
		out.line(result(a.Result, true))
	}
	if e := a.Exception; e != nil {
		out.line(map[string]any{"type": "error", "name": e.Type, "value": e.Message, "traceback": e.Traceback})
	}
	out.line(map[string]any{"type": "number_of_executions", "execution_count": cc.count})
	out.line(map[string]any{"type": "end_of_execution"})
}

// mimeKeys are a result's formats by their MIME types.
var mimeKeys = map[string]string{"text/plain": "text", "text/html": "html", "text/markdown": "markdown", "image/svg+xml": "svg",
	"image/png": "png", "image/jpeg": "jpeg", "application/pdf": "pdf", "text/latex": "latex", "application/json": "json",
	"application/javascript": "javascript", "application/vnd.sandbox-run.chart+json": "chart"}

// result is a kernel's bundle as the code interpreter's result line.
func result(bundle map[string]any, main bool) map[string]any {
	out := map[string]any{"type": "result", "is_main_result": main}
	extra := map[string]any{}
	for mime, v := range bundle {
		key, ok := mimeKeys[mime]
		if !ok {
			extra[mime] = v
			continue
		}
		if key == "json" || key == "chart" {
			if s, isStr := v.(string); isStr {
				var j any
				if json.Unmarshal([]byte(s), &j) == nil {
					v = j
				}
			}
		}
		out[key] = v
	}
	out["extra"] = extra
	return out
}

// markedStream is one stream of a cell's output: its text until the
// cell's marker.
type markedStream struct {
	marker []byte
	pend   []byte
	done   bool
}

// take is the text of data ready to go out: up to the marker, less a tail
// that may be the marker's start or a character cut in two.
func (m *markedStream) take(data []byte) string {
	if m.done {
		return ""
	}
	m.pend = append(m.pend, data...)
	if i := bytes.Index(m.pend, m.marker); i >= 0 {
		m.done = true
		return string(m.pend[:i])
	}
	n := max(len(m.pend)-(len(m.marker)-1), 0)
	for n > 0 && !utf8.Valid(m.pend[:n]) && len(m.pend)-n < utf8.UTFMax+len(m.marker) {
		n--
	}
	s := string(m.pend[:n])
	m.pend = m.pend[n:]
	return s
}
