package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"go.yaml.in/yaml/v3"

	"github.com/sandbox-run/sandbox-run/internal/testkit/imagetest"
	"github.com/sandbox-run/sandbox-run/internal/testkit/natstest"
	"github.com/sandbox-run/sandbox-run/pkg/images"
)

// The examples of README.md and docs/*.md, run as they are written. Each
// test finds its example by a heading or sentence of the file and takes
// the first fenced block of the given kind after it.

// docBlock is the first ```kind block of file (relative to the repository
// root) after the text after.
func docBlock(t *testing.T, file, after, kind string) string {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join("..", "..", file))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(doc), after)
	_, block, ok2 := strings.Cut(rest, "```"+kind+"\n")
	block, _, ok3 := strings.Cut(block, "```")
	if !ok || !ok2 || !ok3 {
		t.Fatalf("%s: no ```%s block after %q", file, kind, after)
	}
	return block
}

// consoleExample is one command of a ```console block and the output the
// block shows for it.
type consoleExample struct {
	cmd, want string
}

// consoleExamples splits a ```console block into its commands ("$ " lines,
// continued while a quote is open or the line ends with a backslash) and
// the output below each, up to the next command.
func consoleExamples(block string) []consoleExample {
	var out []consoleExample
	lines := strings.Split(strings.TrimRight(block, "\n"), "\n")
	for i := 0; i < len(lines); {
		if !strings.HasPrefix(lines[i], "$ ") {
			i++
			continue
		}
		cmd := strings.TrimPrefix(lines[i], "$ ")
		i++
		for i < len(lines) && (strings.Count(cmd, "'")%2 == 1 || strings.HasSuffix(cmd, `\`)) {
			cmd += "\n" + lines[i]
			i++
		}
		var want []string
		for i < len(lines) && !strings.HasPrefix(lines[i], "$ ") {
			want = append(want, lines[i])
			i++
		}
		out = append(out, consoleExample{cmd, strings.TrimSpace(strings.Join(want, "\n"))})
	}
	return out
}

// runConsole runs the commands of a ```console block with bash in dir, in
// order, sandbox-run being this test binary and 127.0.0.1:8080 (or
// localhost:8080) the server at serverURL, and checks that each prints
// what the block shows (docOutputMatches). A `cat FILE` whose file is not
// in dir writes the output the block shows for it there first: the block
// shows the file it then uses.
func runConsole(t *testing.T, dir, serverURL, block string) {
	t.Helper()
	examples := consoleExamples(block)
	if len(examples) == 0 {
		t.Fatalf("no commands in\n%s", block)
	}
	host := strings.TrimPrefix(serverURL, "http://")
	if host == "" {
		host = "127.0.0.1:8080" // no server: the examples name none
	}
	for _, ex := range examples {
		if name, ok := strings.CutPrefix(ex.cmd, "cat "); ok && !strings.ContainsAny(name, " |;&") {
			path := filepath.Join(dir, name)
			if _, err := os.Stat(path); os.IsNotExist(err) {
				if err := os.WriteFile(path, []byte(ex.want+"\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
		}
		script := strings.NewReplacer("127.0.0.1:8080", host, "localhost:8080", host).Replace(ex.cmd)
		cmd := exec.Command("bash", "-c", `sandbox-run() { "$SANDBOX_RUN_TEST_BIN" "$@"; }`+"\n"+script)
		cmd.Dir = dir
		cmd.Env = append(cliCommand(t, nil).Env, "SANDBOX_RUN_TEST_BIN="+os.Args[0])
		out, _ := cmd.CombinedOutput() // the exit code is the example's own (echo "exit $?")
		if !docOutputMatches(string(out), ex.want) {
			t.Errorf("$ %s\nprints\n%s\nthe docs show\n%s", ex.cmd, out, ex.want)
		}
	}
}

// volatileKeys are the fields of a result that differ from run to run or
// host to host: only their presence and type are compared.
var volatileKeys = map[string]bool{"execution_id": true, "duration_ms": true, "cpu_time_ms": true, "memory_used_mb": true, "version": true}

var executionID = regexp.MustCompile(`exec_[0-9a-f]{24}`)

// docOutputMatches reports whether got is the output the docs show as
// want: "..." or "…" in want stands for any text left out (and execution
// ids need not be the same); a JSON object
// (a result) must have the same fields and values but for volatileKeys;
// anything else must be equal. Trailing white space is ignored.
func docOutputMatches(got, want string) bool {
	got = strings.TrimRight(got, " \n")
	if strings.HasPrefix(want, "event: ") {
		return sseMatches(got, want)
	}
	if strings.Contains(want, "...") || strings.Contains(want, "…") {
		// An execution's id differs from run to run.
		got = executionID.ReplaceAllString(got, "exec_ID")
		want = executionID.ReplaceAllString(want, "exec_ID")
		parts := regexp.MustCompile(`\.\.\.|…`).Split(want, -1)
		for i, p := range parts {
			parts[i] = regexp.QuoteMeta(p)
		}
		return regexp.MustCompile(`(?s)^` + strings.Join(parts, ".*") + `$`).MatchString(got)
	}
	var g, w map[string]any
	if strings.HasPrefix(want, "{") && json.Unmarshal([]byte(want), &w) == nil {
		if json.Unmarshal([]byte(got), &g) != nil || len(g) != len(w) {
			return false
		}
		for k, wv := range w {
			gv, ok := g[k]
			if !ok || (volatileKeys[k] && reflect.TypeOf(gv) != reflect.TypeOf(wv)) || (!volatileKeys[k] && !reflect.DeepEqual(gv, wv)) {
				return false
			}
		}
		return true
	}
	return got == want
}

// sseEvent is one Server-Sent Event: its name and data line.
type sseEvent struct{ name, data string }

// sseEvents parses a text/event-stream: events separated by blank lines.
func sseEvents(stream string) []sseEvent {
	var out []sseEvent
	for _, block := range strings.Split(strings.TrimSpace(stream), "\n\n") {
		var ev sseEvent
		for _, line := range strings.Split(block, "\n") {
			if v, ok := strings.CutPrefix(line, "event: "); ok {
				ev.name = v
			} else if v, ok := strings.CutPrefix(line, "data: "); ok {
				ev.data = v
			}
		}
		out = append(out, ev)
	}
	return out
}

// sseMatches compares a stream with the one the docs show. An output
// event carries what one read of the program's pipe returned, so where a
// stream is cut into events varies from run to run: the output of each
// stream must be the same, with consecutive events of one stream taken
// together, and every event's offset the bytes of its stream before it
// (the docs' too); other events are compared as docOutputMatches does.
func sseMatches(got, want string) bool {
	merge := func(events []sseEvent) ([]sseEvent, bool) {
		var out []sseEvent
		sent := map[string]int{}
		for _, ev := range events {
			var chunk struct {
				Type   string `json:"type"`
				Offset int    `json:"offset"`
				Data   string `json:"data"`
			}
			switch ev.name {
			case "stdout", "stderr", "compile":
				if json.Unmarshal([]byte(ev.data), &chunk) != nil || chunk.Type != ev.name || chunk.Offset != sent[ev.name] {
					return nil, false
				}
				sent[ev.name] += len(chunk.Data)
				if n := len(out); n > 0 && out[n-1].name == ev.name {
					out[n-1].data += chunk.Data
					continue
				}
				out = append(out, sseEvent{ev.name, chunk.Data})
			default:
				out = append(out, ev)
			}
		}
		return out, true
	}
	g, ok := merge(sseEvents(got))
	w, ok2 := merge(sseEvents(want))
	if !ok || !ok2 || len(g) != len(w) {
		return false
	}
	for i := range g {
		if g[i].name != w[i].name {
			return false
		}
		switch g[i].name {
		case "stdout", "stderr", "compile":
			if g[i].data != w[i].data {
				return false
			}
		default:
			if !docOutputMatches(g[i].data, w[i].data) {
				return false
			}
		}
	}
	return true
}

func TestDocOutputMatches(t *testing.T) {
	for _, c := range []struct {
		got, want string
		ok        bool
	}{
		{"42\n", "42", true},
		{"43\n", "42", false},
		{`{"execution_id":"exec_1","stdout":"x\n","duration_ms":3}`, "{\"execution_id\":\"exec_2\",\n \"stdout\":\"x\\n\",\"duration_ms\":12.5}", true},
		{`{"execution_id":"exec_1","stdout":"y\n","duration_ms":3}`, `{"execution_id":"exec_2","stdout":"x\n","duration_ms":12.5}`, false},
		{`{"execution_id":"exec_1","stdout":"x\n"}`, `{"execution_id":"exec_2","stdout":"x\n","duration_ms":12.5}`, false},
		{`{"id":"exec_1","a":1,"b":2,"c":3}`, `{"id":"exec_…","a":1,…,"c":3}`, true},
		{`{"id":"exec_1","a":1,"b":2,"c":4}`, `{"id":"exec_…","a":1,…,"c":3}`, false},
		{`{"id":"exec_947ef5ea65556794906453f6","a":1,"b":2}`, `{"id":"exec_c795db7aeafd1be884283065","a":1,...}`, true},
		{"event: result\ndata: {\"a\":1,\"b\":2}", "event: result\ndata: {\"a\":1,...}", true},
		{sse("a\n", "b\n") + "event: result\ndata: {}", sse("a", "\n", "b", "\n") + "event: result\ndata: {}", true},
		{sse("a\nb\n") + "event: result\ndata: {}", sse("a", "\n", "b", "\n") + "event: result\ndata: {}", true},
		{sse("a\nc\n") + "event: result\ndata: {}", sse("a", "\n", "b", "\n") + "event: result\ndata: {}", false},
		{sse("a\n", "b\n") + "event: result\ndata: {}", sse("a\n", "b\n"), false},
		{"event: stdout\ndata: {\"type\":\"stdout\",\"offset\":0,\"data\":\"a\"}\n\nevent: stdout\ndata: {\"type\":\"stdout\",\"offset\":0,\"data\":\"b\"}",
			sse("a", "b"), false},
	} {
		if got := docOutputMatches(c.got, c.want); got != c.ok {
			t.Errorf("docOutputMatches(%q, %q) = %v", c.got, c.want, got)
		}
	}
	ex := consoleExamples("$ a 'b\n  c'\nout 1\n\n$ d \\\n  e\nout 2\nout 3\n")
	if want := []consoleExample{{"a 'b\n  c'", "out 1"}, {"d \\\n  e", "out 2\nout 3"}}; !reflect.DeepEqual(ex, want) {
		t.Errorf("consoleExamples: %q", ex)
	}
}

// sse is the text/event-stream of stdout events carrying chunks, in order.
func sse(chunks ...string) string {
	var b strings.Builder
	offset := 0
	for _, c := range chunks {
		data, _ := json.Marshal(map[string]any{"type": "stdout", "offset": offset, "data": c})
		b.WriteString("event: stdout\ndata: " + string(data) + "\n\n")
		offset += len(c)
	}
	return b.String()
}

// TestREADMETour runs the README's tour: the command line and the HTTP API
// (its Judge0 and Piston example is TestREADMECompat's).
func TestREADMETour(t *testing.T) {
	srv := startServe(t, nil)
	for _, heading := range []string{"### Command line", "### HTTP API", "### Live sandboxes"} {
		t.Run(strings.TrimPrefix(heading, "### "), func(t *testing.T) {
			if heading == "### Live sandboxes" {
				t.Setenv("SANDBOX_RUN_SERVER", srv.url) // `sandbox-run sandbox`'s default server
				t.Setenv("SANDBOX_RUN_API_KEY", "")
			}
			runConsole(t, t.TempDir(), srv.url, docBlock(t, "README.md", heading, "console"))
		})
	}
}

// TestREADMEDocsCLI runs the examples of docs/CLI.md.
func TestREADMEDocsCLI(t *testing.T) {
	runConsole(t, t.TempDir(), "", docBlock(t, "docs/CLI.md", "# Command line", "console"))
}

// TestREADMEDocsCLISandboxes runs docs/CLI.md's live sandboxes example
// against a server, the one $SANDBOX_RUN_SERVER names (as the text says
// the commands find it).
func TestREADMEDocsCLISandboxes(t *testing.T) {
	srv := startServe(t, nil)
	t.Setenv("SANDBOX_RUN_SERVER", srv.url)
	t.Setenv("SANDBOX_RUN_API_KEY", "")
	runConsole(t, t.TempDir(), srv.url, docBlock(t, "docs/CLI.md", "## Live sandboxes", "console"))
}

// TestSDKDocsSandboxes runs docs/SDKS.md's live sandbox examples against
// a server: the Python one with the SDK from its sources (what it prints
// is the ```text block under it), then the TypeScript one with the SDK
// built in a copy (as TestTypeScriptSDK builds it; skipped without node
// and npm, or with -short), which must print the same.
func TestSDKDocsSandboxes(t *testing.T) {
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 is not installed")
	}
	srv := startServe(t, nil)
	const addr = "http://127.0.0.1:8080"
	want := strings.TrimSpace(docBlock(t, "docs/SDKS.md", "## Live sandboxes", "text"))
	sdk, err := filepath.Abs(filepath.Join("..", "..", "clients", "python"))
	if err != nil {
		t.Fatal(err)
	}
	code := strings.ReplaceAll(docBlock(t, "docs/SDKS.md", "## Live sandboxes", "python"), addr, srv.url)
	cmd := exec.Command(python, "-c", code)
	cmd.Dir = t.TempDir()
	cmd.Env = append(pythonEnv(), "PYTHONPATH="+sdk)
	out, err := cmd.CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != want {
		t.Errorf("the Python example: %v, printed\n%s\nthe docs show\n%s", err, out, want)
	}

	node, errNode := exec.LookPath("node")
	npm, errNpm := exec.LookPath("npm")
	if testing.Short() || errNode != nil || errNpm != nil {
		t.Skip("the TypeScript example needs node and npm (and no -short)")
	}
	src, err := filepath.Abs(filepath.Join("..", "..", "clients", "typescript"))
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "typescript")
	if err := copyTypeScriptSDK(src, dir); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{npm, "ci", "--no-audit", "--no-fund"}, {npm, "exec", "--", "tsc", "-p", "."}} {
		cmd := exec.Command(args[0], args[1:]...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "npm_config_update_notifier=false")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", strings.Join(args[1:], " "), err, out)
		}
	}
	js := docBlock(t, "docs/SDKS.md", "## Live sandboxes", "js")
	js = strings.ReplaceAll(strings.ReplaceAll(js, addr, srv.url), `"@sandbox-run/client"`, `"./dist/index.js"`)
	if err := os.WriteFile(filepath.Join(dir, "example.mjs"), []byte(js), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd = exec.Command(node, "example.mjs")
	cmd.Dir = dir
	out, err = cmd.CombinedOutput()
	wantJS := strings.Replace(want, "['data.txt']", "[ 'data.txt' ]", 1) // as console.log shows an array
	if err != nil || strings.TrimSpace(string(out)) != wantJS {
		t.Errorf("the TypeScript example: %v, printed\n%s\nwant\n%s", err, out, wantJS)
	}
}

// TestREADMEDocsAPI runs the examples of docs/API.md against a server:
// a run and a refusal, a stream and an entry point.
func TestREADMEDocsAPI(t *testing.T) {
	srv := startServe(t, nil)
	for _, heading := range []string{"## Executing code", "## Streaming", "## Calling functions (entry points)"} {
		t.Run(strings.TrimPrefix(heading, "## "), func(t *testing.T) {
			runConsole(t, t.TempDir(), srv.url, docBlock(t, "docs/API.md", heading, "console"))
		})
	}
}

// TestREADMEDocsImageAllow: the images.allow example of docs/IMAGES.md
// allows and refuses what the text under it says.
func TestREADMEDocsImageAllow(t *testing.T) {
	var cfg struct {
		Images struct {
			Allow []string `yaml:"allow"`
		} `yaml:"images"`
	}
	block := docBlock(t, "docs/IMAGES.md", "## Images over the API", "yaml")
	if err := yaml.Unmarshal([]byte(block), &cfg); err != nil || len(cfg.Images.Allow) == 0 {
		t.Fatalf("%v: %q", err, block)
	}
	policy := images.NewPolicy(cfg.Images.Allow)
	for ref, want := range map[string]bool{
		"python:3.12-slim":                                true,
		"docker.io/library/python:3.12-slim":              true,
		"python:3.13-slim":                                false,
		"registry.example.com/acme/tools/x:2":             true,
		"registry.example.com/other:1":                    false,
		"127.0.0.1:5000/acc/bash:1":                       true,
		"oci:/srv/images/tools":                           true,
		"oci:/srv/images/tools:1":                         true,
		"oci:/srv/images/a/b:1":                           true,
		"oci:/srv/other:1":                                false,
		"docker-archive:/srv/archives/app.tar":            true,
		"docker-archive:/srv/archives/app.tar:acme/app:1": true,
		"docker-archive:/srv/archives/other.tar":          false,
	} {
		if got := policy.Allows(ref); got != want {
			t.Errorf("the docs' images.allow allows %s: %v, want %v", ref, got, want)
		}
	}
	wild := images.NewPolicy([]string{"docker-archive:/srv/archives/*.tar"})
	if !wild.Allows("docker-archive:/srv/archives/app.tar") || wild.Allows("docker-archive:/srv/archives/app.tar:acme/app:1") {
		t.Errorf("docker-archive:/srv/archives/*.tar allows otherwise than the docs say")
	}
	if all := images.NewPolicy([]string{"docker-archive:/srv/archives/**"}); !all.Allows("docker-archive:/srv/archives/app.tar") || !all.Allows("docker-archive:/srv/archives/app.tar:acme/app:1") {
		t.Errorf("docker-archive:/srv/archives/** does not allow both")
	}
	if _, err := images.ParseRef("oci:/srv/images/../../etc:1"); err == nil {
		t.Errorf("a path with .. is a valid reference")
	}
}

// TestREADMEDocsImages runs the API example of docs/IMAGES.md: a server
// configured with the docs' images.allow (127.0.0.1:5000 being a registry
// of the test's) runs the docs' request in an image of bash and busybox.
func TestREADMEDocsImages(t *testing.T) {
	reg := imagetest.NewRegistry(t)
	osRelease := "PRETTY_NAME=\"sandbox-run docs image\"\n"
	files := []imagetest.File{{Name: "etc/os-release", Data: []byte(osRelease)}}
	for _, p := range bashClosure(t) {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, imagetest.File{Name: strings.TrimPrefix(p, "/"), Data: data, Mode: 0o755})
	}
	ref := reg.Push(t, imagetest.BusyboxImage(t, []string{"PATH=/bin"}, files...), "acc/bash:1")
	if want := reg.Host + "/acc/bash:1"; ref != want {
		t.Fatalf("pushed %s, want %s", ref, want)
	}
	config := strings.ReplaceAll(docBlock(t, "docs/IMAGES.md", "## Images over the API", "yaml"), "127.0.0.1:5000", reg.Host)
	path := filepath.Join(t.TempDir(), "config.yml")
	if err := os.WriteFile(path, []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	srv := startServe(t, nil, "--config", path)
	examples := consoleExamples(docBlock(t, "docs/IMAGES.md", "## Images over the API", "console"))
	if len(examples) != 1 || examples[0].want != "" {
		t.Fatalf("the docs' image request changed: %q", examples)
	}
	u, _ := url.Parse(srv.url)
	script := strings.NewReplacer("localhost:8080", u.Host, "127.0.0.1:5000", reg.Host).Replace(examples[0].cmd)
	out, err := exec.Command("bash", "-c", script).CombinedOutput()
	var res struct {
		Status, Stdout, Image string
		ImageDigest           string `json:"image_digest"`
	}
	json.Unmarshal(out, &res)
	if err != nil || res.Status != "completed" || res.Stdout != osRelease || res.Image != ref || res.ImageDigest == "" {
		t.Errorf("%s: %v %s", script, err, out)
	}
}

// bashClosure is /bin/bash and every file ldd names for it, by the paths
// ldd gives.
func bashClosure(t *testing.T) []string {
	t.Helper()
	out, err := exec.Command("ldd", "/bin/bash").Output()
	if err != nil {
		t.Fatalf("ldd /bin/bash: %v", err)
	}
	paths := []string{"/bin/bash"}
	for _, f := range strings.Fields(string(out)) {
		if strings.HasPrefix(f, "/") && !strings.HasSuffix(f, ":") {
			paths = append(paths, f)
		}
	}
	return paths
}

// TestREADMEDocsCluster: the NATS configuration of docs/CLUSTER.md is one
// serve takes.
func TestREADMEDocsCluster(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.yml")
	if err := os.WriteFile(path, []byte(docBlock(t, "docs/CLUSTER.md", "## Credentials and TLS", "yaml")), 0o644); err != nil {
		t.Fatal(err)
	}
	r := runCLI(t, "", "serve", "--config", path, "--print-config")
	var cfg struct {
		NATS struct {
			URLs []string `json:"urls"`
			Name string   `json:"name"`
		} `json:"nats"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &cfg); err != nil || r.code != 0 || len(cfg.NATS.URLs) != 3 || cfg.NATS.Name != "worker-1" {
		t.Errorf("the docs' NATS configuration: exit %d %v %q %q", r.code, err, r.stdout, r.stderr)
	}
}

// TestREADMEDocsMCP starts the MCP server as the host configuration of
// docs/COMPATIBILITY.md says, sandbox-run being this test binary, and
// lists its tools.
func TestREADMEDocsMCP(t *testing.T) {
	var hostConfig struct {
		MCPServers map[string]struct {
			Command string
			Args    []string
		} `json:"mcpServers"`
	}
	block := docBlock(t, "docs/COMPATIBILITY.md", "## MCP (AI agents)", "json")
	if err := json.Unmarshal([]byte(block), &hostConfig); err != nil || hostConfig.MCPServers["sandbox-run"].Command != "sandbox-run" {
		t.Fatalf("%v: %q", err, block)
	}
	cmd := cliCommand(t, nil, hostConfig.MCPServers["sandbox-run"].Args...)
	var stderr syncBuffer
	cmd.Stderr = &stderr
	client := sdk.NewClient(&sdk.Implementation{Name: "docs", Version: "0"}, nil)
	cs, err := client.Connect(context.Background(), &sdk.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connect: %v\n%s", err, stderr.String())
	}
	defer cs.Close()
	tools, err := cs.ListTools(context.Background(), nil)
	if err != nil || !slices.ContainsFunc(tools.Tools, func(tool *sdk.Tool) bool { return tool.Name == "execute_code" }) {
		t.Errorf("tools: %v %v", tools, err)
	}
}

// TestDocsClusterOnOneMachine runs the commands of docs/CLUSTER.md's "On
// one machine" as a person would, one after the other, on free ports and
// in a temporary directory: `cluster init`, three nats-servers from its
// files, an API node and a worker with their credentials, `cluster
// status` and a run. Between commands it waits as that person would (for
// the API node to answer, for the worker to join).
func TestDocsClusterOnOneMachine(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a NATS cluster, an API node and a worker")
	}
	block := docBlock(t, "docs/CLUSTER.md", "## On one machine", "sh")
	dir, base := t.TempDir(), natstest.PortRange(t, 7)
	httpPort := base + 6
	sub := strings.NewReplacer("/tmp/sr-cluster", dir, "4222", fmt.Sprint(base), "4223", fmt.Sprint(base+1), "4224", fmt.Sprint(base+2),
		"6222", fmt.Sprint(base+3), "127.0.0.1:8080", fmt.Sprintf("127.0.0.1:%d", httpPort))
	prelude := `sandbox-run() { "$SANDBOX_RUN_TEST_BIN" "$@"; }` + "\n" + `nats-server() { "$NATS_SERVER" "$@"; }` + "\n"
	env := append(cliCommand(t, nil).Env, "SANDBOX_RUN_TEST_BIN="+os.Args[0], "NATS_SERVER="+natstest.ServerBinary(t))
	vars := map[string]string{}
	var last string
	for _, line := range strings.Split(block, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		line = sub.Replace(line)
		if name, value, ok := strings.Cut(line, "="); ok && !strings.ContainsAny(name, " $") {
			vars[name] = value
			continue
		}
		for name, value := range vars {
			line = strings.ReplaceAll(line, "$"+name, value)
		}
		cmd := exec.Command("bash", "-c", prelude+strings.TrimSuffix(line, "&"))
		// Each command in a process group of its own, ended with the test;
		// a data dir of its own; output to a file (what it leaves running
		// keeps the file, not a pipe, open).
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		cmd.Env = append(env, "SANDBOX_RUN_DATA_DIR="+t.TempDir())
		outPath := filepath.Join(t.TempDir(), "out")
		out, err := os.Create(outPath)
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		out.Close()
		pgid := cmd.Process.Pid
		t.Cleanup(func() { _ = syscall.Kill(-pgid, syscall.SIGKILL) })
		read := func() string { b, _ := os.ReadFile(outPath); return string(b) }
		if strings.HasSuffix(line, "&") {
			go cmd.Wait()
		} else {
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			select {
			case err := <-done:
				if err != nil && !strings.HasPrefix(line, "for ") {
					t.Fatalf("$ %s: %v\n%s", line, err, read())
				}
			case <-time.After(2 * time.Minute):
				t.Fatalf("$ %s: still running after 2 minutes\n%s", line, read())
			}
		}
		last = read()
		switch {
		case strings.Contains(line, "sandbox-run serve"):
			waitFor(t, "the API node", func() bool {
				resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/readyz", httpPort))
				if err == nil {
					resp.Body.Close()
				}
				return err == nil && resp.StatusCode == 200
			}, read)
		case strings.Contains(line, "sandbox-run worker"):
			waitFor(t, "the worker", func() bool { return strings.Contains(read(), "worker joined the cluster") }, read)
		case strings.Contains(line, "cluster status"):
			if !strings.Contains(last, "workers: 1, slots: 4") || !strings.Contains(last, "API nodes: 1") || !strings.Contains(last, "messages: signed") {
				t.Fatalf("$ %s\n%s", line, last)
			}
		}
	}
	if !strings.Contains(last, `"stdout":"42\n"`) {
		t.Fatalf("the run: %s", last)
	}
}

func waitFor(t *testing.T, what string, ok func() bool, log func() string) {
	t.Helper()
	for deadline := time.Now().Add(2 * time.Minute); !ok(); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s never came up:\n%s", what, log())
		}
	}
}
