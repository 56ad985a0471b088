package mcp

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sandbox-run/sandbox-run/pkg/executor"
	"github.com/sandbox-run/sandbox-run/pkg/local"
	"github.com/sandbox-run/sandbox-run/pkg/runner"
)

// A live sandbox's first program is this test binary as the agent
// (executor.StartLive mounts the running executable): it serves there and
// exits, and returns at once anywhere else. It is independent of
// sandbox.Init (each looks at its own os.Args[0]), so it may come first.

var liveToolNames = []string{"sandbox_create", "sandbox_exec", "sandbox_write_file", "sandbox_read_file",
	"sandbox_list_files", "sandbox_kill", "sandbox_list", "sandbox_pause", "sandbox_resume", "sandbox_fork",
	"sandbox_snapshot", "sandbox_list_snapshots", "sandbox_delete_snapshot", "sandbox_set_network"}

// liveServer is an SDK client connected in memory to a stdio-style server
// (New) over the test executor, whose live sandboxes end with the test.
func liveServer(t *testing.T, s *Server) *sdk.ClientSession {
	t.Helper()
	st, ct := sdk.NewInMemoryTransports()
	ctx, cancel := context.WithCancel(context.Background())
	go s.Run(ctx, st)
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "0"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cs.Close()
		cancel()
		if m := s.svc.Live(); m != nil {
			m.Close()
		}
		s.Close()
	})
	return cs
}

// TestLiveToolSchemas: the live tools are listed with descriptions, their
// input schemas are objects naming one type per property (as every tool's:
// TestInputSchemasSingleTypes) with their required fields, and they have
// output schemas.
func TestLiveToolSchemas(t *testing.T) {
	cs := liveServer(t, New(testConfig(t), local.New(testExec), quiet))
	tools, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]*sdk.Tool{}
	for _, tool := range tools.Tools {
		byName[tool.Name] = tool
	}
	required := map[string][]string{"sandbox_create": nil, "sandbox_exec": {"sandbox_id", "command"},
		"sandbox_write_file": {"sandbox_id", "path", "content"}, "sandbox_read_file": {"sandbox_id", "path"},
		"sandbox_list_files": {"sandbox_id"}, "sandbox_kill": {"sandbox_id"}, "sandbox_list": nil,
		"sandbox_pause": {"sandbox_id"}, "sandbox_resume": {"sandbox_id"}, "sandbox_fork": {"sandbox_id"},
		"sandbox_snapshot": {"sandbox_id"}, "sandbox_list_snapshots": nil, "sandbox_delete_snapshot": {"snapshot_id"},
		"sandbox_set_network": {"sandbox_id", "allow"}}
	for _, name := range liveToolNames {
		tool := byName[name]
		if tool == nil {
			t.Errorf("tool %s missing", name)
			continue
		}
		if len(tool.Description) < 40 || tool.OutputSchema == nil {
			t.Errorf("%s: description %q, output schema %v", name, tool.Description, tool.OutputSchema)
		}
		b, _ := json.Marshal(tool.InputSchema)
		var schema map[string]any
		json.Unmarshal(b, &schema)
		if schema["type"] != "object" {
			t.Errorf("%s: input schema %s", name, b)
		}
		var walk func(where string, node any)
		walk = func(where string, node any) {
			switch node := node.(type) {
			case map[string]any:
				if _, ok := node["type"].([]any); ok {
					t.Errorf("%s: a type array: %v", where, node["type"])
				}
				if where != name && node["type"] != nil && node["description"] == nil && !strings.HasSuffix(where, ".items") &&
					!strings.HasSuffix(where, ".additionalProperties") {
					t.Errorf("%s: undescribed", where)
				}
				for k, v := range node {
					if k == "properties" {
						for p, sub := range v.(map[string]any) {
							walk(where+"."+p, sub)
						}
					} else {
						walk(where+"."+k, v)
					}
				}
			case []any:
				for _, v := range node {
					walk(where, v)
				}
			}
		}
		walk(name, schema)
		var req []string
		for _, r := range anySlice(schema["required"]) {
			req = append(req, r.(string))
		}
		slices.Sort(req)
		want := slices.Sorted(slices.Values(required[name]))
		if !slices.Equal(req, want) {
			t.Errorf("%s: required %v, want %v", name, req, want)
		}
	}
}

func anySlice(v any) []any { s, _ := v.([]any); return s }

