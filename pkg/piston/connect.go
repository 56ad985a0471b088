package piston

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/sandbox-run/sandbox-run/pkg/runner"
	"github.com/sandbox-run/sandbox-run/pkg/wire"
)

// The interactive WebSocket, GET /api/v2/connect, as Piston has it:
//
//	client: {"type": "init", "language": ..., "version": ..., "files": [...], "args": [...]}
//	server: {"type": "runtime", "language": ..., "version": ...}
//	server: {"type": "stage", "stage": "compile" | "run"}
//	server: {"type": "data", "stream": "stdout" | "stderr", "data": ...}
//	client: {"type": "data", "stream": "stdin", "data": ...}
//	client: {"type": "signal", "signal": "SIGKILL"}   (any signal ends the run)
//	server: {"type": "exit", "stage": ..., "code": ..., "signal": ...}
//	server: {"type": "error", "message": ...}          (then closes: 4000-4999)
//
// Closing stdin: an empty data message on stdin is taken as its end.

// wsMessage is any message of the connect protocol.
type wsMessage struct {
	Type     string  `json:"type"`
	Language string  `json:"language,omitempty"`
	Version  string  `json:"version,omitempty"`
	Stage    string  `json:"stage,omitempty"`
	Stream   string  `json:"stream,omitempty"`
	Data     *string `json:"data,omitempty"`
	Code     *int    `json:"code,omitempty"`
	Signal   *string `json:"signal,omitempty"`
	Message  string  `json:"message,omitempty"`
}

// initTimeout bounds the wait for the init message.
const initTimeout = time.Second

func (s *server) connect(w http.ResponseWriter, r *http.Request) {
	leave, err := s.svc.Admit(runner.CallerOf(r.Context()), 1, true)
	if err != nil {
		s.refuse(w, err)
		return
	}
	defer leave()
	conn, err := websocket.Accept(w, r, &websocket.AcceptOptions{CompressionMode: websocket.CompressionDisabled})
	if err != nil {
		return // Accept answered
	}
	defer conn.CloseNow()
	conn.SetReadLimit(s.cfg.MaxBodyBytes)
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	var wmu sync.Mutex
	send := func(m any) {
		wmu.Lock()
		defer wmu.Unlock()
		data, _ := json.Marshal(m)
		wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
		defer wcancel()
		if conn.Write(wctx, websocket.MessageText, data) != nil {
			cancel()
		}
	}
	fail := func(code websocket.StatusCode, msg string) {
		send(wsMessage{Type: "error", Message: msg})
		conn.Close(code, truncate(msg, 120))
	}

	ictx, icancel := context.WithTimeout(ctx, initTimeout)
	_, data, err := conn.Read(ictx)
	icancel()
	if err != nil {
		fail(4001, "Initialization Timeout")
		return
	}
	var p Request
	var head struct {
		Type string `json:"type"`
	}
	if json.Unmarshal(data, &head) != nil || head.Type != "init" || json.Unmarshal(data, &p) != nil {
		fail(4002, "Notified of init twice or not first")
		return
	}
	req, version, err := s.toRequest(&p)
	if err == nil {
		err = s.check(r.Context(), req)
	}
	if err != nil {
		fail(4000, err.Error())
		return
	}
	send(wsMessage{Type: "runtime", Language: pistonName(req.Language), Version: version})

	stdinR, stdinW := io.Pipe()
	defer stdinW.Close()
	run := runner.Run{Request: req, CompileMemoryBytes: s.compileMemory(&p), Tenant: runner.CallerOf(r.Context()).Tenant(),
		Via: "piston-ws", Interactive: true, Stdin: stdinR}
	if in := runner.Input(req); in != nil {
		run.Stdin = io.MultiReader(in, stdinR)
	}
	stream := func(name string) io.Writer {
		return writerFunc(func(b []byte) (int, error) {
			d := text(string(b), "")
			send(wsMessage{Type: "data", Stream: name, Data: &d})
			return len(b), nil
		})
	}
	run.Stdout, run.Stderr = stream("stdout"), stream("stderr")
	compiled := false
	run.CompileOutput = writerFunc(func(b []byte) (int, error) {
		d := string(b)
		send(wsMessage{Type: "data", Stream: "stdout", Data: &d})
		return len(b), nil
	})
	if l, ok := s.svc.Lookup(req.Language); ok && l.Compiled {
		compiled = true
	}

	// The client's messages: stdin, signals.
	runCtx, stopRun := context.WithCancel(ctx)
	defer stopRun()
	go func() {
		defer stopRun()
		for {
			_, data, err := conn.Read(ctx)
			if err != nil {
				return
			}
			var m wsMessage
			if json.Unmarshal(data, &m) != nil {
				continue
			}
			switch m.Type {
			case "data":
				if m.Stream != "stdin" {
					continue
				}
				if m.Data == nil || *m.Data == "" {
					stdinW.Close()
					continue
				}
				if _, err := stdinW.Write([]byte(*m.Data)); err != nil {
					continue
				}
			case "signal":
				return // the run ends: any signal kills it
			}
		}
	}()

	if compiled {
		send(wsMessage{Type: "stage", Stage: "compile"})
	} else {
		send(wsMessage{Type: "stage", Stage: "run"})
	}
	res, err := s.svc.Run(runCtx, run)
	if err != nil {
		fail(4999, err.Error())
		return
	}
	if compiled {
		if c := res.Compile; c != nil {
			exit(send, "compile", c.Outcome)
		}
		if res.Status == wire.StatusCompileError {
			conn.Close(websocket.StatusNormalClosure, "")
			return
		}
		send(wsMessage{Type: "stage", Stage: "run"})
	}
	exit(send, "run", res.Outcome)
	conn.Close(websocket.StatusNormalClosure, "")
}

func exit(send func(any), stage string, o wire.Outcome) {
	m := wsMessage{Type: "exit", Stage: stage}
	if o.Signal != "" {
		sig := o.Signal
		m.Signal = &sig
	} else {
		code := o.ExitCode
		m.Code = &code
	}
	send(m)
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}
