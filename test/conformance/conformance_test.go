//go:build conformance

package conformance

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/sandbox-run/sandbox-run/pkg/executor"
	"github.com/sandbox-run/sandbox-run/pkg/gvisor"
	"github.com/sandbox-run/sandbox-run/pkg/sandbox"
)

var testExec *executor.Executor

// isolation is what every run asks for: SANDBOX_RUN_ISOLATION (gvisor:
// the suite under gVisor, as CI runs it too); "": the server's default.
var isolation = os.Getenv("SANDBOX_RUN_ISOLATION")

func TestMain(m *testing.M) {
	// The sandbox's PID 1 is this test binary re-executed: Init must come
	// first and never returns in that case.
	sandbox.Init()
	gvisor.ShimMain() // a gVisor sandbox booted ahead's first program
	flag.Parse()
	parallelSet := false
	flag.Visit(func(f *flag.Flag) { parallelSet = parallelSet || f.Name == "test.parallel" })
	if !parallelSet {
		flag.Set("test.parallel", "6")
	}
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	dataDir, err := os.MkdirTemp("", "sandbox-run-conformance-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "data dir:", err)
		return 1
	}
	defer os.RemoveAll(dataDir)
	// The toolchain caches (Go's std build) persist across runs, shared
	// with the executor's tests; the compile cache lives and dies with this
	// run, so that "cold" is a real compile.
	home, err := os.UserHomeDir()
	if err != nil {
		fmt.Fprintln(os.Stderr, "home:", err)
		return 1
	}
	cache := filepath.Join(home, ".cache", "sandbox-run-test", "cache")
	if err := os.MkdirAll(cache, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, "cache dir:", err)
		return 1
	}
	cfg := executor.Config{DataDir: dataDir, CacheDir: cache, CompileCacheDir: filepath.Join(dataDir, "compile-cache")}
	if isolation == executor.IsolationGVisor {
		g, err := gvisor.New(gvisor.Config{Dir: filepath.Join(dataDir, "gvisor"), Pool: 2})
		if err != nil {
			fmt.Fprintln(os.Stderr, "gVisor:", err)
			return 1
		}
		cfg.GVisor = g
	}
	testExec, err = executor.New(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "executor:", err)
		return 1
	}
	defer testExec.Close()
	return m.Run()
}

const (
	stdinData  = "line one\nline two\n"
	filesInput = "Hello, files!\nSecond line 42.\n"
	unicodeOut = "héllo wörld ✓ 日本\n"
)

var caseArgs = []string{"a", "b c"}

// conformanceCase is one program every entry runs, and how its result is
// judged (an empty string: it passed).
type conformanceCase struct {
	name         string
	compiledOnly bool
	request      func(r *executor.Request)
	check        func(res *executor.Result) string
}

func exactStdout(want string) func(*executor.Result) string {
	return func(res *executor.Result) string {
		if res.Status != executor.StatusCompleted || res.Stdout != want {
			return fmt.Sprintf("want completed with stdout %q", want)
		}
		return ""
	}
}

var cases = []conformanceCase{
	{name: "hello", check: exactStdout("Hello, World!\n")},
	{name: "stdin", request: func(r *executor.Request) { r.Stdin = strings.NewReader(stdinData) }, check: exactStdout(stdinData)},
	{name: "args", request: func(r *executor.Request) { r.Args = caseArgs }, check: exactStdout(strings.Join(caseArgs, "\n") + "\n")},
	{name: "exit3", check: func(res *executor.Result) string {
		if res.ExitCode != 3 || res.Status != executor.StatusRuntimeError {
			return "want exit code 3"
		}
		return ""
	}},
	{name: "runtime_error", check: func(res *executor.Result) string {
		if res.Status != executor.StatusRuntimeError || res.ExitCode == 0 && res.Signal == "" || strings.TrimSpace(res.Stderr) == "" || res.LimitReason != "" {
			return "want a non-zero exit (not a limit) with a message on stderr"
		}
		return ""
	}},
	{name: "compile_error", compiledOnly: true, check: func(res *executor.Result) string {
		if res.Status != executor.StatusCompileError || res.Compile == nil || strings.TrimSpace(res.Compile.Stderr+res.Compile.Stdout) == "" {
			return "want status error_compile with the compiler's message"
		}
		return ""
	}},
	{name: "files", request: func(r *executor.Request) {
		r.Files = []sandbox.File{{Path: "input.txt", Data: []byte(filesInput)}}
		r.OutputFiles = []string{"output.txt"}
	}, check: func(res *executor.Result) string {
		if got := string(res.OutputFiles["output.txt"]); res.Status != executor.StatusCompleted || got != strings.ToUpper(filesInput) {
			return fmt.Sprintf("want completed with output.txt %q, got %q", strings.ToUpper(filesInput), got)
		}
		return ""
	}},
	{name: "unicode", check: exactStdout(unicodeOut)},
	{name: "limit", request: func(r *executor.Request) {
		r.Limits = executor.Limits{WallTime: 2 * time.Second, MemoryBytes: 128 << 20}
	}, check: func(res *executor.Result) string {
		switch {
		case res.Status == executor.StatusTimeout:
		case res.Status == executor.StatusRuntimeError && (res.LimitReason == string(sandbox.LimitMemory) || res.LimitReason == string(sandbox.LimitCPUTime) || res.LimitReason == string(sandbox.LimitWallTime)):
		default:
			return "want a timeout or the memory or CPU limit"
		}
		return ""
	}},
}

