package executor

import (
	"encoding/json"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sandbox-run/sandbox-run/pkg/sandbox"
)

// failingCompilers is a languages.yaml of compile steps that fail in each
// way a compiler can: an exit status, a signal, a memory limit, a timeout.
const failingCompilers = `languages:
  - {name: exitc, source: main.c, toolchain: [/usr/bin/gcc], compile: [/bin/sh, -c, 'echo broken >&2; exit 3'], artifacts: [main], run: [./main]}
  - {name: killc, source: main.c, toolchain: [/usr/bin/gcc], compile: [/bin/sh, -c, 'kill -KILL $$'], artifacts: [main], run: [./main]}
  - {name: memc, source: main.c, toolchain: [/usr/bin/gcc], compile: [/usr/bin/python3, -c, 'b = bytearray(768 << 20); print(len(b))'], artifacts: [main], run: [./main], compile_limits: {memory_mb: 64}}
  - {name: sleepc, source: main.c, toolchain: [/usr/bin/gcc], compile: [/bin/sh, -c, 'sleep 60'], artifacts: [main], run: [./main]}
`

// TestCompileStepStatus: a compile step that fails reports error_compile as
// its own status (never error_runtime, which is the program's), whatever
// ended it but time; a compile timeout is timeout. The execution's status
// is error_compile in every case.
func TestCompileStepStatus(t *testing.T) {
	langs := filepath.Join(t.TempDir(), "languages.yaml")
	if err := os.WriteFile(langs, []byte(failingCompilers), 0o644); err != nil {
		t.Fatal(err)
	}
	x := newCacheExec(t, t.TempDir(), -1, langs)
	code := []byte("int main(void) { return 0; }\n")
	for _, c := range []struct {
		lang    string
		limits  Limits
		status  Status
		exit    int
		signal  string
		limit   sandbox.Limit
		message string
	}{
		{"c", Limits{}, StatusCompileError, 1, "", sandbox.LimitNone, "nope"},
		{"exitc", Limits{}, StatusCompileError, 3, "", sandbox.LimitNone, "broken"},
		{"killc", Limits{}, StatusCompileError, -1, "SIGKILL", sandbox.LimitNone, ""},
		{"memc", Limits{}, StatusCompileError, -1, "SIGKILL", sandbox.LimitMemory, ""},
		{"sleepc", Limits{WallTime: time.Second}, StatusTimeout, -1, "SIGKILL", sandbox.LimitWallTime, ""},
	} {
		t.Run(c.lang, func(t *testing.T) {
			src := code
			if c.lang == "c" {
				src = []byte("int main(void) { return nope; }\n")
			}
			res := executeWith(t, x, &Request{Language: c.lang, Code: src, CompileLimits: c.limits})
			if res.Status != StatusCompileError || res.Compile == nil {
				t.Fatalf("execution status: %s", describe(res))
			}
			s := res.Compile
			if s.Status != c.status || s.LimitReason != string(c.limit) || s.CacheHit {
				t.Errorf("compile step: status %s limit %q, want %s limit %q (%+v)", s.Status, s.LimitReason, c.status, c.limit, s.Outcome)
			}
			if c.limit == sandbox.LimitNone && (s.ExitCode != c.exit || s.Signal != c.signal) {
				t.Errorf("compile step: exit %d signal %q, want %d %q", s.ExitCode, s.Signal, c.exit, c.signal)
			}
			if !strings.Contains(s.Stderr, c.message) {
				t.Errorf("compile stderr %q lacks %q", s.Stderr, c.message)
			}
			if res.Stdout != "" || res.ExitCode != 0 || res.Signal != "" {
				t.Errorf("the program ran: %s", describe(res))
			}
		})
	}
}

// TestSignalExitCode: a program a signal ended has exit_code -1 and signal
// naming it (os/exec's convention; the CLI turns it into 128+N).
func TestSignalExitCode(t *testing.T) {
	for _, c := range []struct {
		lang, code, signal string
	}{
		{"bash", "echo before; kill -KILL $$; echo after", "SIGKILL"},
		{"python", "import os, signal\nprint('before', flush=True)\nos.kill(os.getpid(), signal.SIGTERM)\nprint('after')\n", "SIGTERM"},
	} {
		res := execute(t, &Request{Language: c.lang, Code: []byte(c.code)})
		if res.Status != StatusRuntimeError || res.ExitCode != -1 || res.Signal != c.signal || res.LimitReason != "" || res.Stdout != "before\n" {
			t.Errorf("%s: want error_runtime, exit -1, signal %s; got %s", c.lang, c.signal, describe(res))
		}
		b, _ := json.Marshal(res)
		if !strings.Contains(string(b), `"exit_code":-1,"signal":"`+c.signal+`"`) {
			t.Errorf("%s: JSON %s", c.lang, b)
		}
	}
}

