package api

import (
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sandbox-run/sandbox-run/pkg/executor"
)

// Sessions: a shared /work across executions, listing and reading its
// files, ownership, deletion, idle expiry, the disk cap and restarts.

func (ts *testServer) createSession(t testing.TB, key string, body any) SessionInfo {
	t.Helper()
	resp, data := ts.call(t, request{method: http.MethodPost, path: "/api/sandbox/sessions", body: mustJSON(t, body), key: key})
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("create session: %d %s", resp.StatusCode, data)
	}
	var s SessionInfo
	if err := json.Unmarshal(data, &s); err != nil {
		t.Fatal(err)
	}
	if loc := resp.Header.Get("Location"); loc != "/api/sandbox/sessions/"+s.SessionID {
		t.Errorf("Location %q", loc)
	}
	return s
}

func (ts *testServer) session(t testing.TB, key, id string) (*http.Response, SessionInfo) {
	t.Helper()
	resp, data := ts.get(t, "/api/sandbox/sessions/"+id, key)
	var s SessionInfo
	if resp.StatusCode == http.StatusOK {
		if err := json.Unmarshal(data, &s); err != nil {
			t.Fatal(err)
		}
	}
	return resp, s
}

// runIn executes body with key and wants a 200.
func (ts *testServer) runIn(t testing.TB, key string, body map[string]any) *executor.Result {
	t.Helper()
	resp, data := ts.call(t, keyed(executeRequest(t, body), key))
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("execute: %d %s", resp.StatusCode, data)
	}
	return decodeResult(t, data)
}

func sessionDirGone(t testing.TB, id string) bool {
	t.Helper()
	dir, err := testExec.SessionDir(id)
	if err != nil {
		t.Fatal(err)
	}
	_, err = os.Stat(dir)
	return os.IsNotExist(err)
}