// TestLiveDefaultLanguages: a sandbox created with no languages says it has
// the executor's defaults, and templates give theirs.
func TestLiveDefaultLanguages(t *testing.T) {
	s := New(testConfig(t), local.New(testExec), quiet)
	defer s.Close()
	installed := func(names []string) []string {
		return slices.DeleteFunc(slices.Clone(names), func(n string) bool { l, _ := s.svc.Lookup(n); return !l.Available })
	}
	for _, tpl := range []string{"", "base"} {
		if got, err := s.liveLanguages(nil, tpl); err != nil || !slices.Equal(got, installed(executor.DefaultLiveLanguages)) {
			t.Errorf("template %q: %v %v, want the installed of %v", tpl, got, err, executor.DefaultLiveLanguages)
		}
	}
	if got, err := s.liveLanguages(nil, "code-interpreter-v1"); err != nil || !slices.Equal(got, installed([]string{"python", "javascript", "bash"})) {
		t.Errorf("template code-interpreter-v1: %v %v", got, err)
	}
	if got, err := s.liveLanguages(nil, "shell+bash"); err != nil || !slices.Equal(got, []string{"bash"}) {
		t.Errorf("template shell+bash: %v %v", got, err)
	}
	if got, err := s.liveLanguages(nil, "bash"); err != nil || !slices.Equal(got, []string{"bash"}) {
		t.Errorf("template bash: %v %v", got, err)
	}
	if got, err := s.liveLanguages([]string{"bash", "bash"}, "ignored"); err != nil || !slices.Equal(got, []string{"bash"}) {
		t.Errorf("languages bash and bash: %v %v", got, err)
	}
	if _, err := s.liveLanguages(nil, "no-such-template"); err == nil || !strings.Contains(err.Error(), "template") {
		t.Errorf("an unknown template: %v", err)
	}
	if _, err := s.liveLanguages([]string{"cobol-2099"}, ""); err == nil || !strings.Contains(err.Error(), "unknown language") {
		t.Errorf("an unknown language: %v", err)
	}
}

