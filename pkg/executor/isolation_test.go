package executor

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandbox-run/sandbox-run/pkg/gvisor"
	"github.com/sandbox-run/sandbox-run/pkg/images/registry"
)

// TestIsolation: a run that asks for gVisor runs its program under
// gVisor's kernel, and its compile step too (the compiler reads gVisor's
// /proc; Go's build cache is a private writable view that leaves the
// host's untouched), and says so; on an executor without gVisor, or with what
// gVisor does not run yet, it is refused with a clear reason.
func TestIsolation(t *testing.T) {
	without, err := New(Config{DataDir: t.TempDir(), CacheDir: testCache, Engine: testExec.engine, CompileCacheBytes: -1,
		GVisorErr: errors.New("runsc is not here")})
	if err != nil {
		t.Fatal(err)
	}
	var inv *InvalidRequestError
	_, err = without.Execute(context.Background(), &Request{Language: "bash", Code: []byte("true"), Isolation: IsolationGVisor})
	if !errors.As(err, &inv) || !strings.Contains(err.Error(), "runsc is not here") {
		t.Errorf("gVisor where there is none: %v", err)
	}
	if err := without.Validate(&Request{Language: "bash", Code: []byte("true"), Isolation: "vm"}); !errors.As(err, &inv) {
		t.Errorf("an unknown isolation: %v", err)
	}
	if res := executeWith(t, without, &Request{Language: "bash", Code: []byte("echo native")}); res.Isolation != "" {
		t.Errorf("a native run says %q", res.Isolation)
	}

	x := gvisorExecutor(t, Config{CacheDir: testCache})
	host, _ := os.ReadFile("/proc/version")
	for _, c := range []struct{ lang, code string }{
		{"python", "print(open('/proc/version').read().strip()); print(input())"},
		{"c", "#include <stdio.h>\nint main(void){char b[256];FILE*f=fopen(\"/proc/version\",\"r\");fgets(b,sizeof b,f);fputs(b,stdout);scanf(\"%255s\",b);puts(b);return 0;}\n"},
	} {
		res := executeWith(t, x, &Request{Language: c.lang, Code: []byte(c.code), Isolation: IsolationGVisor, Stdin: strings.NewReader("w0rld\n")})
		out := res.Stdout
		if res.Status != StatusCompleted || !strings.HasPrefix(out, "Linux version") || strings.HasPrefix(out, strings.TrimSpace(string(host))) ||
			!strings.HasSuffix(out, "w0rld\n") || res.Isolation != IsolationGVisor {
			t.Errorf("%s under gVisor: %s %q %q (isolation %q)", c.lang, res.Status, out, res.Stderr, res.Isolation)
		}
	}
	// The compiler runs under gVisor: the files it finds are gVisor's
	// (/proc/kallsyms is the host kernel's, gVisor has none).
	probe := "#if __has_include(\"/proc/kallsyms\")\n#error compiled on the host's kernel\n#else\n#error compiled under gVisor\n#endif\n"
	res := executeWith(t, x, &Request{Language: "c", Code: []byte(probe), Isolation: IsolationGVisor})
	if res.Status != StatusCompileError || res.Compile == nil || !strings.Contains(res.Compile.Stderr, "compiled under gVisor") {
		t.Errorf("a compile under gVisor: %s %+v", res.Status, res.Compile)
	}
	if res := executeWith(t, x, &Request{Language: "c", Code: []byte(probe)}); res.Compile == nil || !strings.Contains(res.Compile.Stderr, "on the host's kernel") {
		t.Errorf("the probe natively: %s %+v", res.Status, res.Compile)
	}
	// Go's build cache: its overlay takes the compile's writes.
	goCode := func(msg string) []byte {
		return []byte("package main\n\nimport \"fmt\"\n\nfunc main() { fmt.Println(\"" + msg + "\") }\n")
	}
	if res := executeWith(t, x, &Request{Language: "go", Code: goCode("one"), Isolation: IsolationGVisor}); res.Status != StatusCompleted || res.Stdout != "one\n" {
		t.Fatalf("go under gVisor: %s %q %+v", res.Status, res.Stdout, res.Compile)
	}
	before := countFiles(t, testCache)
	if res := executeWith(t, x, &Request{Language: "go", Code: goCode("two"), Isolation: IsolationGVisor}); res.Status != StatusCompleted || res.Stdout != "two\n" {
		t.Fatalf("go under gVisor: %s %q %+v", res.Status, res.Stdout, res.Compile)
	}
	if after := countFiles(t, testCache); after != before {
		t.Errorf("a compile under gVisor wrote to the host's toolchain caches: %d files before, %d after", before, after)
	}
	// A session's files under gVisor: written by one run, read by the next.
	session := fmt.Sprintf("gvisor-session-%d", time.Now().UnixNano())
	t.Cleanup(func() { x.DeleteSession(session) })
	executeWith(t, x, &Request{Language: "bash", Code: []byte("echo kept > kept.txt"), SessionID: session, Isolation: IsolationGVisor})
	if res := executeWith(t, x, &Request{Language: "bash", Code: []byte("cat kept.txt; cat /proc/version"), SessionID: session, Isolation: IsolationGVisor}); !strings.HasPrefix(res.Stdout, "kept\nLinux version") || strings.Contains(res.Stdout, strings.TrimSpace(string(host))) {
		t.Errorf("a session under gVisor: %s %q %q", res.Status, res.Stdout, res.Stderr)
	}
	// An interpreter session's cells under gVisor keep their state; a cell
	// that asks for the engine gets a new interpreter, not this one.
	interp := fmt.Sprintf("gvisor-interp-%d", time.Now().UnixNano())
	defer x.EndInterpreter(interp)
	cell := func(code, isolation string) *Result {
		t.Helper()
		return executeWith(t, x, &Request{Language: "python", Code: []byte(code), SessionID: interp, Interpreter: true, Isolation: isolation})
	}
	if r := cell("x = 41\nkernel = open('/proc/version').read()", IsolationGVisor); r.Status != StatusCompleted {
		t.Fatalf("a cell under gVisor: %s", describe(r))
	}
	if r := cell("x + 1", IsolationGVisor); r.Value["text/plain"] != "42" || r.Isolation != IsolationGVisor {
		t.Errorf("the next cell under gVisor: %v %s", r.Value, describe(r))
	}
	if r := cell("kernel", IsolationGVisor); !strings.Contains(fmt.Sprint(r.Value["text/plain"]), "gvisor") {
		t.Errorf("the interpreter's kernel: %v", r.Value)
	}
	// An interrupted cell: the interpreter lives on.
	r := executeWith(t, x, &Request{Language: "python", Code: []byte("import time\nwhile True:\n    time.sleep(0.01)\n"), SessionID: interp,
		Interpreter: true, Isolation: IsolationGVisor, Limits: Limits{WallTime: time.Second}})
	if r.Status != StatusTimeout || r.Restarted {
		t.Errorf("an interrupted cell under gVisor: %s restarted=%v", r.Status, r.Restarted)
	}
	if r := cell("x", IsolationGVisor); r.Value["text/plain"] != "41" || r.Restarted {
		t.Errorf("after the interrupt under gVisor: %v restarted=%v", r.Value, r.Restarted)
	}
	if r := cell("x", IsolationNative); !r.Restarted || r.Status != StatusRuntimeError {
		t.Errorf("a native cell in a gVisor session: restarted=%v %s", r.Restarted, describe(r))
	}
	// An entry point: its runner's outcome comes through the result pipe.
	if res := executeWith(t, x, &Request{Language: "python", Code: []byte(pyCalc), Isolation: IsolationGVisor,
		Entrypoint: &Entrypoint{ClassName: "Calc", MethodName: "add", MethodParams: params(`{"a": 2, "b": 40}`)}}); res.Status != StatusCompleted || string(res.ReturnValue) != `{"sum":42}` {
		t.Errorf("an entry point under gVisor: return %s, %s", res.ReturnValue, describe(res))
	}
}

