package e2b_test

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandbox-run/sandbox-run/internal/testkit/apitest"
	"github.com/sandbox-run/sandbox-run/internal/testkit/imagetest"
	"github.com/sandbox-run/sandbox-run/pkg/api"
	"github.com/sandbox-run/sandbox-run/pkg/config"
	"github.com/sandbox-run/sandbox-run/pkg/e2b"
	"github.com/sandbox-run/sandbox-run/pkg/live/agent"
	"github.com/sandbox-run/sandbox-run/pkg/sandbox"
)

func TestMain(m *testing.M) {
	agent.Main()   // a live sandbox's first program is this binary
	sandbox.Init() // and a sandbox's PID 1 too
	os.Exit(m.Run())
}

// bounded is how long a step may take on a busy machine.
const bounded = 60 * time.Second

var client = &http.Client{Timeout: 2 * bounded}

// serve serves the API with the E2B door, with keys when given.
func serve(t *testing.T, keys ...string) string {
	t.Helper()
	return serveWith(t, nil, keys...)
}

// serveWith is serve with the configuration changed by edit first.
func serveWith(t *testing.T, edit func(*config.Config), keys ...string) string {
	t.Helper()
	cfg := apitest.Config(t)
	if edit != nil {
		edit(&cfg)
	}
	for i, k := range keys {
		cfg.Keys = append(cfg.Keys, config.APIKey{ID: fmt.Sprintf("k%d", i), Key: k, Scopes: []string{config.ScopeExecute}})
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	return apitest.Serve(t, cfg, api.MountRoutes(e2b.New, e2b.Keyed, e2b.Public))
}

// box is a sandbox as create answered it.
type box struct {
	SandboxID       string  `json:"sandboxID"`
	TemplateID      string  `json:"templateID"`
	EnvdVersion     string  `json:"envdVersion"`
	EnvdAccessToken string  `json:"envdAccessToken"`
	Traffic         *string `json:"trafficAccessToken"`
	Domain          string  `json:"domain"`
}

// do sends a control-plane call and decodes the answer into out (when not
// nil); it returns the status.
func do(t *testing.T, method, url, key string, body, out any) int {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, url, rd)
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("X-API-KEY", key)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if out != nil && len(data) > 0 {
		if err := json.Unmarshal(data, out); err != nil {
			t.Fatalf("%s %s: %d %q: %v", method, url, resp.StatusCode, data, err)
		}
	}
	return resp.StatusCode
}

func create(t *testing.T, base, key string, body map[string]any) box {
	t.Helper()
	var b box
	if st := do(t, "POST", base+"/v2/sandboxes", key, body, &b); st != http.StatusCreated {
		t.Fatalf("create: %d %+v", st, b)
	}
	t.Cleanup(func() { // the server may have gone (TestRestart): best effort
		req, _ := http.NewRequest("DELETE", base+"/sandboxes/"+b.SandboxID, nil)
		req.Header.Set("X-API-KEY", key)
		if resp, err := client.Do(req); err == nil {
			resp.Body.Close()
		}
	})
	return b
}

// envd is a sandbox's envd as the SDKs call it.
type envd struct {
	t     *testing.T
	base  string
	id    string
	token string
}