func TestSessions(t *testing.T) {
	t.Parallel()
	cfg := storeConfig(t)
	ts := startServer(t, cfg)
	s := ts.createSession(t, aliceKey, map[string]any{"language": "py", "ttl_seconds": 600, "max_output_bytes": 4096})
	if !strings.HasPrefix(s.SessionID, "sess_") || s.Language != "python" || s.TTLSeconds != 600 || s.MaxOutputBytes != 4096 ||
		s.MaxBytes != cfg.SessionMaxBytes || s.ExpiresAt.Sub(s.LastUsedAt) != 600*time.Second {
		t.Errorf("created %+v", s)
	}
	sid := s.SessionID
	in := func(code string) map[string]any {
		return map[string]any{"language": "python", "code": code, "session_id": sid}
	}

	// Files persist between the session's executions, and only there.
	res := ts.runIn(t, aliceKey, in("import os\nopen('k.txt','w').write('kept value')\nos.makedirs('d/e')\nopen('d/e/f.bin','wb').write(bytes(range(256)))\nprint('written')"))
	if res.Stdout != "written\n" {
		t.Fatalf("first run: %+v", res)
	}
	res = ts.runIn(t, aliceKey, in("print(open('k.txt').read())"))
	if res.Stdout != "kept value\n" {
		t.Errorf("second run read %q (stderr %q)", res.Stdout, res.Stderr)
	}
	res = ts.runIn(t, aliceKey, py("import os\nprint(os.path.exists('k.txt'))"))
	if res.Stdout != "False\n" {
		t.Errorf("an execution without the session sees k.txt: %q", res.Stdout)
	}
	// The session's limits are its executions' defaults; theirs win.
	last := "print('x' * 10000, end='')"
	res = ts.runIn(t, aliceKey, in("print('x' * 10000)"))
	if res.LimitReason != "output" {
		t.Errorf("session max_output_bytes: status %s limit %q", res.Status, res.LimitReason)
	}
	res = ts.runIn(t, aliceKey, with(in(last), "max_output_bytes", 20000))
	if len(res.Stdout) != 10000 {
		t.Errorf("request max_output_bytes: %d bytes out, limit %q", len(res.Stdout), res.LimitReason)
	}

	// Its files (the last run's source is in /work too), one of them, and
	// the listing of sessions.
	resp, got := ts.session(t, aliceKey, sid)
	want := []executor.SessionFile{{Path: "d/e/f.bin", Size: 256}, {Path: "k.txt", Size: 10}, {Path: "main.py", Size: int64(len(last))}}
	if resp.StatusCode != http.StatusOK || got.BytesUsed == nil || *got.BytesUsed != 10+256+int64(len(last)) || !slices.Equal(got.Files, want) {
		t.Errorf("GET session: %d %+v, want files %+v", resp.StatusCode, got, want)
	}
	if !got.LastUsedAt.After(s.LastUsedAt) || !got.ExpiresAt.After(s.ExpiresAt) {
		t.Errorf("executions did not restart the idle timer: %v → %v", s.LastUsedAt, got.LastUsedAt)
	}
	resp, data := ts.get(t, "/api/sandbox/sessions/"+sid+"/file?path=d/e/f.bin", aliceKey)
	if resp.StatusCode != http.StatusOK || len(data) != 256 || data[255] != 255 {
		t.Errorf("GET file: %d %d bytes", resp.StatusCode, len(data))
	}
	for _, p := range []string{"missing.txt", "d", "d/e"} {
		resp, data = ts.get(t, "/api/sandbox/sessions/"+sid+"/file?path="+url.QueryEscape(p), aliceKey)
		wantError(t, resp, data, http.StatusNotFound, "no file")
	}
	for _, p := range []string{"", "../../etc/passwd", "/etc/passwd"} {
		resp, data = ts.get(t, "/api/sandbox/sessions/"+sid+"/file?path="+url.QueryEscape(p), aliceKey)
		wantError(t, resp, data, http.StatusBadRequest)
	}
	other := ts.createSession(t, aliceKey, map[string]any{"language": "python"})
	if other.TTLSeconds != cfg.SessionIdleSeconds {
		t.Errorf("default ttl %v", other.TTLSeconds)
	}
	var list struct{ Sessions []SessionInfo }
	_, data = ts.get(t, "/api/sandbox/sessions", aliceKey)
	json.Unmarshal(data, &list)
	if len(list.Sessions) != 2 || list.Sessions[0].SessionID != sid || list.Sessions[1].SessionID != other.SessionID || list.Sessions[0].Files != nil {
		t.Errorf("list: %s", data)
	}

	// Another key sees nothing of it and cannot use it.
	resp, _ = ts.session(t, bobKey, sid)
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("bob's GET: %d", resp.StatusCode)
	}
	resp, data = ts.get(t, "/api/sandbox/sessions/"+sid+"/file?path=k.txt", bobKey)
	wantError(t, resp, data, http.StatusNotFound, "no such session")
	for _, m := range []string{http.MethodDelete} {
		resp, data = ts.call(t, request{method: m, path: "/api/sandbox/sessions/" + sid, key: bobKey})
		wantError(t, resp, data, http.StatusNotFound, "no such session")
		resp, data = ts.call(t, request{method: m, path: "/api/sandbox/sessions/" + sid + "/file?path=k.txt", key: bobKey})
		wantError(t, resp, data, http.StatusNotFound, "no such session")
	}
	resp, data = ts.call(t, keyed(executeRequest(t, in("print(open('k.txt').read())")), bobKey))
	wantError(t, resp, data, http.StatusBadRequest, "unknown session")
	_, data = ts.get(t, "/api/sandbox/sessions", bobKey)
	if strings.TrimSpace(string(data)) != `{"sessions":[]}` {
		t.Errorf("bob's list: %s", data)
	}

	// Wrong language, unknown session.
	resp, data = ts.call(t, keyed(executeRequest(t, with(in("echo hi"), "language", "bash")), aliceKey))
	wantError(t, resp, data, http.StatusBadRequest, "is for python")
	resp, data = ts.call(t, keyed(executeRequest(t, with(in("print(1)"), "session_id", "sess_000000000000000000000000")), aliceKey))
	wantError(t, resp, data, http.StatusBadRequest, "unknown session")
	resp, _ = ts.session(t, aliceKey, "sess_000000000000000000000000")
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET unknown session: %d", resp.StatusCode)
	}

	// Removing one file.
	resp, data = ts.call(t, request{method: http.MethodDelete, path: "/api/sandbox/sessions/" + sid + "/file?path=d/e/f.bin", key: aliceKey})
	if resp.StatusCode != http.StatusNoContent {
		t.Errorf("DELETE file: %d %s", resp.StatusCode, data)
	}
	if _, got = ts.session(t, aliceKey, sid); len(got.Files) != 2 || got.Files[0].Path != "k.txt" {
		t.Errorf("after DELETE file: %+v", got.Files)
	}

	// Ending it removes everything.
	if sessionDirGone(t, sid) {
		t.Fatal("the session's directory is not where expected")
	}
	resp, data = ts.call(t, request{method: http.MethodDelete, path: "/api/sandbox/sessions/" + sid, key: aliceKey})
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("DELETE: %d %s", resp.StatusCode, data)
	}
	if !sessionDirGone(t, sid) {
		t.Errorf("the session's files survived DELETE")
	}
	if resp, _ = ts.session(t, aliceKey, sid); resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET after DELETE: %d", resp.StatusCode)
	}
	resp, data = ts.call(t, keyed(executeRequest(t, in("print(1)")), aliceKey))
	wantError(t, resp, data, http.StatusBadRequest, "unknown session")
	resp, data = ts.call(t, request{method: http.MethodDelete, path: "/api/sandbox/sessions/" + sid, key: aliceKey})
	wantError(t, resp, data, http.StatusNotFound)
	// A session that never ran ends too.
	resp, _ = ts.call(t, request{method: http.MethodDelete, path: "/api/sandbox/sessions/" + other.SessionID, key: aliceKey})
	if resp.StatusCode != http.StatusNoContent {
		t.Errorf("DELETE of an unused session: %d", resp.StatusCode)
	}
}