// TestLiveSandboxTools: a live sandbox through the tools, over the stdio
// server: create, a command's stdout, stderr and exit code, files written
// (text and binary) and read back, listed, seen by commands; output cut at
// 1 MiB; a command killed at its timeout; kill, after which the sandbox
// is no more.
func TestLiveSandboxTools(t *testing.T) {
	cs := liveServer(t, New(testConfig(t), local.New(testExec), quiet))

	var sb LiveSandbox
	ok(t, call(t, cs, "sandbox_create", map[string]any{"env": map[string]string{"GREETING": "hi there"},
		"metadata": map[string]string{"purpose": "test"}, "timeout_seconds": 600}), &sb)
	if !strings.HasPrefix(sb.ID, "sbx") || !slices.Contains(sb.Languages, "bash") {
		t.Fatalf("sandbox_create: %+v", sb)
	}
	if end, err := time.Parse(time.RFC3339, sb.EndAt); err != nil || time.Until(end) < 5*time.Minute {
		t.Errorf("end_at %q (%v): want about 10 minutes from now", sb.EndAt, err)
	}
	t.Logf("created %+v", sb)
	id := sb.ID
	var list LiveListOutput
	ok(t, call(t, cs, "sandbox_list", map[string]any{}), &list)
	if !slices.ContainsFunc(list.Sandboxes, func(x LiveSandbox) bool { return x.ID == id && x.Metadata["purpose"] == "test" }) {
		t.Errorf("sandbox_list: %+v", list)
	}

	exec := func(args map[string]any) LiveExecOutput {
		t.Helper()
		args["sandbox_id"] = id
		var out LiveExecOutput
		ok(t, call(t, cs, "sandbox_exec", args), &out)
		return out
	}
	if out := exec(map[string]any{"command": "echo hi; echo err >&2; exit 3"}); out.Stdout != "hi\n" || out.Stderr != "err\n" ||
		out.ExitCode != 3 || out.TimedOut || out.StdoutTruncated {
		t.Errorf("echo hi; echo err >&2; exit 3: %+v", out)
	}
	if out := exec(map[string]any{"command": "mkdir -p sub && cd sub && pwd; echo \"$GREETING/$EXTRA\"", "env": map[string]string{"EXTRA": "x"}}); out.Stdout != "/work/sub\nhi there/x\n" || out.ExitCode != 0 {
		t.Errorf("cwd, env: %+v", out)
	}
	if out := exec(map[string]any{"command": "pwd", "cwd": "sub"}); out.Stdout != "/work/sub\n" {
		t.Errorf("cwd sub: %+v", out)
	}

	// Files: text and binary, written, read, listed, seen by commands.
	binary := []byte{0, 1, 2, 0xff, 0xfe, 'x'}
	var w LiveWriteOutput
	ok(t, call(t, cs, "sandbox_write_file", map[string]any{"sandbox_id": id, "path": "notes/a.txt", "content": "héllo\n"}), &w)
	if w.Path != "/work/notes/a.txt" || w.Size != int64(len("héllo\n")) {
		t.Errorf("sandbox_write_file: %+v", w)
	}
	ok(t, call(t, cs, "sandbox_write_file", map[string]any{"sandbox_id": id, "path": "/work/bin.dat",
		"content": base64.StdEncoding.EncodeToString(binary), "base64": true}), &w)
	var r LiveReadOutput
	ok(t, call(t, cs, "sandbox_read_file", map[string]any{"sandbox_id": id, "path": "notes/a.txt"}), &r)
	if r.Content != "héllo\n" || r.Base64 || r.Truncated || r.Path != "/work/notes/a.txt" {
		t.Errorf("sandbox_read_file of text: %+v", r)
	}
	ok(t, call(t, cs, "sandbox_read_file", map[string]any{"sandbox_id": id, "path": "bin.dat"}), &r)
	if got, err := base64.StdEncoding.DecodeString(r.Content); !r.Base64 || err != nil || string(got) != string(binary) || r.Size != int64(len(binary)) {
		t.Errorf("sandbox_read_file of binary: %+v", r)
	}
	var files LiveListFilesOutput
	ok(t, call(t, cs, "sandbox_list_files", map[string]any{"sandbox_id": id}), &files)
	has := func(p, typ string, size int64) bool {
		return slices.ContainsFunc(files.Entries, func(e LiveEntry) bool {
			return e.Path == p && e.Type == typ && (size < 0 || e.Size == size)
		})
	}
	if files.Path != "/work" || !has("/work/notes", "dir", -1) || !has("/work/bin.dat", "file", int64(len(binary))) || has("/work/notes/a.txt", "file", -1) {
		t.Errorf("sandbox_list_files: %+v", files)
	}
	ok(t, call(t, cs, "sandbox_list_files", map[string]any{"sandbox_id": id, "depth": 2}), &files)
	if !has("/work/notes/a.txt", "file", int64(len("héllo\n"))) {
		t.Errorf("sandbox_list_files, depth 2: %+v", files)
	}
	if out := exec(map[string]any{"command": "cat notes/a.txt && wc -c < bin.dat"}); out.Stdout != "héllo\n6\n" || out.ExitCode != 0 {
		t.Errorf("the files as commands see them: %+v", out)
	}
	toolError(t, call(t, cs, "sandbox_read_file", map[string]any{"sandbox_id": id, "path": "nope.txt"}), "no file /work/nope.txt")
	toolError(t, call(t, cs, "sandbox_read_file", map[string]any{"sandbox_id": id, "path": "notes"}), "is a directory")
	toolError(t, call(t, cs, "sandbox_list_files", map[string]any{"sandbox_id": id, "path": "nowhere"}), "no directory /work/nowhere")
	toolError(t, call(t, cs, "sandbox_write_file", map[string]any{"sandbox_id": id, "path": "x", "content": "not base64!", "base64": true}), "not base64")

	// Output and files are cut at 1 MiB, and say so.
	out := exec(map[string]any{"command": "head -c 3000000 /dev/zero | tr '\\0' a; head -c 1500000 /dev/zero | tr '\\0' b > big.txt; ln -s big.txt link"})
	if len(out.Stdout) != liveMaxOutput || !out.StdoutTruncated || out.StderrTruncated || out.ExitCode != 0 {
		t.Errorf("3 MB of output: %d bytes, %+v", len(out.Stdout), out.ExitCode)
	}
	ok(t, call(t, cs, "sandbox_read_file", map[string]any{"sandbox_id": id, "path": "link"}), &r)
	if len(r.Content) != maxReadBytes || !r.Truncated || r.Base64 || r.Size != 1500000 || strings.Trim(r.Content, "b") != "" {
		t.Errorf("a 1.5 MB file through a symlink: %d bytes, truncated %v, base64 %v, size %d", len(r.Content), r.Truncated, r.Base64, r.Size)
	}

	// A command past its timeout is killed.
	start := time.Now()
	out = exec(map[string]any{"command": "echo started; sleep 100", "timeout_seconds": 2})
	if !out.TimedOut || out.ExitCode != -1 || out.Stdout != "started\n" {
		t.Errorf("sleep 100 with a timeout of 2 s: %+v", out)
	}
	if took := time.Since(start); took > 60*time.Second {
		t.Errorf("sleep 100 with a timeout of 2 s took %v", took)
	}
	if out := exec(map[string]any{"command": "grep -lx sleep /proc/[0-9]*/comm 2>/dev/null | wc -l"}); out.Stdout != "0\n" {
		t.Errorf("the timed-out sleep is still there: %+v", out)
	}

	// Paused (twice: left so), then any call resumes it, as
	// sandbox_resume does.
	var st LiveSandbox
	for range 2 {
		if ok(t, call(t, cs, "sandbox_pause", map[string]any{"sandbox_id": id}), &st); st.State != "paused" {
			t.Errorf("sandbox_pause: %+v", st)
		}
	}
	if out := exec(map[string]any{"command": "echo awake"}); out.Stdout != "awake\n" {
		t.Errorf("a command in a paused sandbox: %+v", out)
	}
	ok(t, call(t, cs, "sandbox_pause", map[string]any{"sandbox_id": id}), &st)
	if ok(t, call(t, cs, "sandbox_resume", map[string]any{"sandbox_id": id, "timeout_seconds": 120}), &st); st.State != "running" {
		t.Errorf("sandbox_resume: %+v", st)
	}
	toolError(t, call(t, cs, "sandbox_resume", map[string]any{"sandbox_id": id, "timeout_seconds": -1}), "timeout_seconds")
	// Evicted to disk: a command brings it back.
	if ok(t, call(t, cs, "sandbox_pause", map[string]any{"sandbox_id": id, "evict": true}), &st); !st.Evicted || st.State != "paused" {
		t.Errorf("sandbox_pause with evict: %+v", st)
	}
	if out := exec(map[string]any{"command": "echo back"}); out.Stdout != "back\n" {
		t.Errorf("a command in an evicted sandbox: %+v", out)
	}

	// Forked: the children have its files, each its own.
	exec(map[string]any{"command": "echo forked > fork.txt"})
	var fork LiveForkOutput
	ok(t, call(t, cs, "sandbox_fork", map[string]any{"sandbox_id": id, "count": 2}), &fork)
	if len(fork.Sandboxes) != 2 || len(fork.Errors) != 0 || fork.Memory {
		t.Fatalf("sandbox_fork: %+v", fork)
	}
	for _, k := range fork.Sandboxes {
		var out LiveExecOutput
		ok(t, call(t, cs, "sandbox_exec", map[string]any{"sandbox_id": k.ID, "command": "cat fork.txt"}), &out)
		if out.Stdout != "forked\n" {
			t.Errorf("child %s: %+v", k.ID, out)
		}
		var killed LiveKillOutput
		ok(t, call(t, cs, "sandbox_kill", map[string]any{"sandbox_id": k.ID}), &killed)
	}
	toolError(t, call(t, cs, "sandbox_fork", map[string]any{"sandbox_id": id, "count": 101}), "count")

	// A snapshot: listed, a sandbox made from it has its files, deleted.
	var snap LiveSnapshot
	ok(t, call(t, cs, "sandbox_snapshot", map[string]any{"sandbox_id": id, "name": "kept"}), &snap)
	if snap.ID == "" || snap.SandboxID != id || !slices.Contains(snap.Names, "kept") || snap.SizeBytes == 0 {
		t.Fatalf("sandbox_snapshot: %+v", snap)
	}
	var snaps LiveSnapshotsOutput
	if ok(t, call(t, cs, "sandbox_list_snapshots", map[string]any{"sandbox_id": id}), &snaps); len(snaps.Snapshots) != 1 || snaps.Snapshots[0].ID != snap.ID {
		t.Errorf("sandbox_list_snapshots: %+v", snaps)
	}
	var from LiveSandbox
	ok(t, call(t, cs, "sandbox_create", map[string]any{"snapshot": snap.ID}), &from)
	var fromOut LiveExecOutput
	if ok(t, call(t, cs, "sandbox_exec", map[string]any{"sandbox_id": from.ID, "command": "cat fork.txt"}), &fromOut); fromOut.Stdout != "forked\n" {
		t.Errorf("a sandbox from the snapshot: %+v", fromOut)
	}
	var gone LiveSnapshotDeleteOutput
	if ok(t, call(t, cs, "sandbox_delete_snapshot", map[string]any{"snapshot_id": snap.ID}), &gone); gone.Deleted != snap.ID {
		t.Errorf("sandbox_delete_snapshot: %+v", gone)
	}
	toolError(t, call(t, cs, "sandbox_delete_snapshot", map[string]any{"snapshot_id": snap.ID}), "snapshot")
	toolError(t, call(t, cs, "sandbox_create", map[string]any{"snapshot": snap.ID}), "snapshot")

	// Killed, it is no more.
	var killed LiveKillOutput
	ok(t, call(t, cs, "sandbox_kill", map[string]any{"sandbox_id": id}), &killed)
	if !killed.Killed {
		t.Errorf("sandbox_kill: %+v", killed)
	}
	toolError(t, call(t, cs, "sandbox_exec", map[string]any{"sandbox_id": id, "command": "echo still"}), "no such sandbox")
	toolError(t, call(t, cs, "sandbox_kill", map[string]any{"sandbox_id": id}), "no such sandbox")
	ok(t, call(t, cs, "sandbox_list", map[string]any{}), &list)
	if slices.ContainsFunc(list.Sandboxes, func(x LiveSandbox) bool { return x.ID == id }) {
		t.Errorf("sandbox_list after the kill: %+v", list)
	}

	// Bad input is a tool error that says what is wrong.
	toolError(t, call(t, cs, "sandbox_create", map[string]any{"languages": []string{"cobol-2099"}}), "unknown language")
	toolError(t, call(t, cs, "sandbox_create", map[string]any{"template": "no-such-template"}), "template")
	toolError(t, call(t, cs, "sandbox_create", map[string]any{"timeout_seconds": 1e7}), "timeout")
	toolError(t, call(t, cs, "sandbox_exec", map[string]any{"sandbox_id": "sbx_nope", "command": "ls"}), "no such sandbox")
	toolError(t, call(t, cs, "sandbox_exec", map[string]any{"sandbox_id": "", "command": "ls"}), "sandbox_id is empty")
	ok(t, call(t, cs, "sandbox_create", map[string]any{"template": "bash", "timeout_seconds": 120}), &sb)
	if !slices.Equal(sb.Languages, []string{"bash"}) || sb.Template != "bash" {
		t.Errorf("sandbox_create with template bash: %+v", sb)
	}
	toolError(t, call(t, cs, "sandbox_exec", map[string]any{"sandbox_id": sb.ID, "command": "ls", "cwd": "nowhere"}), "could not start (in /work/nowhere)")
	toolError(t, call(t, cs, "sandbox_exec", map[string]any{"sandbox_id": sb.ID, "command": " "}), "command is empty")
	toolError(t, call(t, cs, "sandbox_exec", map[string]any{"sandbox_id": sb.ID, "command": "ls", "env": map[string]string{"A=B": "x"}}), "env")
}