func (e envd) request(method, path, contentType string, body io.Reader) *http.Request {
	req, _ := http.NewRequest(method, e.base+path, body)
	req.Header.Set("E2b-Sandbox-Id", e.id)
	req.Header.Set("E2b-Sandbox-Port", "49983")
	if e.token != "" {
		req.Header.Set("X-Access-Token", e.token)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	return req
}

// unary calls a Connect method; it returns the status and the message.
func (e envd) unary(method string, msg any) (int, map[string]any) {
	e.t.Helper()
	b, _ := json.Marshal(msg)
	req := e.request("POST", "/"+method, "application/json", bytes.NewReader(b))
	req.Header.Set("Connect-Protocol-Version", "1")
	resp, err := client.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	data, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(data, &out); err != nil {
		e.t.Fatalf("%s: %d %q", method, resp.StatusCode, data)
	}
	return resp.StatusCode, out
}

// frames is a server stream's answer.
type frames struct {
	resp *http.Response
	r    *bufio.Reader
}

// stream opens a Connect server stream.
func (e envd) stream(method string, msg any, headers ...string) *frames {
	e.t.Helper()
	b, _ := json.Marshal(msg)
	env := make([]byte, 5+len(b))
	binary.BigEndian.PutUint32(env[1:], uint32(len(b)))
	copy(env[5:], b)
	req := e.request("POST", "/"+method, "application/connect+json", bytes.NewReader(env))
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := client.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { resp.Body.Close() })
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/connect+json" {
		e.t.Fatalf("%s: %d %s", method, resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	return &frames{resp: resp, r: bufio.NewReader(resp.Body)}
}

// next is the next frame: its flags and message.
func (f *frames) next(t *testing.T) (byte, map[string]any) {
	t.Helper()
	var hdr [5]byte
	if _, err := io.ReadFull(f.r, hdr[:]); err != nil {
		t.Fatalf("reading a frame: %v", err)
	}
	b := make([]byte, binary.BigEndian.Uint32(hdr[1:]))
	if _, err := io.ReadFull(f.r, b); err != nil {
		t.Fatalf("reading a frame: %v", err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("frame %q: %v", b, err)
	}
	return hdr[0], m
}

// process is what a process's stream told: its pid, output and end.
type process struct {
	pid            int
	stdout, stderr string
	pty            string
	end            map[string]any
	err            map[string]any // the end-of-stream frame's error
}

// read reads f to its end-of-stream frame.
func (f *frames) read(t *testing.T) process {
	t.Helper()
	var p process
	for {
		flags, m := f.next(t)
		if flags&2 != 0 {
			p.err, _ = m["error"].(map[string]any)
			return p
		}
		ev, _ := m["event"].(map[string]any)
		switch {
		case ev["start"] != nil:
			p.pid = int(ev["start"].(map[string]any)["pid"].(float64))
		case ev["data"] != nil:
			for k, v := range ev["data"].(map[string]any) {
				b, _ := base64.StdEncoding.DecodeString(v.(string))
				switch k {
				case "stdout":
					p.stdout += string(b)
				case "stderr":
					p.stderr += string(b)
				case "pty":
					p.pty += string(b)
				}
			}
		case ev["end"] != nil:
			p.end = ev["end"].(map[string]any)
		}
	}
}

// start reads a stream's first frame, its start event, and returns the pid.
func (f *frames) start(t *testing.T) int {
	t.Helper()
	_, m := f.next(t)
	st, _ := m["event"].(map[string]any)["start"].(map[string]any)
	if st == nil {
		t.Fatalf("first frame %v: want a start event", m)
	}
	return int(st["pid"].(float64))
}

func bash(cmd string) map[string]any {
	return map[string]any{"process": map[string]any{"cmd": "/bin/bash", "args": []string{"-l", "-c", cmd}}, "stdin": false}
}

func (e envd) run(cmd string) process {
	e.t.Helper()
	return e.stream("process.Process/Start", bash(cmd)).read(e.t)
}

// TestControlPlane: create, info, list by metadata, timeout, connect,
// metrics and kill, the errors the SDKs branch on, and keys.
func TestControlPlane(t *testing.T) {
	keyA, keyB := "key-a-"+hexs(8), "key-b-"+hexs(8)
	base := serve(t, keyA, keyB)
	b := create(t, base, keyA, map[string]any{"templateID": "base", "metadata": map[string]string{"role": "a"}, "timeout": 120})
	if b.EnvdVersion != e2b.EnvdVersion || b.EnvdAccessToken == "" || b.Traffic == nil || !strings.HasPrefix(b.SandboxID, "sbx") ||
		!strings.HasPrefix(b.Domain, "sandbox.localhost:") {
		t.Fatalf("create answered %+v", b)
	}
	var info map[string]any
	if st := do(t, "GET", base+"/sandboxes/"+b.SandboxID, keyA, nil, &info); st != 200 || info["state"] != "running" ||
		info["metadata"].(map[string]any)["role"] != "a" {
		t.Fatalf("getInfo: %d %v", st, info)
	}
	var list []map[string]any
	do(t, "GET", base+"/v2/sandboxes?metadata=role%3Da&state=running&limit=5", keyA, nil, &list)
	if len(list) != 1 || list[0]["sandboxID"] != b.SandboxID {
		t.Fatalf("list by metadata: %v", list)
	}
	do(t, "GET", base+"/v2/sandboxes?metadata=role%3Db", keyA, nil, &list)
	if len(list) != 0 {
		t.Fatalf("list by other metadata: %v", list)
	}
	do(t, "GET", base+"/v2/sandboxes?state=paused", keyA, nil, &list)
	if len(list) != 0 {
		t.Fatalf("list of paused: %v", list)
	}
	if st := do(t, "POST", base+"/sandboxes/"+b.SandboxID+"/timeout", keyA, map[string]int{"timeout": 600}, nil); st != 204 {
		t.Fatalf("timeout: %d", st)
	}
	do(t, "GET", base+"/sandboxes/"+b.SandboxID, keyA, nil, &info)
	if end, _ := time.Parse(time.RFC3339, info["endAt"].(string)); time.Until(end) < 500*time.Second {
		t.Fatalf("endAt %v after a timeout of 600 s", info["endAt"])
	}
	var conn box
	if st := do(t, "POST", base+"/v2/sandboxes/"+b.SandboxID+"/connect", keyA, map[string]int{"timeout": 300}, &conn); st != 200 || conn.EnvdAccessToken != b.EnvdAccessToken {
		t.Fatalf("connect: %d %+v", st, conn)
	}
	var metrics []map[string]any
	if st := do(t, "GET", base+"/sandboxes/"+b.SandboxID+"/metrics", keyA, nil, &metrics); st != 200 || len(metrics) != 1 || metrics[0]["memUsed"].(float64) <= 0 || metrics[0]["diskTotal"].(float64) <= 0 {
		t.Fatalf("metrics: %d %v", st, metrics)
	}

	// Key B sees nothing of key A's: 404 with the code in the body.
	var e map[string]any
	for _, c := range []struct{ method, path string }{{"GET", "/sandboxes/"}, {"DELETE", "/sandboxes/"}, {"POST", "/v2/sandboxes/"}} {
		path := c.path + b.SandboxID
		if c.method == "POST" {
			path += "/connect"
		}
		if st := do(t, c.method, base+path, keyB, map[string]any{}, &e); st != 404 || e["code"] != 404.0 {
			t.Fatalf("key B %s %s: %d %v", c.method, path, st, e)
		}
	}
	do(t, "GET", base+"/v2/sandboxes", keyB, nil, &list)
	if len(list) != 0 {
		t.Fatalf("key B lists %v", list)
	}
	// A wrong key is 401 in the control plane's shape; so is none.
	for _, k := range []string{"wrong", ""} {
		if st := do(t, "POST", base+"/v2/sandboxes", k, map[string]any{}, &e); st != 401 || e["code"] != 401.0 {
			t.Fatalf("key %q: %d %v", k, st, e)
		}
	}
	// Bad requests.
	if st := do(t, "POST", base+"/v2/sandboxes", keyA, map[string]any{"templateID": "no-such-template"}, &e); st != 404 {
		t.Fatalf("unknown template: %d %v", st, e)
	}
	if st := do(t, "POST", base+"/v2/sandboxes", keyA, map[string]any{"allow_internet_access": true}, &e); st != 400 {
		t.Fatalf("internet access: %d %v", st, e)
	}
	if st := do(t, "POST", base+"/v2/sandboxes", keyA, map[string]any{"timeout": -1}, &e); st != 400 {
		t.Fatalf("negative timeout: %d %v", st, e)
	}
	// Pause: 204, getInfo and the list say paused, a second pause is 409
	// (the SDK's false); connect resumes it (201), then it runs (200);
	// the older resume call is 409 for a sandbox that runs, 201 for one
	// paused. Another key's is 404.
	if st := do(t, "POST", base+"/sandboxes/"+b.SandboxID+"/pause", keyB, map[string]any{}, &e); st != 404 {
		t.Fatalf("pause of another key's: %d %v", st, e)
	}
	if st := do(t, "POST", base+"/sandboxes/"+b.SandboxID+"/pause", keyA, map[string]any{}, nil); st != 204 {
		t.Fatalf("pause: %d", st)
	}
	var pinfo map[string]any
	if do(t, "GET", base+"/sandboxes/"+b.SandboxID, keyA, nil, &pinfo); pinfo["state"] != "paused" {
		t.Fatalf("getInfo of a paused sandbox: %v", pinfo)
	}
	for q, want := range map[string]int{"?state=paused": 1, "?state=running": 0, "?state=running,paused": 1, "?state=running&state=paused": 1} {
		var l []map[string]any
		do(t, "GET", base+"/v2/sandboxes"+q+"&metadata=role%3Da", keyA, nil, &l)
		if len(l) != want {
			t.Errorf("list %s: %d sandboxes, want %d", q, len(l), want)
		}
	}
	if st := do(t, "POST", base+"/sandboxes/"+b.SandboxID+"/pause", keyA, map[string]any{}, &e); st != 409 || e["code"] != 409.0 {
		t.Fatalf("pause again: %d %v", st, e)
	}
	if st := do(t, "POST", base+"/v2/sandboxes/"+b.SandboxID+"/connect", keyA, map[string]any{"timeout": 60}, nil); st != 201 {
		t.Fatalf("connect to a paused sandbox: %d", st)
	}
	if st := do(t, "POST", base+"/v2/sandboxes/"+b.SandboxID+"/connect", keyA, map[string]any{}, nil); st != 200 {
		t.Fatalf("connect to a running sandbox: %d", st)
	}
	if st := do(t, "POST", base+"/sandboxes/"+b.SandboxID+"/resume", keyA, map[string]any{}, &e); st != 409 {
		t.Fatalf("resume of a running sandbox: %d %v", st, e)
	}
	do(t, "POST", base+"/sandboxes/"+b.SandboxID+"/pause", keyA, map[string]any{}, nil)
	if st := do(t, "POST", base+"/sandboxes/"+b.SandboxID+"/resume", keyA, map[string]any{"timeout": 60}, nil); st != 201 {
		t.Fatalf("resume of a paused sandbox: %d", st)
	}
	// Kill: 204, then 404 (the SDK's false).
	if st := do(t, "DELETE", base+"/sandboxes/"+b.SandboxID, keyA, nil, nil); st != 204 {
		t.Fatalf("kill: %d", st)
	}
	if st := do(t, "DELETE", base+"/sandboxes/"+b.SandboxID, keyA, nil, &e); st != 404 || e["code"] != 404.0 {
		t.Fatalf("kill again: %d %v", st, e)
	}
	// Its envd says it is gone (502).
	h := envd{t: t, base: base, id: b.SandboxID, token: b.EnvdAccessToken}
	resp, err := client.Do(h.request("GET", "/health", "", nil))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 502 {
		t.Fatalf("health of a killed sandbox: %d", resp.StatusCode)
	}
}

// TestTimeoutEnds: a sandbox whose timeout passes is gone.
func TestTimeoutEnds(t *testing.T) {
	base := serve(t)
	b := create(t, base, "", map[string]any{"timeout": 1})
	deadline := time.Now().Add(bounded)
	for {
		var e map[string]any
		if do(t, "GET", base+"/sandboxes/"+b.SandboxID, "", nil, &e) == 404 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("a sandbox with a timeout of 1 s still runs")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func hexs(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return fmt.Sprintf("%x", b)
}

// TestProcesses: envd's process service on a real sandbox.
func TestProcesses(t *testing.T) {
	base := serve(t)
	b := create(t, base, "", map[string]any{"envVars": map[string]string{"FROM_CREATE": "c"}})
	e := envd{t: t, base: base, id: b.SandboxID, token: b.EnvdAccessToken}

	resp, err := client.Do(e.request("GET", "/health", "", nil))
	if err != nil || resp.StatusCode != 204 {
		t.Fatalf("health: %v %v", resp, err)
	}
	resp.Body.Close()

	p := e.run("echo hi; echo err >&2; echo $FROM_CREATE; exit 3")
	if p.pid == 0 || p.stdout != "hi\nc\n" || p.stderr != "err\n" || p.end["exitCode"] != 3.0 || p.end["error"] != "exit status 3" || p.err != nil {
		t.Fatalf("run: %+v", p)
	}
	msg := bash(`echo "$FOO"; pwd`)
	msg["process"].(map[string]any)["envs"] = map[string]string{"FOO": "bar baz"}
	msg["process"].(map[string]any)["cwd"] = "/tmp"
	if p := e.stream("process.Process/Start", msg).read(t); p.stdout != "bar baz\n/tmp\n" {
		t.Fatalf("envs and cwd: %+v", p)
	}

	// A background cat with stdin: listed, fed, closed.
	msg = bash("cat")
	msg["stdin"] = true
	msg["tag"] = "the-cat"
	cat := e.stream("process.Process/Start", msg)
	pid := cat.start(t)
	st, list := e.unary("process.Process/List", map[string]any{})
	if st != 200 || !strings.Contains(fmt.Sprint(list), fmt.Sprintf("pid:%d", pid)) || !strings.Contains(fmt.Sprint(list), "the-cat") {
		t.Fatalf("list: %d %v", st, list)
	}
	// Another subscriber attaches by tag.
	att := e.stream("process.Process/Connect", map[string]any{"process": map[string]any{"tag": "the-cat"}})
	if got := att.start(t); got != pid {
		t.Fatalf("connect gave pid %d, want %d", got, pid)
	}
	if st, m := e.unary("process.Process/SendInput", map[string]any{"process": map[string]any{"pid": pid}, "input": map[string]any{"stdin": base64.StdEncoding.EncodeToString([]byte("ping\n"))}}); st != 200 {
		t.Fatalf("send input: %d %v", st, m)
	}
	if st, m := e.unary("process.Process/CloseStdin", map[string]any{"process": map[string]any{"pid": pid}}); st != 200 {
		t.Fatalf("close stdin: %d %v", st, m)
	}
	for _, f := range []*frames{cat, att} {
		if p := f.read(t); p.stdout != "ping\n" || p.end["exitCode"] != nil && p.end["exitCode"] != 0.0 {
			t.Fatalf("cat: %+v", p)
		}
	}

	// A signal ends a sleep; its stream still ends with its end.
	sl := e.stream("process.Process/Start", bash("sleep 100"))
	pid = sl.start(t)
	if st, m := e.unary("process.Process/SendSignal", map[string]any{"process": map[string]any{"pid": pid}, "signal": "SIGNAL_SIGKILL"}); st != 200 {
		t.Fatalf("signal: %d %v", st, m)
	}
	if p := sl.read(t); p.end["exitCode"] != -1.0 || p.end["status"] != "signal: killed" {
		t.Fatalf("killed sleep: %+v", p)
	}
	// Unknown processes are not_found, for unary calls and streams.
	if st, m := e.unary("process.Process/SendSignal", map[string]any{"process": map[string]any{"pid": 999999}, "signal": "SIGNAL_SIGKILL"}); st != 404 || m["code"] != "not_found" {
		t.Fatalf("signal to no process: %d %v", st, m)
	}
	if st, m := e.unary("process.Process/SendSignal", map[string]any{"process": map[string]any{"pid": 1}, "signal": "SIGNAL_SIGHUP"}); st != 400 || m["code"] != "invalid_argument" {
		t.Fatalf("an unknown signal: %d %v", st, m)
	}
	if p := e.stream("process.Process/Connect", map[string]any{"process": map[string]any{"pid": 999999}}).read(t); p.err["code"] != "not_found" {
		t.Fatalf("connect to no process: %+v", p)
	}
	// The call's deadline kills the command.
	to := e.stream("process.Process/Start", bash("sleep 100"), "Connect-Timeout-Ms", "500")
	if p := to.read(t); p.err["code"] != "deadline_exceeded" {
		t.Fatalf("past its deadline: %+v", p)
	}
	if p := e.stream("process.Process/Start", map[string]any{"process": map[string]any{"cmd": ""}}).read(t); p.err["code"] != "invalid_argument" {
		t.Fatalf("no command: %+v", p)
	}

	// A PTY: input, resize, output.
	pty := e.stream("process.Process/Start", map[string]any{"process": map[string]any{"cmd": "/bin/bash", "args": []string{"-i", "-l"},
		"envs": map[string]string{"TERM": "xterm"}}, "pty": map[string]any{"size": map[string]int{"cols": 80, "rows": 24}}})
	pid = pty.start(t)
	if st, m := e.unary("process.Process/Update", map[string]any{"process": map[string]any{"pid": pid}, "pty": map[string]any{"size": map[string]int{"cols": 101, "rows": 33}}}); st != 200 {
		t.Fatalf("resize: %d %v", st, m)
	}
	in := base64.StdEncoding.EncodeToString([]byte("stty size; echo marker-$((6*7)); exit\n"))
	if st, m := e.unary("process.Process/SendInput", map[string]any{"process": map[string]any{"pid": pid}, "input": map[string]any{"pty": in}}); st != 200 {
		t.Fatalf("pty input: %d %v", st, m)
	}
	if p := pty.read(t); !strings.Contains(p.pty, "33 101") || !strings.Contains(p.pty, "marker-42") {
		t.Fatalf("pty: %+v", p)
	}

	// Without the access token nothing runs.
	bad := envd{t: t, base: base, id: b.SandboxID}
	if p := bad.stream("process.Process/Start", bash("echo pwned > /tmp/pwned")).read(t); p.pid != 0 || p.err["code"] != "unauthenticated" {
		t.Fatalf("without the token: %+v", p)
	}
	if st, _ := bad.unary("filesystem.Filesystem/Stat", map[string]any{"path": "/tmp"}); st != 401 {
		t.Fatalf("stat without the token: %d", st)
	}
	if p := e.run("test -e /tmp/pwned && echo ran || echo clean"); p.stdout != "clean\n" {
		t.Fatalf("the command without the token: %+v", p)
	}
	// A sandbox that does not exist is unavailable (502: the SDKs' "gone").
	gone := envd{t: t, base: base, id: "sbx" + hexs(12), token: "x"}
	if st, m := gone.unary("process.Process/List", map[string]any{}); st != 502 || m["code"] != "unavailable" {
		t.Fatalf("no such sandbox: %d %v", st, m)
	}
}

// TestFiles: /files and the filesystem service.
func TestFiles(t *testing.T) {
	base := serve(t)
	b := create(t, base, "", nil)
	e := envd{t: t, base: base, id: b.SandboxID, token: b.EnvdAccessToken}

	// A multipart upload, named by the part's filename, then read back.
	blob := make([]byte, 20<<20) // chunks of agent.MaxChunk
	rand.Read(blob)
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	fw, _ := mw.CreateFormFile("file", "/tmp/d/blob.bin")
	fw.Write(blob)
	fw, _ = mw.CreateFormFile("file", "rel.txt")
	fw.Write([]byte("relative"))
	mw.Close()
	resp, err := client.Do(e.request("POST", "/files", mw.FormDataContentType(), &body))
	if err != nil {
		t.Fatal(err)
	}
	var wrote []map[string]any
	json.NewDecoder(resp.Body).Decode(&wrote)
	resp.Body.Close()
	if resp.StatusCode != 200 || len(wrote) != 2 || wrote[0]["path"] != "/tmp/d/blob.bin" || wrote[1]["path"] != "/home/user/rel.txt" {
		t.Fatalf("upload: %d %v", resp.StatusCode, wrote)
	}
	if got := e.get("/tmp/d/blob.bin"); sha256.Sum256(got) != sha256.Sum256(blob) {
		t.Fatalf("read back %d bytes, not what was written", len(got))
	}
	// An octet-stream upload to ?path=, read by cat.
	resp, err = client.Do(e.request("POST", "/files?path=/tmp/d/o.txt", "application/octet-stream", strings.NewReader("octets")))
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("octet-stream upload: %v %v", resp, err)
	}
	resp.Body.Close()
	if p := e.run("cat /tmp/d/o.txt /work/rel.txt"); p.stdout != "octetsrelative" {
		t.Fatalf("cat: %+v", p)
	}
	// A missing file is 404 with the code in the body.
	resp, _ = client.Do(e.request("GET", "/files?path=/tmp/nope", "", nil))
	var em map[string]any
	json.NewDecoder(resp.Body).Decode(&em)
	resp.Body.Close()
	if resp.StatusCode != 404 || em["code"] != 404.0 {
		t.Fatalf("missing file: %d %v", resp.StatusCode, em)
	}

	st, m := e.unary("filesystem.Filesystem/Stat", map[string]any{"path": "/tmp/d/o.txt"})
	ent, _ := m["entry"].(map[string]any)
	if st != 200 || ent["type"] != "FILE_TYPE_FILE" || ent["size"] != "6" || ent["path"] != "/tmp/d/o.txt" || ent["permissions"] != "-rw-r--r--" {
		t.Fatalf("stat: %d %v", st, m)
	}
	if st, m := e.unary("filesystem.Filesystem/Stat", map[string]any{"path": "/tmp/nope"}); st != 404 || m["code"] != "not_found" {
		t.Fatalf("stat of nothing: %d %v", st, m)
	}
	if st, m := e.unary("filesystem.Filesystem/MakeDir", map[string]any{"path": "/tmp/d/sub/deeper"}); st != 200 || m["entry"].(map[string]any)["type"] != "FILE_TYPE_DIRECTORY" {
		t.Fatalf("makeDir: %d %v", st, m)
	}
	if st, m := e.unary("filesystem.Filesystem/MakeDir", map[string]any{"path": "/tmp/d/sub/deeper"}); st != 409 || m["code"] != "already_exists" {
		t.Fatalf("makeDir again: %d %v", st, m)
	}
	if st, m := e.unary("filesystem.Filesystem/Move", map[string]any{"source": "/tmp/d/o.txt", "destination": "/tmp/d/sub/p.txt"}); st != 200 || m["entry"].(map[string]any)["path"] != "/tmp/d/sub/p.txt" {
		t.Fatalf("move: %d %v", st, m)
	}
	st, m = e.unary("filesystem.Filesystem/ListDir", map[string]any{"path": "/tmp/d", "depth": 2})
	names := fmt.Sprint(m["entries"])
	if st != 200 || !strings.Contains(names, "/tmp/d/sub/p.txt") || !strings.Contains(names, "/tmp/d/blob.bin") {
		t.Fatalf("listDir depth 2: %d %v", st, m)
	}
	if st, m := e.unary("filesystem.Filesystem/Remove", map[string]any{"path": "/tmp/d/sub"}); st != 200 {
		t.Fatalf("remove: %d %v", st, m)
	}
	if st, _ := e.unary("filesystem.Filesystem/Stat", map[string]any{"path": "/tmp/d/sub"}); st != 404 {
		t.Fatalf("removed dir: %d", st)
	}

	// A watch: start first, then the command's file.
	if st, _ := e.unary("filesystem.Filesystem/MakeDir", map[string]any{"path": "/tmp/w"}); st != 200 {
		t.Fatal("makeDir /tmp/w")
	}
	wd := e.stream("filesystem.Filesystem/WatchDir", map[string]any{"path": "/tmp/w", "includeEntry": true})
	if _, m := wd.next(t); m["start"] == nil {
		t.Fatalf("first watch frame %v", m)
	}
	e.run("echo x > /tmp/w/made.txt")
	for {
		_, m := wd.next(t)
		if fe, _ := m["filesystem"].(map[string]any); fe != nil && fe["name"] == "made.txt" {
			if fe["type"] != "EVENT_TYPE_CREATE" {
				t.Fatalf("watch event %v", fe)
			}
			break
		}
	}
	if p := e.stream("filesystem.Filesystem/WatchDir", map[string]any{"path": "/tmp/none"}).read(t); p.err["code"] != "not_found" {
		t.Fatalf("watch of nothing: %+v", p)
	}

	// A signed download URL works without the token; a wrong one does not.
	sum := sha256.Sum256([]byte("/tmp/d/blob.bin:read:undefined:" + b.EnvdAccessToken))
	sig := "v1_" + strings.TrimRight(base64.StdEncoding.EncodeToString(sum[:]), "=")
	for s, want := range map[string]int{sig: 200, "v1_wrong": 401} {
		req, _ := http.NewRequest("GET", base+"/files?path=/tmp/d/blob.bin&sandbox_id="+b.SandboxID+"&signature="+url.QueryEscape(s), nil)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Fatalf("signature %s: %d, want %d", s, resp.StatusCode, want)
		}
	}
}

func (e envd) get(path string) []byte {
	e.t.Helper()
	resp, err := client.Do(e.request("GET", "/files?path="+path, "", nil))
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		e.t.Fatalf("GET /files?path=%s: %d %q", path, resp.StatusCode, b)
	}
	return b
}

// execute runs code through the code interpreter and returns its lines.
func (e envd) execute(body map[string]any) []map[string]any {
	e.t.Helper()
	b, _ := json.Marshal(body)
	req := e.request("POST", "/execute", "application/json", bytes.NewReader(b))
	req.Header.Set("E2b-Sandbox-Port", "49999")
	resp, err := client.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		data, _ := io.ReadAll(resp.Body)
		e.t.Fatalf("execute: %d %q", resp.StatusCode, data)
	}
	var lines []map[string]any
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			e.t.Fatalf("line %q", sc.Bytes())
		}
		lines = append(lines, m)
	}
	if len(lines) == 0 || lines[len(lines)-1]["type"] != "end_of_execution" {
		e.t.Fatalf("execute's lines %v: want end_of_execution last", lines)
	}
	return lines
}

