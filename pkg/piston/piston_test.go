package piston

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/sandbox-run/sandbox-run/internal/testkit/apitest"
	"github.com/sandbox-run/sandbox-run/pkg/api"
	"github.com/sandbox-run/sandbox-run/pkg/sandbox"
)

func TestMain(m *testing.M) {
	sandbox.Init() // a sandbox's PID 1 is this binary re-executed
	os.Exit(m.Run())
}

func post(t *testing.T, url string, body any) (int, map[string]any) {
	t.Helper()
	b, _ := json.Marshal(body)
	resp, err := http.Post(url, "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var v map[string]any
	data, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatalf("%d %q", resp.StatusCode, data)
	}
	return resp.StatusCode, v
}

func stageOf(v map[string]any, name string) map[string]any {
	m, _ := v[name].(map[string]any)
	return m
}

// TestPiston: Piston v2's API as its documentation describes it, on real
// sandboxes.
func TestPiston(t *testing.T) {
	base := apitest.Serve(t, apitest.Config(t), api.Mount(Prefix, New)) + "/piston/api/v2"

	t.Run("runtimes", func(t *testing.T) {
		resp, err := http.Get(base + "/runtimes")
		if err != nil {
			t.Fatal(err)
		}
		var rts []Runtime
		json.NewDecoder(resp.Body).Decode(&rts)
		resp.Body.Close()
		seen := map[string]bool{}
		for _, r := range rts {
			if strings.Count(r.Version, ".") != 2 {
				t.Errorf("%s version %q is not x.y.z", r.Language, r.Version)
			}
			seen[r.Language] = true
			if r.Language == "javascript" && !slices.Contains(r.Aliases, "node-js") {
				t.Errorf("javascript's aliases %v lack Piston's node-js", r.Aliases)
			}
		}
		for _, l := range []string{"python", "javascript", "c", "c++", "go", "bash"} {
			if !seen[l] {
				t.Errorf("%s missing from runtimes", l)
			}
		}
	})

	for _, tc := range []struct {
		name  string
		body  map[string]any
		check func(map[string]any) bool
	}{
		{"stdin and args", map[string]any{"language": "python", "version": "3.x", "stdin": "hi", "args": []string{"a", "b"},
			"files": []map[string]string{{"name": "main.py", "content": "import sys\nprint(input(), sys.argv[1:])"}}},
			func(r map[string]any) bool {
				run := stageOf(r, "run")
				return run["stdout"] == "hi ['a', 'b']\n" && run["code"] == float64(0) && run["output"] == "hi ['a', 'b']\n" && r["compile"] == nil
			}},
		{"compile error", map[string]any{"language": "c", "version": "*", "files": []map[string]string{{"content": "int main(){return x;}"}}},
			func(r map[string]any) bool {
				c := stageOf(r, "compile")
				_, hasRun := r["run"] // Piston answers no run stage when nothing ran
				return c != nil && c["code"] != float64(0) && strings.Contains(c["stderr"].(string)+c["stdout"].(string), "error") && !hasRun
			}},
		{"compiled", map[string]any{"language": "c++", "version": "*", "compile_memory_limit": 512 << 20, "compile_timeout": 60000,
			"files": []map[string]string{{"content": "#include <iostream>\nint main(){std::cout<<42;}"}}},
			func(r map[string]any) bool {
				return stageOf(r, "compile")["code"] == float64(0) && stageOf(r, "run")["stdout"] == "42"
			}},
		{"compile memory limit", map[string]any{"language": "c++", "version": "*", "compile_memory_limit": 4 << 20,
			"files": []map[string]string{{"content": "#include <iostream>\nint main(){std::cout<<4 << 3;}"}}},
			func(r map[string]any) bool {
				c := stageOf(r, "compile")
				_, hasRun := r["run"]
				return c != nil && (c["code"] != float64(0) || c["signal"] != nil) && !hasRun
			}},
		// Piston's own aliases, as its clients' READMEs use them.
		{"alias node-js", map[string]any{"language": "node-js", "version": "*", "files": []map[string]string{{"content": "console.log('js')"}}},
			func(r map[string]any) bool {
				return stageOf(r, "run")["stdout"] == "js\n" && r["language"] == "javascript"
			}},
		{"alias node-javascript", map[string]any{"language": "node-javascript", "version": "*", "files": []map[string]string{{"content": "console.log('js')"}}},
			func(r map[string]any) bool { return stageOf(r, "run")["stdout"] == "js\n" }},
		{"alias py3", map[string]any{"language": "py3", "version": "*", "files": []map[string]string{{"content": "print('py')"}}},
			func(r map[string]any) bool { return stageOf(r, "run")["stdout"] == "py\n" && r["language"] == "python" }},
		{"base64 and hex files", map[string]any{"language": "python", "version": "*", "files": []map[string]string{
			{"content": base64.StdEncoding.EncodeToString([]byte("print(open('d.txt').read())")), "encoding": "base64"},
			{"name": "d.txt", "content": hex.EncodeToString([]byte("from hex")), "encoding": "hex"}}},
			func(r map[string]any) bool { return stageOf(r, "run")["stdout"] == "from hex\n" }},
		{"timeout", map[string]any{"language": "bash", "version": "*", "run_timeout": 500, "files": []map[string]string{{"content": "sleep 30"}}},
			func(r map[string]any) bool {
				run := stageOf(r, "run")
				return run["status"] == "TO" && run["signal"] == "SIGKILL"
			}},
		{"exit code", map[string]any{"language": "bash", "version": "*", "files": []map[string]string{{"content": "echo err >&2; exit 3"}}},
			func(r map[string]any) bool {
				run := stageOf(r, "run")
				return run["code"] == float64(3) && run["stderr"] == "err\n" && run["status"] == "RE"
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, r := post(t, base+"/execute", tc.body)
			if st != 200 || !tc.check(r) {
				t.Fatalf("%d %v", st, r)
			}
		})
	}

	t.Run("refused", func(t *testing.T) {
		for _, body := range []map[string]any{
			{"language": "cobol-85", "version": "*", "files": []map[string]string{{"content": "x"}}},
			{"language": "python", "version": "1.0.0", "files": []map[string]string{{"content": "x"}}},
			{"language": "python", "version": "*"},
			{"language": "python", "version": "*", "files": []map[string]string{{"content": "x", "encoding": "rot13"}}},
			{"language": "python", "version": "*", "files": []map[string]string{{"content": "x"}}, "isolation": "vm"}, // ours
		} {
			st, r := post(t, base+"/execute", body)
			if st != 400 || r["message"] == nil {
				t.Errorf("%v: %d %v", body, st, r)
			}
		}
	})

	t.Run("connect", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		c, _, err := websocket.Dial(ctx, strings.Replace(base, "http", "ws", 1)+"/connect", nil)
		if err != nil {
			t.Fatal(err)
		}
		defer c.CloseNow()
		send := func(v any) {
			b, _ := json.Marshal(v)
			if err := c.Write(ctx, websocket.MessageText, b); err != nil {
				t.Fatal(err)
			}
		}
		send(map[string]any{"type": "init", "language": "python", "version": "*",
			"files": []map[string]string{{"content": "while True:\n    l = input()\n    print(l.upper(), flush=True)"}}})
		var stdout strings.Builder
		var types []string
		sentLine := false
		for {
			_, data, err := c.Read(ctx)
			if err != nil {
				break
			}
			var m map[string]any
			json.Unmarshal(data, &m)
			types = append(types, m["type"].(string))
			switch m["type"] {
			case "stage":
				if !sentLine {
					sentLine = true
					send(map[string]any{"type": "data", "stream": "stdin", "data": "hello\n"})
				}
			case "data":
				stdout.WriteString(m["data"].(string))
				if strings.Contains(stdout.String(), "HELLO\n") {
					send(map[string]any{"type": "signal", "signal": "SIGKILL"})
				}
			case "exit", "error":
			}
		}
		if types[0] != "runtime" || !strings.Contains(stdout.String(), "HELLO\n") {
			t.Fatalf("messages %v, stdout %q", types, stdout.String())
		}
	})
}