// TestLiveHTTPKeys: over /mcp each API key has its own sandboxes: key B
// can neither see, run in, read from nor kill key A's.
func TestLiveHTTPKeys(t *testing.T) {
	url := serveAPI(t, testConfig(t))
	a, b := connectHTTP(t, url, "key-one"), connectHTTP(t, url, "key-two")
	var sb LiveSandbox
	ok(t, call(t, a, "sandbox_create", map[string]any{"languages": []string{"bash"}}), &sb)
	if !slices.Equal(sb.Languages, []string{"bash"}) {
		t.Errorf("sandbox_create with languages [bash]: %+v", sb)
	}
	var out LiveExecOutput
	ok(t, call(t, a, "sandbox_exec", map[string]any{"sandbox_id": sb.ID, "command": "echo mine > f; cat f"}), &out)
	if out.Stdout != "mine\n" {
		t.Errorf("key A in its sandbox: %+v", out)
	}
	toolError(t, call(t, b, "sandbox_exec", map[string]any{"sandbox_id": sb.ID, "command": "echo intruder"}), "no such sandbox")
	toolError(t, call(t, b, "sandbox_read_file", map[string]any{"sandbox_id": sb.ID, "path": "f"}), "no such sandbox")
	toolError(t, call(t, b, "sandbox_write_file", map[string]any{"sandbox_id": sb.ID, "path": "f", "content": "x"}), "no such sandbox")
	toolError(t, call(t, b, "sandbox_kill", map[string]any{"sandbox_id": sb.ID}), "no such sandbox")
	var list LiveListOutput
	ok(t, call(t, b, "sandbox_list", map[string]any{}), &list)
	if len(list.Sandboxes) != 0 {
		t.Errorf("key B lists %+v", list)
	}
	ok(t, call(t, a, "sandbox_list", map[string]any{}), &list)
	if len(list.Sandboxes) != 1 || list.Sandboxes[0].ID != sb.ID {
		t.Errorf("key A lists %+v", list)
	}
	var r LiveReadOutput
	ok(t, call(t, a, "sandbox_read_file", map[string]any{"sandbox_id": sb.ID, "path": "f"}), &r)
	if r.Content != "mine\n" {
		t.Errorf("key A's file after key B's tries: %+v", r)
	}
	ok(t, call(t, a, "sandbox_kill", map[string]any{"sandbox_id": sb.ID}), &LiveKillOutput{})
}