// summary is one row of the table.
type summary struct {
	name, version  string
	passed, total  int
	cold, warm     time.Duration
	failed         []string
	defaultVersion bool
}

// programsDir holds the programs; programFor finds one case's file for
// entry lang at version.
const programsDir = "programs"

func programFor(lang *executor.Language, version, name string) ([]byte, string, error) {
	ext := filepath.Ext(strings.NewReplacer("{main}", "main").Replace(lang.Source))
	file := name + ext
	dirs := []string{filepath.Join(programsDir, lang.Name)}
	// Version-specific directories, the longest prefix last (it wins).
	overrides, _ := filepath.Glob(filepath.Join(programsDir, lang.Name+"@*"))
	sort.Slice(overrides, func(i, j int) bool { return len(overrides[i]) < len(overrides[j]) })
	for _, d := range overrides {
		prefix := strings.TrimPrefix(filepath.Base(d), lang.Name+"@")
		if version == prefix || strings.HasPrefix(version, prefix+".") || strings.HasPrefix(version, prefix+"-") {
			dirs = append(dirs, d)
		}
	}
	var code []byte
	var from string
	for _, d := range dirs {
		p := filepath.Join(d, file)
		if b, err := os.ReadFile(p); err == nil {
			code, from = b, p
		}
	}
	if code == nil {
		return nil, "", fmt.Errorf("no program %s in %s", file, strings.Join(dirs, " or "))
	}
	return code, from, nil
}

func run(t *testing.T, lang *executor.Language, version string, code []byte, c conformanceCase) (*executor.Result, time.Duration) {
	req := &executor.Request{Language: lang.Name, Version: version, Code: code, Isolation: isolation}
	if c.request != nil {
		c.request(req)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	start := time.Now()
	res, err := testExec.Execute(ctx, req)
	took := time.Since(start)
	if err != nil {
		t.Fatalf("%s: %v", c.name, err)
	}
	return res, took
}

func describe(res *executor.Result) string {
	var b bytes.Buffer
	fmt.Fprintf(&b, "status %s exit %d signal %q limit %q error %q\nstdout %q\nstderr %q", res.Status, res.ExitCode, res.Signal, res.LimitReason, res.Error, clip(res.Stdout), clip(res.Stderr))
	if res.Compile != nil {
		fmt.Fprintf(&b, "\ncompile: status %s stdout %q stderr %q", res.Compile.Status, clip(res.Compile.Stdout), clip(res.Compile.Stderr))
	}
	return b.String()
}

func clip(s string) string {
	if len(s) > 600 {
		return s[:600] + "..."
	}
	return s
}

// entryRun is one available entry under test.
type entryRun struct {
	lang     *executor.Language
	version  string
	programs map[string][]byte
	row      *summary
	mu       sync.Mutex
}

func (e *entryRun) record(name, failure string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.row.total++
	if failure == "" {
		e.row.passed++
	} else {
		e.row.failed = append(e.row.failed, name)
	}
}

// TestConformance runs every case for every available entry. First, one
// entry after the other, hello twice (cold, then warm: the timings of the
// table, taken on an idle machine); then every other case of every entry
// side by side (-parallel, default 6 here: most of the time is programs
// waiting for their 2 s limit).
func TestConformance(t *testing.T) {
	reg := testExec.Registry()
	var runs []*entryRun
	for _, lang := range reg.Languages() {
		tc := reg.Toolchain(lang)
		if tc.Err != nil {
			t.Logf("%s (%s): not available: %v", lang.Name, lang.Toolchain[0], tc.Err)
			continue
		}
		def, _ := reg.Lookup(lang.Name)
		e := &entryRun{lang: lang, version: tc.Version, programs: map[string][]byte{},
			row: &summary{name: lang.Name, version: tc.Version, defaultVersion: def == lang}}
		t.Run(lang.Name+"@"+tc.Version, func(t *testing.T) {
			runs = append(runs, e)
			// The entry must be the one its version selects.
			if got, gtc, err := reg.Resolve(lang.Name, tc.Version); err != nil || got != lang {
				t.Fatalf("version %q selects another entry (%v, %v): give each entry of %s its own version", tc.Version, gtc, err, lang.Name)
			}
			for _, c := range cases {
				if c.compiledOnly && !lang.Compiled() {
					continue
				}
				code, _, err := programFor(lang, tc.Version, c.name)
				if err != nil {
					t.Errorf("%s: %v", c.name, err)
					e.record(c.name, "missing")
					continue
				}
				e.programs[c.name] = code
			}
			code, ok := e.programs["hello"]
			if !ok {
				return
			}
			res, cold := run(t, lang, tc.Version, code, cases[0])
			e.row.cold = cold
			msg := cases[0].check(res)
			e.record("hello", msg)
			if msg != "" {
				t.Errorf("hello (cold): %s\n%s", msg, describe(res))
			}
			res, e.row.warm = run(t, lang, tc.Version, code, cases[0])
			if res.Isolation != isolation && isolation != executor.IsolationNative {
				t.Errorf("ran with isolation %q, want %q", res.Isolation, isolation)
			}
			if res.Language != lang.Name || res.Version != tc.Version {
				t.Errorf("ran %s %s, want %s %s", res.Language, res.Version, lang.Name, tc.Version)
			}
		})
	}
	t.Run("cases", func(t *testing.T) {
		for _, e := range runs {
			t.Run(e.lang.Name+"@"+e.version, func(t *testing.T) {
				t.Parallel()
				for _, c := range cases[1:] {
					code, ok := e.programs[c.name]
					if !ok {
						continue
					}
					t.Run(c.name, func(t *testing.T) {
						t.Parallel()
						res, _ := run(t, e.lang, e.version, code, c)
						msg := c.check(res)
						e.record(c.name, msg)
						if msg != "" {
							t.Errorf("%s\n%s", msg, describe(res))
						}
					})
				}
			})
		}
	})
	var rows []*summary
	for _, e := range runs {
		rows = append(rows, e.row)
	}
	table := summaryTable(rows)
	t.Logf("summary:\n%s", table)
	if os.Getenv("UPDATE_LANGUAGES_DOC") != "" {
		if err := writeDoc(table, rows); err != nil {
			t.Error(err)
		}
	}
}

func summaryTable(rows []*summary) string {
	var b bytes.Buffer
	tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "LANGUAGE\tVERSION\tPASSED\tCOLD HELLO\tWARM HELLO\tFAILED")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%d/%d\t%s\t%s\t%s\n", r.name, versionLabel(r), r.passed, r.total, ms(r.cold), ms(r.warm), strings.Join(r.failed, " "))
	}
	tw.Flush()
	return b.String()
}