// mainText is the main result's text of an execution's lines.
func mainText(lines []map[string]any) any {
	for _, l := range lines {
		if l["type"] == "result" && l["is_main_result"] == true {
			return l["text"]
		}
	}
	return nil
}

// TestInterpreter: code contexts on kernels in the sandbox.
func TestInterpreter(t *testing.T) {
	base := serve(t)
	b := create(t, base, "", map[string]any{"templateID": "code-interpreter-v1"})
	e := envd{t: t, base: base, id: b.SandboxID, token: b.EnvdAccessToken}
	e.execute(map[string]any{"code": "x = 41"})
	lines := e.execute(map[string]any{"code": "print('out'); import sys; print('err', file=sys.stderr); x + 1"})
	if mainText(lines) != "42" || !strings.Contains(fmt.Sprint(lines), "text:out") {
		t.Fatalf("state and output: %v", lines)
	}
	lines = e.execute(map[string]any{"code": "1/0"})
	var errLine map[string]any
	for _, l := range lines {
		if l["type"] == "error" {
			errLine = l
		}
	}
	if errLine["name"] != "ZeroDivisionError" || !strings.Contains(fmt.Sprint(errLine["traceback"]), "ZeroDivisionError") {
		t.Fatalf("error: %v", lines)
	}
	lines = e.execute(map[string]any{"code": "console.log('js-' + (6 * 7)); 6 * 7", "language": "js"})
	if mainText(lines) != "42" || !strings.Contains(fmt.Sprint(lines), "js-42") {
		t.Fatalf("javascript: %v", lines)
	}

	// A matplotlib figure: its picture and its data.
	lines = e.execute(map[string]any{"code": "import matplotlib.pyplot as plt\nplt.plot([1, 3, 2], label='a')\nplt.title('acc')\nplt.show()"})
	if strings.Contains(fmt.Sprint(lines), "ModuleNotFoundError") {
		t.Log("no matplotlib here: no chart checked")
	} else {
		var chart map[string]any
		for _, l := range lines {
			if c, ok := l["chart"].(map[string]any); ok && l["png"] != nil {
				chart = c
			}
		}
		if chart["type"] != "line" || chart["title"] != "acc" || fmt.Sprint(chart["elements"]) != "[map[label:a points:[[0 1] [1 3] [2 2]]]]" {
			t.Fatalf("a figure's result: %v", lines)
		}
		// A pie and a box plot: E2B's pie and box_and_whisker charts.
		for _, c := range []struct{ code, typ, elements string }{
			{"plt.pie([90, 10], labels=['No', 'No, in blue'], startangle=90)", "pie",
				"[map[angle:324 label:No radius:1] map[angle:36 label:No, in blue radius:1]]"},
			{"plt.boxplot([1, 2, 3, 4, 5, 6, 7, 8, 9, 30], labels=['a'])", "box_and_whisker",
				"[map[first_quartile:3.25 label:a max:9 median:5.5 min:1 outliers:[30] third_quartile:7.75]]"},
		} {
			lines = e.execute(map[string]any{"code": "import matplotlib.pyplot as plt\n" + c.code + "\nplt.show()"})
			chart = nil
			for _, l := range lines {
				if ch, ok := l["chart"].(map[string]any); ok && l["png"] != nil {
					chart = ch
				}
			}
			if chart["type"] != c.typ || fmt.Sprint(chart["elements"]) != c.elements {
				t.Fatalf("%s: %v", c.typ, lines)
			}
		}
	}

	// A context of its own.
	do2 := func(method, path string, body any, out any) int {
		t.Helper()
		var rd io.Reader
		if body != nil {
			bb, _ := json.Marshal(body)
			rd = bytes.NewReader(bb)
		}
		req := e.request(method, path, "application/json", rd)
		req.Header.Del("X-Access-Token") // the SDK sends its traffic token on /contexts
		req.Header.Set("E2B-Traffic-Access-Token", *b.Traffic)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if out != nil {
			json.NewDecoder(resp.Body).Decode(out)
		}
		return resp.StatusCode
	}
	var ctx map[string]any
	if st := do2("POST", "/contexts", map[string]any{"language": "python", "cwd": "/tmp"}, &ctx); st != 200 || ctx["cwd"] != "/tmp" {
		t.Fatalf("create context: %d %v", st, ctx)
	}
	id := ctx["id"].(string)
	e.execute(map[string]any{"code": "cp = 2", "context_id": id})
	e.execute(map[string]any{"code": "cp = 1"})
	if got := mainText(e.execute(map[string]any{"code": "cp", "context_id": id})); got != "2" {
		t.Fatalf("context state: %v", got)
	}
	if got := mainText(e.execute(map[string]any{"code": "import os; os.getcwd()", "context_id": id})); got != "'/tmp'" {
		t.Fatalf("context cwd: %v", got)
	}
	var all []map[string]any
	if st := do2("GET", "/contexts", nil, &all); st != 200 || len(all) != 3 { // python's default, javascript's default, this one
		t.Fatalf("list contexts: %d %v", st, all)
	}
	if st := do2("POST", "/contexts/"+id+"/restart", nil, nil); st != 204 {
		t.Fatalf("restart: %d", st)
	}
	lines = e.execute(map[string]any{"code": "cp", "context_id": id})
	if !strings.Contains(fmt.Sprint(lines), "NameError") {
		t.Fatalf("after restart: %v", lines)
	}
	if st := do2("DELETE", "/contexts/"+id, nil, nil); st != 204 {
		t.Fatalf("remove: %d", st)
	}
	if st := do2("DELETE", "/contexts/"+id, nil, nil); st != 404 {
		t.Fatalf("remove again: %d", st)
	}
	if st := do2("POST", "/contexts", map[string]any{"language": "cobol"}, nil); st != 400 {
		t.Fatalf("a language without contexts: %d", st)
	}
	// Kernels are not the user's processes.
	if _, m := e.unary("process.Process/List", map[string]any{}); strings.Contains(fmt.Sprint(m), "kernel") {
		t.Fatalf("list shows kernels: %v", m)
	}
}