// evilProcessor is an annotation processor: run by javac, it says so on
// stderr and generates a class Pwned, which the program looks for.
const evilProcessor = `import java.io.Writer;
import java.util.Set;
import javax.annotation.processing.*;
import javax.lang.model.SourceVersion;
import javax.lang.model.element.TypeElement;

@SupportedAnnotationTypes("*")
public class Evil extends AbstractProcessor {
    private boolean done;
    @Override public SourceVersion getSupportedSourceVersion() { return SourceVersion.latestSupported(); }
    @Override public boolean process(Set<? extends TypeElement> annotations, RoundEnvironment env) {
        if (done) return false;
        done = true;
        System.err.println("EVIL-PROCESSOR-RAN");
        try (Writer w = processingEnv.getFiler().createSourceFile("Pwned").openWriter()) {
            w.write("public class Pwned {}");
        } catch (Exception e) {
            throw new RuntimeException(e);
        }
        return false;
    }
    public static void main(String[] args) { System.out.println("built"); }
}
`

const processorVictim = `public class Main {
    public static void main(String[] args) {
        try {
            Class.forName("Pwned");
            System.out.println("processor ran");
        } catch (ClassNotFoundException e) {
            System.out.println("clean");
        }
    }
}
`

// TestJavacRunsNoAnnotationProcessor: javac would run an annotation
// processor the request's files register on its class path (/work):
// every Java entry compiles with -proc:none, so it never runs.
func TestJavacRunsNoAnnotationProcessor(t *testing.T) {
	x := newCacheExec(t, t.TempDir(), -1, "")
	// The processor's class, compiled by the sandbox.
	res := executeWith(t, x, &Request{Language: "java", Code: []byte(evilProcessor), OutputFiles: []string{"Evil.class"}})
	expectCompleted(t, res, "built\n")
	class, ok := res.OutputFiles["Evil.class"]
	if !ok {
		t.Fatalf("no Evil.class: %v", keys(res.OutputFiles))
	}
	files := []sandbox.File{
		{Path: "Evil.class", Data: class},
		{Path: "META-INF/services/javax.annotation.processing.Processor", Data: []byte("Evil\n")},
	}
	n := 0
	for _, l := range x.Registry().Entries("java") {
		tc := x.Registry().Toolchain(l)
		if tc == nil || tc.Err != nil {
			continue
		}
		n++
		t.Run(tc.Version, func(t *testing.T) {
			res := executeWith(t, x, &Request{Language: "java", Version: tc.Version, Code: []byte(processorVictim), Files: files})
			if res.Compile != nil && strings.Contains(res.Compile.Stdout+res.Compile.Stderr, "EVIL-PROCESSOR-RAN") {
				t.Errorf("javac ran the request's annotation processor: %s", describe(res))
			}
			expectCompleted(t, res, "clean\n")
		})
	}
	if n == 0 {
		t.Fatal("no Java toolchain")
	}
}

// TestJavaEntriesDisableProcessors: every entry that compiles with javac
// says what to do with annotation processors (-proc:none unless it means
// to run them), so a new entry cannot bring implicit processing back.
func TestJavaEntriesDisableProcessors(t *testing.T) {
	langs, err := embeddedLanguages()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, l := range langs {
		javac := false
		for _, c := range l.Toolchain {
			javac = javac || path.Base(c) == "javac"
		}
		if !javac {
			continue
		}
		n++
		if !slices.ContainsFunc(l.Compile, func(a string) bool { return strings.HasPrefix(a, "-proc:") }) {
			t.Errorf("%s (%v) compiles without -proc:none: %q", l.Name, l.Toolchain, l.Compile)
		}
	}
	if n < 2 {
		t.Errorf("found %d javac entries, want the JDK 17 and 25 ones", n)
	}
}