// countFiles counts the files under the toolchain caches of dir (not the
// compile cache, which other tests write to).
func countFiles(t *testing.T, dir string) int {
	t.Helper()
	n := 0
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == "compile-cache" {
			return filepath.SkipDir
		}
		n++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestIsolationImage: a run whose root is an image's, under gVisor: the
// image's root and nothing of the host's, read-only but /work and /tmp,
// the sandbox's unprivileged user, its output files back.
func TestIsolationImage(t *testing.T) {
	x := gvisorExecutor(t, Config{CacheDir: t.TempDir(), ImageRegistry: registry.Fetch})
	ref := layoutRef(t, busyboxImage(t))
	res := executeWith(t, x, &Request{Language: "sh", Image: ref, Code: []byte(imageProbe + "head -c 30 /proc/version; echo\n"), Isolation: IsolationGVisor})
	if res.Status != StatusCompleted || res.Isolation != IsolationGVisor {
		t.Fatalf("run in the image under gVisor: %s", describe(res))
	}
	got := kv(res.Stdout)
	for k, v := range map[string]string{"marker": imageMarker, "visible /usr/bin/python3": "no", "visible /etc/debian_version": "no",
		"tool": "imgtool-ran", "pwd": "/work", "writable /": "no", "writable /etc": "no", "writable /work": "yes",
		"writable /tmp": "yes", "tmpread": "tmp-data"} {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
	if got["uid"] == "" || got["uid"] == "0" {
		t.Errorf("uid = %q, want the sandbox's unprivileged user", got["uid"])
	}
	if !strings.Contains(res.Stdout, "Linux version 4.") { // gVisor's, not the host's 6.x
		t.Errorf("not gVisor's kernel:\n%s", res.Stdout)
	}
	if string(res.OutputFiles["out.txt"]) != "from-the-program\n" {
		t.Errorf("output files: %v", keys(res.OutputFiles))
	}

	// With a network: the image's own client reaches what the allow-list
	// names through the egress, and its resolv.conf names the egress.
	port := netListener(t, "img")
	res = executeWith(t, x, &Request{Language: "sh", Image: ref, Isolation: IsolationGVisor,
		Network: []string{fmt.Sprintf("host.sandbox.internal:%d", port)},
		Code:    []byte(fmt.Sprintf("wget -q -O - http://host.sandbox.internal:%d/; echo; cat /etc/resolv.conf\n", port))})
	if res.Status != StatusCompleted || !strings.Contains(res.Stdout, fmt.Sprintf("img:%d\n", port)) || !strings.Contains(res.Stdout, "nameserver 10.77.0.1") ||
		res.Network == nil || res.Network.Allowed == 0 || res.Network.BytesIn == 0 {
		t.Errorf("a network in the image under gVisor: %s %+v", describe(res), res.Network)
	}
}

// gvisorExecutor is an executor like cfg on the test engine with gVisor,
// or a skip where gVisor cannot run (not root, no runsc).
func gvisorExecutor(t *testing.T, cfg Config) *Executor {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("gVisor needs root")
	}
	if _, err := gvisor.Find(""); err != nil {
		t.Skip(err)
	}
	g, err := gvisor.New(gvisor.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	cfg.DataDir, cfg.Engine, cfg.CompileCacheBytes, cfg.GVisor = t.TempDir(), testExec.engine, -1, g
	x, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return x
}