func versionLabel(r *summary) string {
	if r.defaultVersion {
		return r.version + " (default)"
	}
	return r.version
}

func ms(d time.Duration) string {
	if d == 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f ms", float64(d)/float64(time.Millisecond))
}

// writeDoc writes docs/LANGUAGES.md: the static text and the table.
func writeDoc(_ string, rows []*summary) error {
	var b bytes.Buffer
	b.WriteString(docHeader)
	fmt.Fprintf(&b, "Measured on %s by `UPDATE_LANGUAGES_DOC=1 go test -count=1 -tags conformance ./test/conformance`"+
		" (%d language/version pairs; cold = first run, with the compile; warm = the same program again, from the compile cache).\n\n", time.Now().UTC().Format("2006-01-02"), len(rows))
	b.WriteString("| language | version | cases passed | cold hello | warm hello |\n|---|---|---|---|---|\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "| %s | %s | %d/%d | %s | %s |\n", r.name, versionLabel(r), r.passed, r.total, ms(r.cold), ms(r.warm))
	}
	return os.WriteFile(filepath.Join("..", "..", "docs", "LANGUAGES.md"), b.Bytes(), 0o644)
}

const docHeader = `# Languages

Languages are data: each is an entry of pkg/executor/languages.yaml or of a
fragment in pkg/executor/languages.d/*.yaml (embedded in the binary; a user
file given with --languages adds more). Several entries may share a name, one
per toolchain: they are the versions of that language. A request picks one
with "version" (API) or --version (CLI), by prefix ("3.12" runs 3.12.1;
"nightly" matches rustc's 1.97.0-nightly); without it the entry marked
` + "`default: true`" + ` runs (else the first installed). ` + "`GET /api/sandbox/languages`" + ` and
` + "`sandbox-run languages --output-format json`" + ` list each language once, the
default version's fields at the top and every version under "versions".

Toolchains come from Debian's packages (scripts/install-languages.sh: edit
its PACKAGES list), pyenv (~/.pyenv/versions: Python 2.7 and 3.6 to 3.13) and
rustup (stable and nightly), plus Temurin 25 beside OpenJDK 17.

## Adding a language or a version

1. Add an entry to a fragment in pkg/executor/languages.d/ (fields: see the
   top of languages.yaml). Another version of an existing language is an entry
   with the same name and its own toolchain path.
2. Add its Debian package to scripts/install-languages.sh.
3. Put its programs in test/conformance/programs/<name>/, one file per case,
   named by the case and the source extension: hello (prints
   "Hello, World!"), stdin (echoes stdin), args (one argument a line), exit3,
   runtime_error (non-zero exit and a message on stderr), compile_error
   (compiled languages), files (input.txt uppercased into output.txt), unicode
   (prints "héllo wörld ✓ 日本"), limit (never ends). A directory
   <name>@<version prefix>/ overrides files for those versions.
4. ` + "`go test -count=1 -tags conformance -v ./test/conformance`" + `: every available
   entry must pass every case; an entry without its programs fails.

## Conformance

`