func TestMatches(t *testing.T) {
	for _, tc := range []struct {
		sel, v string
		want   bool
	}{
		{"*", "3.11.2", true}, {"", "3.11.2", true}, {"3.x", "3.11.2", true}, {"3.11", "3.11.2", true},
		{"3.11.2", "3.11.2", true}, {"3.10", "3.11.2", false}, {"2", "3.11.2", false}, {"^3.11.0", "3.11.0", true},
	} {
		if got := matches(tc.sel, tc.v); got != tc.want {
			t.Errorf("matches(%q, %q) = %v", tc.sel, tc.v, got)
		}
	}
}

// TestPistonClientNPM: the npm registry's piston-client, as its users
// call it, against /piston.
func TestPistonClientNPM(t *testing.T) {
	if testing.Short() {
		t.Skip("installs piston-client from the npm registry")
	}
	for _, tool := range []string{"npm", "node"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed", tool)
		}
	}
	dir := t.TempDir()
	install := exec.Command("bash", "-c", "npm init -y >/dev/null && npm install --silent --no-audit --no-fund piston-client@1.0.2")
	install.Dir = dir
	if out, err := install.CombinedOutput(); err != nil {
		// As the TypeScript SDK's test does: the npm registry is a
		// prerequisite of the suite, and a broken install is a failure.
		t.Fatalf("npm install piston-client (is the npm registry reachable?): %v %s", err, out)
	}
	script := `import piston from 'piston-client';
const c = piston({server: process.argv[2]});
const rts = await c.runtimes();
const r = await c.execute('python', 'import sys\nprint(sum(map(int, sys.argv[1:])))');
const e = await c.execute({language: 'bash', files: [{content: 'echo "$1-$2"'}], args: ['a', 'b']});
console.log(JSON.stringify({runtimes: rts.length, sum: r.run.stdout, args: e.run.stdout}));
`
	if err := os.WriteFile(filepath.Join(dir, "run.mjs"), []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	client := func(base string) ([]byte, error) {
		cmd := exec.Command("node", "run.mjs", base)
		cmd.Dir = dir
		return cmd.CombinedOutput()
	}
	check := func(base string) {
		t.Helper()
		out, err := client(base)
		var got struct {
			Runtimes  int
			Sum, Args string
		}
		if err != nil || json.Unmarshal(out, &got) != nil || got.Runtimes < 8 || got.Sum != "6\n" || got.Args != "a-b\n" {
			t.Fatalf("piston-client: %v %s", err, out)
		}
	}
	check(apitest.Serve(t, apitest.Config(t), api.Mount(Prefix, New)) + "/piston")

	// A server with keys: the stock client sends no header, so it takes
	// the key in its base URL; a wrong one is refused in Piston's shape.
	cfg := apitest.Config(t)
	cfg.Keys = []api.APIKey{{ID: "piston", Key: "k-piston-secret", Scopes: []string{api.ScopeExecute}}}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	root := apitest.Serve(t, cfg, api.Mount(Prefix, New))
	if resp, err := http.Get(root + "/k/k-piston-secret/piston/api/v2/runtimes"); err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET /k/<key>/piston/api/v2/runtimes: %v %v", err, resp)
	}
	check(root + "/k/k-piston-secret/piston")
	if out, err := client(root + "/piston"); err == nil && strings.Contains(string(out), `"sum":"6\n"`) {
		t.Fatalf("piston-client ran without a key: %s", out)
	}
	resp, err := http.Post(root+"/k/wrong-key/piston/api/v2/execute", "application/json",
		strings.NewReader(`{"language":"python","version":"*","files":[{"content":"print(1)"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	var refused map[string]any
	json.NewDecoder(resp.Body).Decode(&refused)
	resp.Body.Close()
	if msg, _ := refused["message"].(string); resp.StatusCode != 401 || msg == "" {
		t.Errorf("a wrong key in the base URL: %d %v, want 401 {\"message\": ...}", resp.StatusCode, refused)
	}
}
