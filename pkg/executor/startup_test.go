package executor

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/sandbox-run/sandbox-run/pkg/sandbox"
)

// Start-up work that is done once and shared read-only: Python's stdlib
// bytecode, the JDK's class-data-sharing archive, javac's own archive.

// TestPythonStdlibBytecode checks that the interpreter in the sandbox
// loads the stdlib's compiled bytecode from /usr (read-only), and never
// writes bytecode, even when the request's environment asks it to.
func TestPythonStdlibBytecode(t *testing.T) {
	code := `import subprocess, sys, helper
print("dont_write_bytecode", sys.flags.dont_write_bytecode)
v = subprocess.run([sys.executable, "-v", "-c", "import json"], capture_output=True, text=True).stderr
print("json from pyc", "code object from '/usr/lib/python3.11/json/__pycache__/__init__.cpython-311.pyc'" in v)
print(helper.X)
`
	res := execute(t, &Request{Language: "python", Code: []byte(code),
		Files: []sandbox.File{{Path: "helper.py", Data: []byte("X = 'helper imported'\n")}},
		Env:   map[string]string{"PYTHONDONTWRITEBYTECODE": ""}})
	expectCompleted(t, res, "dont_write_bytecode 1\njson from pyc True\nhelper imported\n")
	if len(res.OutputFiles) != 0 {
		t.Errorf("python wrote files: %v", keys(res.OutputFiles))
	}
}

// TestJavaClassDataSharing checks that the JVM runs with the JDK's
// class-data-sharing archive mapped and writes no perf data to /tmp.
func TestJavaClassDataSharing(t *testing.T) {
	code := `public class Main { public static void main(String[] a) {
    System.out.println(System.getProperty("java.vm.info").contains("sharing"));
    System.out.println(new java.io.File("/tmp/hsperfdata_" + System.getProperty("user.name")).exists());
} }
`
	res := execute(t, &Request{Language: "java", Code: []byte(code)})
	expectCompleted(t, res, "true\nfalse\n")
}

// TestJavacArchive checks that javac runs with its prepared archive: the
// same compile with -Xshare:on (which fails when an archive cannot be
// used) loads most of the compiler's classes from it.
func TestJavacArchive(t *testing.T) {
	langs, err := ParseLanguages(defaultLanguages)
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(langs, func(l Language) bool { return l.Name == "java" })
	j := langs[i]
	if j.Cache == nil || !slices.Contains(j.Compile, "-J-XX:SharedArchiveFile=/cache/java/javac.jsa") {
		t.Fatalf("java entry: cache %+v, compile %q", j.Cache, j.Compile)
	}
	j.Name, j.Aliases, j.Extensions = "java-archive-check", nil, nil
	j.Compile = append([]string{j.Compile[0], "-J-Xshare:on", "-J-Xlog:class+load=info"}, j.Compile[1:]...)
	doc, err := yaml.Marshal(map[string][]Language{"languages": {j}})
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "languages.yaml")
	if err := os.WriteFile(file, doc, 0o644); err != nil {
		t.Fatal(err)
	}
	x, err := New(Config{DataDir: t.TempDir(), CacheDir: testCache, Languages: file, CompileCacheBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	res := executeWith(t, x, &Request{Language: j.Name, Code: program(t, langSpec{"java", "java", true}, "hello")})
	expectCompleted(t, res, "hello, world\n")
	top := strings.Count(res.Compile.Stdout, "source: shared objects file (top)")
	if top < 500 {
		t.Errorf("javac loaded %d classes from its archive, want hundreds; compile stdout ends %q", top, res.Compile.Stdout[max(0, len(res.Compile.Stdout)-500):])
	}
}

// BenchmarkHelloWorld times hello world through Execute in the
// interpreted languages and Java (whose compile comes from the compile
// cache after the first iteration): start-up is most of it. run-ms and
// cpu-ms are the run sandbox's own wall and CPU time.
func BenchmarkHelloWorld(b *testing.B) {
	for _, l := range []langSpec{{"python", "py", false}, {"javascript", "js", false}, {"java", "java", true}} {
		b.Run(l.name, func(b *testing.B) {
			code, err := os.ReadFile(filepath.Join("testdata", l.name, "hello."+l.ext))
			if err != nil {
				b.Fatal(err)
			}
			hello := func() *Result {
				res, err := testExec.Execute(b.Context(), &Request{Language: l.name, Code: code})
				if err != nil || res.Status != StatusCompleted {
					b.Fatalf("%v %+v", err, res)
				}
				return res
			}
			hello() // compile, prepare
			b.ResetTimer()
			var run, cpu float64
			for range b.N {
				res := hello()
				run += res.DurationMs
				cpu += res.CPUTimeMs
			}
			b.ReportMetric(run/float64(b.N), "run-ms/op")
			b.ReportMetric(cpu/float64(b.N), "cpu-ms/op")
		})
	}
}