// TestPorts: Host PORT-ID.<domain> reaches the port in the sandbox, and
// only there.
func TestPorts(t *testing.T) {
	base := serve(t)
	b := create(t, base, "", nil)
	e := envd{t: t, base: base, id: b.SandboxID, token: b.EnvdAccessToken}
	e.run("mkdir -p /tmp/www && echo hello-port > /tmp/www/index.html")
	srv := e.stream("process.Process/Start", bash("cd /tmp/www && exec python3 -m http.server 8000 --bind 127.0.0.1"))
	srv.start(t)

	// A listener on the host's loopback is not the sandbox's.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "HOST") }))
	hostPort := ln.Addr().(*net.TCPAddr).Port

	get := func(port int) (int, string) {
		req, _ := http.NewRequest("GET", base+"/", nil)
		req.Host = fmt.Sprintf("%d-%s.%s", port, b.SandboxID, b.Domain)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		data, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(data)
	}
	deadline := time.Now().Add(bounded)
	for {
		st, body := get(8000)
		if st == 200 && body == "hello-port\n" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("port 8000: %d %q", st, body)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// A WebSocket (any upgrade) goes through too: a server in the sandbox
	// that accepts it and echoes the bytes that follow.
	e.run("cat > /tmp/ws.py <<'EOF'\n" + wsEcho + "EOF")
	e.stream("process.Process/Start", bash("exec python3 /tmp/ws.py")).start(t)
	upgradeEcho(t, base, fmt.Sprintf("8001-%s.%s", b.SandboxID, b.Domain))

	if st, body := get(hostPort); st != 502 || strings.Contains(body, "HOST") {
		t.Fatalf("the host's port %d through the proxy: %d %q", hostPort, st, body)
	}
	// An unknown sandbox's port is 502.
	req, _ := http.NewRequest("GET", base+"/", nil)
	req.Host = "8000-sbx" + hexs(12) + "." + b.Domain
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 502 {
		t.Fatalf("no such sandbox's port: %d", resp.StatusCode)
	}

	// Private ports want the traffic token.
	pb := create(t, base, "", map[string]any{"network": map[string]any{"allowPublicTraffic": false}})
	pe := envd{t: t, base: base, id: pb.SandboxID, token: pb.EnvdAccessToken}
	pe.stream("process.Process/Start", bash("cd /tmp && exec python3 -m http.server 8000 --bind 127.0.0.1")).start(t)
	for _, tok := range []string{"", "wrong", *pb.Traffic} {
		req, _ := http.NewRequest("GET", base+"/", nil)
		req.Host = fmt.Sprintf("8000-%s.%s", pb.SandboxID, pb.Domain)
		if tok != "" {
			req.Header.Set("E2B-Traffic-Access-Token", tok)
		}
		want := http.StatusForbidden
		if tok == *pb.Traffic {
			want = http.StatusOK
		}
		deadline := time.Now().Add(bounded)
		for {
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode == want {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("private port with token %q: %d, want %d", tok, resp.StatusCode, want)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}

// TestDiskFull: a file larger than the sandbox's disk is refused with 507
// (the SDKs' NotEnoughSpaceError), and the sandbox goes on.
func TestDiskFull(t *testing.T) {
	base := serveWith(t, func(c *config.Config) { c.Live.DiskMB = 4 })
	b := create(t, base, "", nil)
	e := envd{t: t, base: base, id: b.SandboxID, token: b.EnvdAccessToken}
	resp, err := client.Do(e.request("POST", "/files?path=/tmp/big", "application/octet-stream", bytes.NewReader(make([]byte, 6<<20))))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	json.NewDecoder(resp.Body).Decode(&m)
	resp.Body.Close()
	if resp.StatusCode != http.StatusInsufficientStorage || m["code"] != 507.0 {
		t.Fatalf("a file over the disk: %d %v", resp.StatusCode, m)
	}
	if p := e.run("rm -f /tmp/big; echo ok"); p.stdout != "ok\n" {
		t.Fatalf("afterwards: %+v", p)
	}
}

// TestRestart: a server that stops (as at SIGTERM) leaves its live
// sandboxes running; the next server on the same data dir takes them over
// with their processes, files, tokens and timeouts.
func TestRestart(t *testing.T) {
	cfg := apitest.Config(t)
	cfg.Live.EndOnShutdown = false
	mount := api.MountRoutes(e2b.New, e2b.Keyed, e2b.Public)
	base, stop := apitest.Start(t, cfg, mount)
	b := create(t, base, "", map[string]any{"timeout": 600, "metadata": map[string]string{"run": "before"}})
	e := envd{t: t, base: base, id: b.SandboxID, token: b.EnvdAccessToken}
	e.run("echo kept > /home/user/kept.txt")
	counter := e.stream("process.Process/Start", bash("i=0; while true; do echo $i > /tmp/c.new; mv /tmp/c.new /tmp/c; i=$((i+1)); sleep 0.05; done"))
	counterPID := counter.start(t)
	e.run("while [ ! -f /tmp/c ]; do sleep 0.02; done") // it has counted (on a busy machine it may take a while)
	msg := bash("cat")
	msg["stdin"] = true
	cat := e.stream("process.Process/Start", msg)
	catPID := cat.start(t)
	e.execute(map[string]any{"code": "z = 5"})
	var before map[string]any
	do(t, "GET", base+"/sandboxes/"+b.SandboxID, "", nil, &before)
	stop()

	base = apitest.Serve(t, cfg, mount)
	e.base = base
	var after map[string]any
	if st := do(t, "GET", base+"/sandboxes/"+b.SandboxID, "", nil, &after); st != 200 || after["endAt"] != before["endAt"] ||
		after["metadata"].(map[string]any)["run"] != "before" {
		t.Fatalf("after the restart: %d %v (before: %v)", st, after, before)
	}
	if got := string(e.get("/home/user/kept.txt")); got != "kept\n" {
		t.Fatalf("a file after the restart: %q", got)
	}
	_, list := e.unary("process.Process/List", map[string]any{})
	for _, pid := range []int{counterPID, catPID} {
		if !strings.Contains(fmt.Sprint(list), fmt.Sprintf("pid:%d", pid)) {
			t.Fatalf("process %d is not running after the restart: %v", pid, list)
		}
	}
	// The code interpreter's default context is found again, its
	// variables kept (its kernel is a process that went on).
	if lines := e.execute(map[string]any{"code": "z"}); mainText(lines) != "5" {
		t.Fatalf("the default context after the restart: %v", lines)
	}
	// The counter goes on.
	first := string(e.get("/tmp/c"))
	deadline := time.Now().Add(bounded)
	for string(e.get("/tmp/c")) == first {
		if time.Now().After(deadline) {
			t.Fatalf("the counter stopped at %q", first)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// The cat takes input from the new server and answers on a new stream.
	att := e.stream("process.Process/Connect", map[string]any{"process": map[string]any{"pid": catPID}})
	if got := att.start(t); got != catPID {
		t.Fatalf("connect: pid %d", got)
	}
	e.unary("process.Process/SendInput", map[string]any{"process": map[string]any{"pid": catPID}, "input": map[string]any{"stdin": base64.StdEncoding.EncodeToString([]byte("after-restart\n"))}})
	e.unary("process.Process/CloseStdin", map[string]any{"process": map[string]any{"pid": catPID}})
	if p := att.read(t); !strings.Contains(p.stdout, "after-restart") || p.end == nil {
		t.Fatalf("cat after the restart: %+v", p)
	}
	// Kill ends it for good.
	if st := do(t, "DELETE", base+"/sandboxes/"+b.SandboxID, "", nil, nil); st != 204 {
		t.Fatalf("kill after the restart: %d", st)
	}
}

// wsEcho is a WebSocket server on 127.0.0.1:8001 (the handshake, then an
// echo of whatever comes).
const wsEcho = `import socket, base64, hashlib
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(('127.0.0.1', 8001))
s.listen()
while True:
    c, _ = s.accept()
    data = b''
    while b'\r\n\r\n' not in data:
        data += c.recv(4096)
    key = [l.split(b':', 1)[1].strip() for l in data.split(b'\r\n') if l.lower().startswith(b'sec-websocket-key')][0]
    accept = base64.b64encode(hashlib.sha1(key + b'258EAFA5-E914-47DA-95CA-C5AB0DC85B11').digest())
    c.sendall(b'HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ' + accept + b'\r\n\r\n')
    while True:
        b = c.recv(4096)
        if not b:
            break
        c.sendall(b)
    c.close()
`

// upgradeEcho upgrades a connection to the server at base with Host host
// (retrying while the sandbox's server does not listen yet), then checks
// that bytes sent come back.
func upgradeEcho(t *testing.T, base, host string) {
	t.Helper()
	deadline := time.Now().Add(bounded)
	for {
		conn, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		conn.SetDeadline(time.Now().Add(bounded))
		fmt.Fprintf(conn, "GET /echo HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"+
			"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n", host)
		rd := bufio.NewReader(conn)
		resp, err := http.ReadResponse(rd, nil)
		if err == nil && resp.StatusCode == http.StatusSwitchingProtocols {
			msg := []byte("\x81\x85mask\x05\x04\x1f\x1fo") // a masked text frame: the echo sends it back as it is
			if _, err := conn.Write(msg); err != nil {
				t.Fatal(err)
			}
			got := make([]byte, len(msg))
			if _, err := io.ReadFull(rd, got); err != nil || !bytes.Equal(got, msg) {
				t.Fatalf("through the upgraded connection: %q, %v", got, err)
			}
			conn.Close()
			return
		}
		conn.Close()
		if time.Now().After(deadline) {
			t.Fatalf("no upgrade through the port proxy: %v %v", resp, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestLanguageSetTemplate: a template that names languages gets their
// toolchains (and bash); one that names an unknown language is 404.
func TestLanguageSetTemplate(t *testing.T) {
	base := serve(t)
	b := create(t, base, "", map[string]any{"templateID": "python+bash"})
	e := envd{t: t, base: base, id: b.SandboxID, token: b.EnvdAccessToken}
	if p := e.run("python3 -c 'print(6*7)'"); p.stdout != "42\n" {
		t.Fatalf("python in a python+bash sandbox: %+v", p)
	}
	var m map[string]any
	if st := do(t, "POST", base+"/v2/sandboxes", "", map[string]any{"templateID": "python+nosuchlanguage"}, &m); st != 404 {
		t.Fatalf("an unknown language in a template: %d %v", st, m)
	}
}

// TestNetwork: a sandbox reaches what network.allowOut lists (and nothing
// else), or with allow_internet_access what the server's network.allow
// does; getInfo says so; a server that gives no network refuses internet
// access with 400, and so does a denyOut it cannot honour.
func TestNetwork(t *testing.T) {
	if _, err := os.Stat("/dev/net/tun"); err != nil {
		t.Skipf("no TUN devices: %v", err)
	}
	hits := map[string]int{}
	var mu sync.Mutex
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		hits[r.URL.Path]++
		mu.Unlock()
		fmt.Fprint(w, "reached")
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	allowed := fmt.Sprintf("host.sandbox.internal:%d", port)
	base := serveWith(t, func(c *config.Config) { c.Network.Allow = []string{allowed} })
	fetch := func(e envd, path string) string {
		t.Helper()
		p := e.run(fmt.Sprintf("curl -s -m 10 http://host.sandbox.internal:%d%s || echo failed", port, path))
		return strings.TrimSpace(p.stdout)
	}

	open := create(t, base, "", map[string]any{"templateID": "base", "network": map[string]any{"allowOut": []string{allowed}}})
	if got := fetch(envd{t: t, base: base, id: open.SandboxID, token: open.EnvdAccessToken}, "/a"); got != "reached" {
		t.Errorf("allowOut: %q", got)
	}
	var info map[string]any
	do(t, "GET", base+"/sandboxes/"+open.SandboxID, "", nil, &info)
	if info["allowInternetAccess"] != true || fmt.Sprint(info["network"]) != fmt.Sprintf("map[allowOut:[%s] denyOut:[]]", allowed) {
		t.Errorf("info: %v %v", info["allowInternetAccess"], info["network"])
	}
	whole := create(t, base, "", map[string]any{"templateID": "base", "allow_internet_access": true})
	if got := fetch(envd{t: t, base: base, id: whole.SandboxID, token: whole.EnvdAccessToken}, "/b"); got != "reached" {
		t.Errorf("allow_internet_access: %q", got)
	}
	closed := create(t, base, "", map[string]any{"templateID": "base"})
	if got := fetch(envd{t: t, base: base, id: closed.SandboxID, token: closed.EnvdAccessToken}, "/c"); got != "failed" {
		t.Errorf("no network: %q", got)
	}
	do(t, "GET", base+"/sandboxes/"+closed.SandboxID, "", nil, &info)
	if info["allowInternetAccess"] != false {
		t.Errorf("info of a sandbox without network: %v", info["allowInternetAccess"])
	}
	mu.Lock()
	if hits["/a"] != 1 || hits["/b"] != 1 || hits["/c"] != 0 {
		t.Errorf("the server saw %v", hits)
	}
	mu.Unlock()

	// updateNetwork: closed to everything, then open again; a sandbox
	// made without a network cannot be given one.
	var m map[string]any
	oe := envd{t: t, base: base, id: open.SandboxID, token: open.EnvdAccessToken}
	if st := do(t, "PUT", base+"/sandboxes/"+open.SandboxID+"/network", "", map[string]any{"allow_internet_access": false}, &m); st != 204 {
		t.Fatalf("updateNetwork to nothing: %d %v", st, m)
	}
	if got := fetch(oe, "/d"); got != "failed" {
		t.Errorf("after updateNetwork to nothing: %q", got)
	}
	if st := do(t, "PUT", base+"/sandboxes/"+open.SandboxID+"/network", "", map[string]any{"allowOut": []string{allowed}}, &m); st != 204 {
		t.Fatalf("updateNetwork back: %d %v", st, m)
	}
	if got := fetch(oe, "/e"); got != "reached" {
		t.Errorf("after updateNetwork back: %q", got)
	}
	// Byte budgets (set through the native API) outlive an update that
	// keeps their entries: E2B names none.
	native := base + "/api/sandbox/sandboxes/" + open.SandboxID
	if st := do(t, "PUT", native+"/network", "", map[string]any{"allow": []string{allowed}, "budgets": map[string]int64{allowed: 1 << 30}}, &m); st != 200 {
		t.Fatalf("native network update with a budget: %d %v", st, m)
	}
	if st := do(t, "PUT", base+"/sandboxes/"+open.SandboxID+"/network", "", map[string]any{"allowOut": []string{allowed}}, &m); st != 204 {
		t.Fatalf("updateNetwork keeping the entry: %d %v", st, m)
	}
	m = nil
	if do(t, "GET", native, "", nil, &m); fmt.Sprint(m["network_budgets"]) != fmt.Sprintf("map[%s:%v]", allowed, float64(1<<30)) {
		t.Errorf("the budget after an E2B update that keeps its entry: %v", m["network_budgets"])
	}
	if st := do(t, "PUT", base+"/sandboxes/"+closed.SandboxID+"/network", "", map[string]any{"allowOut": []string{allowed}}, &m); st != 400 {
		t.Errorf("updateNetwork of a sandbox made without a network: %d %v", st, m)
	}
	if st := do(t, "PUT", base+"/sandboxes/"+open.SandboxID+"/network", "", map[string]any{"allowOut": []string{"example.com"}}, &m); st != 400 {
		t.Errorf("updateNetwork beyond the server's network.allow: %d %v", st, m)
	}
	mu.Lock()
	if hits["/d"] != 0 || hits["/e"] != 1 {
		t.Errorf("after updateNetwork the server saw %v", hits)
	}
	mu.Unlock()

	if st := do(t, "POST", base+"/v2/sandboxes", "", map[string]any{"templateID": "base", "allow_internet_access": true,
		"network": map[string]any{"denyOut": []string{"10.0.0.0/8"}}}, &m); st != 400 {
		t.Errorf("a denyOut without allowOut: %d %v", st, m)
	}
	if st := do(t, "POST", base+"/v2/sandboxes", "", map[string]any{"templateID": "base",
		"network": map[string]any{"allowOut": []string{"example.com"}}}, &m); st != 400 {
		t.Errorf("allowOut beyond the server's network.allow: %d %v", st, m)
	}
	none := serve(t)
	if st := do(t, "POST", none+"/v2/sandboxes", "", map[string]any{"templateID": "base", "allow_internet_access": true}, &m); st != 400 {
		t.Errorf("internet access on a server that gives none: %d %v", st, m)
	}
}

// TestImageTemplate: a template that names an allowed OCI image makes a
// sandbox of its root (the SDK's /bin/bash runs as sh where the image has
// no bash); one outside images.allow is refused.
func TestImageTemplate(t *testing.T) {
	img := imagetest.BusyboxImage(t, []string{"PATH=/bin"}, imagetest.File{Name: "etc/marker", Data: []byte("in-the-image\n")})
	dir := t.TempDir()
	ref := imagetest.WriteLayout(t, filepath.Join(dir, "layout"), img, "1")
	base := serveWith(t, func(c *config.Config) { c.Images.Allow = []string{"oci:" + dir + "/**"} })
	b := create(t, base, "", map[string]any{"templateID": ref})
	if b.TemplateID != ref {
		t.Errorf("templateID %q, want %q", b.TemplateID, ref)
	}
	e := envd{t: t, base: base, id: b.SandboxID, token: b.EnvdAccessToken}
	if p := e.run("cat /etc/marker"); p.stdout != "in-the-image\n" {
		t.Errorf("in the image: %+v", p)
	}
	var m map[string]any
	if st := do(t, "POST", base+"/v2/sandboxes", "", map[string]any{"templateID": "oci:/elsewhere/layout:1"}, &m); st != 400 {
		t.Errorf("an image outside images.allow: %d %v", st, m)
	}
}

// TestSnapshotsAndFork: createSnapshot (201, its id and name), a sandbox
// created from it (by id or name) has the files of that moment, the list
// by sandbox and name, another key sees none of it; fork makes children
// with the files, each its own; deleteSnapshot is 204, then 404.
func TestSnapshotsAndFork(t *testing.T) {
	keyA, keyB := "key-a-"+hexs(8), "key-b-"+hexs(8)
	base := serve(t, keyA, keyB)
	b := create(t, base, keyA, map[string]any{"templateID": "base", "timeout": 120})
	e := envd{t: t, base: base, id: b.SandboxID, token: b.EnvdAccessToken}
	e.run("echo before > /home/user/f; echo tmp > /tmp/t")
	var sn struct {
		SnapshotID string   `json:"snapshotID"`
		Names      []string `json:"names"`
	}
	if st := do(t, "POST", base+"/sandboxes/"+b.SandboxID+"/snapshots", keyA, map[string]any{"name": "snap1"}, &sn); st != 201 ||
		sn.SnapshotID == "" || !slices.Contains(sn.Names, "snap1") {
		t.Fatalf("createSnapshot: %d %+v", st, sn)
	}
	e.run("echo after > /home/user/f")
	for _, ref := range []string{sn.SnapshotID, "snap1"} {
		c := create(t, base, keyA, map[string]any{"templateID": ref})
		ce := envd{t: t, base: base, id: c.SandboxID, token: c.EnvdAccessToken}
		if p := ce.run("cat /home/user/f /tmp/t"); p.stdout != "before\ntmp\n" {
			t.Errorf("a sandbox from %s: %q %q", ref, p.stdout, p.stderr)
		}
	}
	var list []map[string]any
	if do(t, "GET", base+"/snapshots?sandboxID="+b.SandboxID+"&name=snap1", keyA, nil, &list); len(list) != 1 {
		t.Errorf("listSnapshots: %v", list)
	}
	if do(t, "GET", base+"/snapshots", keyB, nil, &list); len(list) != 0 {
		t.Errorf("another key's listSnapshots: %v", list)
	}
	var e404 map[string]any
	if st := do(t, "POST", base+"/v2/sandboxes", keyB, map[string]any{"templateID": sn.SnapshotID}, &e404); st != 404 {
		t.Errorf("another key's create from the snapshot: %d %v", st, e404)
	}

	var kids []struct {
		Sandbox *struct {
			SandboxID       string `json:"sandboxID"`
			EnvdAccessToken string `json:"envdAccessToken"`
		} `json:"sandbox"`
		Error map[string]any `json:"error"`
	}
	if st := do(t, "POST", base+"/sandboxes/"+b.SandboxID+"/fork", keyA, map[string]any{"count": 2, "timeout": 60}, &kids); st != 201 || len(kids) != 2 {
		t.Fatalf("fork: %d %+v", st, kids)
	}
	for i, k := range kids {
		if k.Sandbox == nil {
			t.Fatalf("child %d: %v", i, k.Error)
		}
		t.Cleanup(func() { do(t, "DELETE", base+"/sandboxes/"+k.Sandbox.SandboxID, keyA, nil, nil) })
		ke := envd{t: t, base: base, id: k.Sandbox.SandboxID, token: k.Sandbox.EnvdAccessToken}
		if p := ke.run("cat /home/user/f; echo child > /home/user/f"); p.stdout != "after\n" {
			t.Errorf("child %d: %q", i, p.stdout)
		}
	}
	if p := e.run("cat /home/user/f"); p.stdout != "after\n" {
		t.Errorf("the parent after its children wrote: %q", p.stdout)
	}
	if st := do(t, "POST", base+"/sandboxes/"+b.SandboxID+"/fork", keyB, map[string]any{}, &e404); st != 404 {
		t.Errorf("another key's fork: %d", st)
	}
	if st := do(t, "POST", base+"/sandboxes/"+b.SandboxID+"/fork", keyA, map[string]any{"count": 101}, &e404); st != 400 {
		t.Errorf("a fork of 101: %d %v", st, e404)
	}
	if st := do(t, "DELETE", base+"/templates/"+sn.SnapshotID, keyB, nil, &e404); st != 404 {
		t.Errorf("another key's deleteSnapshot: %d", st)
	}
	if st := do(t, "DELETE", base+"/templates/"+sn.SnapshotID, keyA, nil, nil); st != 204 {
		t.Errorf("deleteSnapshot: %d", st)
	}
	if st := do(t, "DELETE", base+"/templates/"+sn.SnapshotID, keyA, nil, &e404); st != 404 || e404["code"] != 404.0 {
		t.Errorf("deleteSnapshot again: %d %v", st, e404)
	}
}