func TestSessionRequests(t *testing.T) {
	t.Parallel()
	cfg := storeConfig(t)
	cfg.MaxSessionsPerKey = 2
	ts := startServer(t, cfg)
	for _, body := range []string{
		`{"language":"cobol-85"}`,
		`{}`,
		`{"language":"python","ttl_seconds":-1}`,
		`{"language":"python","ttl_seconds":1e9}`,
		`{"language":"python","timeout_seconds":1e6}`,
		`{"language":"python","max_memory_mb":-5}`,
		`{"language":"python","colour":"red"}`,
		`{"language":"python"} {}`,
		`not json`,
	} {
		resp, data := ts.call(t, request{method: http.MethodPost, path: "/api/sandbox/sessions", body: []byte(body), key: aliceKey})
		wantError(t, resp, data, http.StatusBadRequest)
	}
	resp, data := ts.call(t, request{method: http.MethodPost, path: "/api/sandbox/sessions", body: []byte(`{"language":"python"}`), contentType: "text/plain", key: aliceKey})
	wantError(t, resp, data, http.StatusUnsupportedMediaType)
	resp, data = ts.call(t, request{method: http.MethodPost, path: "/api/sandbox/sessions", body: []byte(`{"language":"python"}`)})
	wantError(t, resp, data, http.StatusUnauthorized)
	resp, data = ts.call(t, request{method: http.MethodPatch, path: "/api/sandbox/sessions/sess_000000000000000000000000", key: aliceKey})
	wantError(t, resp, data, http.StatusMethodNotAllowed)

	// At most MaxSessionsPerKey per key; others' are not counted.
	ts.createSession(t, aliceKey, map[string]any{"language": "python"})
	ts.createSession(t, aliceKey, map[string]any{"language": "python"})
	resp, data = ts.call(t, request{method: http.MethodPost, path: "/api/sandbox/sessions", body: []byte(`{"language":"python"}`), key: aliceKey})
	wantError(t, resp, data, http.StatusInsufficientStorage, "at its limit of 2", "max_sessions_per_key")
	ts.createSession(t, bobKey, map[string]any{"language": "python"})
}

func TestSessionDiskCap(t *testing.T) {
	t.Parallel()
	cfg := storeConfig(t)
	cfg.SessionMaxBytes = 1000
	ts := startServer(t, cfg)
	sid := ts.createSession(t, aliceKey, map[string]any{"language": "python"}).SessionID
	in := func(code string) map[string]any {
		return map[string]any{"language": "python", "code": code, "session_id": sid}
	}
	ts.runIn(t, aliceKey, in("open('small.txt','w').write('x' * 900)"))
	ts.runIn(t, aliceKey, in("open('big.txt','w').write('x' * 2000)"))
	resp, data := ts.call(t, keyed(executeRequest(t, in("print(1)")), aliceKey))
	wantError(t, resp, data, http.StatusInsufficientStorage, "above its cap of 1000")
	resp, data = ts.call(t, request{method: http.MethodDelete, path: "/api/sandbox/sessions/" + sid + "/file?path=big.txt", key: aliceKey})
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("DELETE file: %d %s", resp.StatusCode, data)
	}
	if res := ts.runIn(t, aliceKey, in("import os\nprint(sorted(os.listdir('.')))")); !strings.Contains(res.Stdout, "'small.txt'") || strings.Contains(res.Stdout, "big.txt") {
		t.Errorf("after freeing space: %q", res.Stdout)
	}
}