// noLive is a backend that cannot start live sandboxes (its LiveStarter
// hidden).
type noLive struct{ runner.Backend }

// TestLiveWithoutLiveSandboxes: on a server that has none, every live
// tool is a tool error that says so.
func TestLiveWithoutLiveSandboxes(t *testing.T) {
	cfg := testConfig(t)
	rc := runner.ConfigFrom(cfg)
	rc.SessionDir = ""
	s := newServer(cfg, runner.New(rc, noLive{local.New(testExec)}, quiet, nil), quiet)
	s.stdio = true
	if s.svc.Live() != nil {
		t.Fatal("the service has live sandboxes")
	}
	cs := liveServer(t, s)
	args := map[string]map[string]any{"sandbox_create": {}, "sandbox_list": {},
		"sandbox_exec":       {"sandbox_id": "sbx_x", "command": "ls"},
		"sandbox_write_file": {"sandbox_id": "sbx_x", "path": "f", "content": "x"},
		"sandbox_read_file":  {"sandbox_id": "sbx_x", "path": "f"},
		"sandbox_list_files": {"sandbox_id": "sbx_x"}, "sandbox_kill": {"sandbox_id": "sbx_x"},
		"sandbox_pause": {"sandbox_id": "sbx_x"}, "sandbox_resume": {"sandbox_id": "sbx_x"}, "sandbox_fork": {"sandbox_id": "sbx_x"},
		"sandbox_snapshot": {"sandbox_id": "sbx_x"}, "sandbox_list_snapshots": {}, "sandbox_delete_snapshot": {"snapshot_id": "snap_x"},
		"sandbox_set_network": {"sandbox_id": "sbx_x", "allow": []string{}}}
	for _, tool := range liveToolNames {
		toolError(t, call(t, cs, tool, args[tool]), "runs no live sandboxes")
	}
}

// TestLiveNetworkAllow: sandbox_create's network_allow is checked against
// the server's network.allow, and the sandbox says what it may reach.
func TestLiveNetworkAllow(t *testing.T) {
	if _, err := os.Stat("/dev/net/tun"); err != nil {
		t.Skipf("no TUN devices: %v", err)
	}
	cfg := testConfig(t)
	cfg.Network.Allow = []string{"*.example.com"}
	cs := liveServer(t, New(cfg, local.New(testExec), quiet))
	toolError(t, call(t, cs, "sandbox_create", map[string]any{"network_allow": []string{"example.org"}}), "network.allow")
	var sb LiveSandbox
	ok(t, call(t, cs, "sandbox_create", map[string]any{"network_allow": []string{"api.example.com:443"}}), &sb)
	if !slices.Equal(sb.Network, []string{"api.example.com:443"}) {
		t.Errorf("network: %q", sb.Network)
	}
	var killed map[string]any
	ok(t, call(t, cs, "sandbox_kill", map[string]any{"sandbox_id": sb.ID}), &killed)
}