func TestSessionExpiryAndRestart(t *testing.T) {
	t.Parallel()
	cfg := storeConfig(t)
	cfg.SessionIdleSeconds = 1.5
	ts := serveServer(t, cfg)
	kept := ts.createSession(t, aliceKey, map[string]any{"language": "python", "ttl_seconds": 60}).SessionID
	idle := ts.createSession(t, aliceKey, map[string]any{"language": "python"}).SessionID
	for _, id := range []string{kept, idle} {
		ts.runIn(t, aliceKey, map[string]any{"language": "python", "code": "open('k.txt','w').write('" + id + "')", "session_id": id})
	}

	// A restart keeps both, with their files.
	ts2 := startServer(t, cfg)
	for _, id := range []string{kept, idle} {
		resp, got := ts2.session(t, aliceKey, id)
		if resp.StatusCode != http.StatusOK || len(got.Files) != 2 || got.Files[0].Path != "k.txt" {
			t.Errorf("after a restart: %d %+v", resp.StatusCode, got)
		}
	}
	res := ts2.runIn(t, aliceKey, map[string]any{"language": "python", "code": "print(open('k.txt').read())", "session_id": kept})
	if res.Stdout != kept+"\n" {
		t.Errorf("after a restart the session reads %q", res.Stdout)
	}

	// Idle past its TTL: gone at once for requests, and its files soon.
	_, got := ts.session(t, aliceKey, idle)
	time.Sleep(time.Until(got.ExpiresAt))
	if resp, _ := ts.session(t, aliceKey, idle); resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET of an expired session: %d", resp.StatusCode)
	}
	resp, data := ts.call(t, keyed(executeRequest(t, map[string]any{"language": "python", "code": "print(1)", "session_id": idle}), aliceKey))
	wantError(t, resp, data, http.StatusBadRequest, "unknown session")
	if !waitFor(5*time.Second, func() bool { return sessionDirGone(t, idle) }) {
		t.Errorf("the janitor left the expired session's files")
	}
	if _, err := os.Stat(filepath.Join(ts.s.cfg.DataDir, "api-sessions", idle+".json")); !os.IsNotExist(err) {
		t.Errorf("the expired session's metadata survived: %v", err)
	}
	if sessionDirGone(t, kept) {
		t.Errorf("the janitor removed a live session")
	}
	if resp, _ := ts.session(t, aliceKey, kept); resp.StatusCode != http.StatusOK {
		t.Errorf("live session: %d", resp.StatusCode)
	}
}

func TestSessionBusy(t *testing.T) {
	t.Parallel()
	ts := startServer(t, storeConfig(t))
	sid := ts.createSession(t, aliceKey, map[string]any{"language": "python"}).SessionID
	in := func(code string) map[string]any {
		return map[string]any{"language": "python", "code": code, "session_id": sid}
	}
	ts.runIn(t, aliceKey, in("open('a.txt','w').write('a')"))
	done := ts.runAsync(t, keyed(executeRequest(t, in("import time\ntime.sleep(1)\nopen('late.txt','w').write('b')\nprint('done')")), aliceKey), "the long run")
	if !waitFor(20*time.Second, func() bool { return testExec.SessionBusy(sid) }) {
		t.Fatal("the run never started")
	}
	// A file cannot be removed while a run may rewrite the session...
	resp, data := ts.call(t, request{method: http.MethodDelete, path: "/api/sandbox/sessions/" + sid + "/file?path=a.txt", key: aliceKey})
	wantError(t, resp, data, http.StatusConflict, "running")
	// ...and ending the session waits for the run, then removes all it left.
	resp, data = ts.call(t, request{method: http.MethodDelete, path: "/api/sandbox/sessions/" + sid, key: aliceKey})
	if resp.StatusCode != http.StatusNoContent {
		t.Errorf("DELETE: %d %s", resp.StatusCode, data)
	}
	if res := <-done; res == nil || res.Stdout != "done\n" {
		t.Errorf("the run: %+v", res)
	}
	if !sessionDirGone(t, sid) {
		t.Errorf("the session's files survived DELETE")
	}
}
