//go:build unix

package main

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// bench --suite makes every comparison of docs/BENCHMARKS.md in one run,
// each against baselines measured in the same run:
//
//  1. api: bash true and echo hi through the HTTP API against fork/exec of
//     bash -c and of /bin/true, sequentially and with each -clients count
//     (bench --api's measurements).
//  2. interp: python and node hello through the API against the same
//     interpreter run plainly.
//  3. compile: a compiled hello (go, rust, java, cpp) first with a new
//     program (a cold compile), then as identical requests (compile cache
//     hits once the executor has a cache).
//  4. docker: /bin/true and python hello under "docker run" against the
//     sandbox, when a docker engine answers (bench_docker.go).
//  5. memory: the RSS of a "sandbox-run serve" process idle and with -jobs
//     async executions queued (bench_memory.go).

func init() { benchSuite = runBenchSuite }

type benchSuiteReport struct {
	Host    map[string]string   `json:"host"`
	Date    string              `json:"date"`
	Server  string              `json:"server"`
	Parts   []string            `json:"parts"`
	API     *benchAPIReport     `json:"api,omitempty"`
	Interp  *benchInterpReport  `json:"interpreters,omitempty"`
	Compile *benchCompileReport `json:"compile,omitempty"`
	Docker  *benchDockerReport  `json:"docker,omitempty"`
	Memory  *benchMemReport     `json:"memory,omitempty"`
	Targets []benchTarget       `json:"targets"`
	Errors  int                 `json:"errors"`
	Seconds float64             `json:"seconds"`
}

func runBenchSuite(o *benchOptions) int {
	start := time.Now()
	b, code := startBenchServer(o)
	if b == nil {
		return code
	}
	defer b.close()
	rep := &benchSuiteReport{Host: benchHost(b.engine), Date: start.UTC().Format(time.RFC3339), Server: b.desc, Parts: o.parts}
	progress := func(format string, a ...any) {
		if o.format == "text" {
			fmt.Fprintf(os.Stderr, "bench --suite: "+format+"\n", a...)
		}
	}
	progress("%s", b.desc)
	for _, part := range o.parts {
		t := time.Now()
		progress("part %s...", part)
		switch part {
		case "api":
			if rep.API, code = measureBenchAPI(o, b); rep.API == nil {
				return code
			}
			rep.Targets = append(rep.Targets, rep.API.Targets...)
			rep.Errors += rep.API.errors()
		case "interp":
			rep.Interp = measureBenchInterp(o, b)
			rep.Targets = append(rep.Targets, rep.Interp.Targets...)
			for _, r := range rep.Interp.Rows {
				rep.Errors += r.Errors
			}
		case "compile":
			rep.Compile = measureBenchCompile(o, b)
			rep.Targets = append(rep.Targets, rep.Compile.Targets...)
			for _, r := range rep.Compile.Rows {
				rep.Errors += r.Errors
			}
		case "docker":
			rep.Docker = measureBenchDocker(o, b)
			for _, r := range rep.Docker.Rows {
				rep.Errors += r.Errors
			}
			if rep.Docker.Error != "" {
				rep.Errors++
			}
		case "memory":
			rep.Memory = measureBenchMemory(o)
			rep.Targets = append(rep.Targets, rep.Memory.Targets...)
			if rep.Memory.Error != "" {
				rep.Errors++
			}
			rep.Errors += rep.Memory.Refused
		}
		progress("part %s done in %.0fs", part, time.Since(t).Seconds())
	}
	rep.Seconds = time.Since(start).Seconds()
	return benchEnd(o.format, rep, func(w io.Writer) { printBenchSuite(w, rep) }, rep.Errors > 0)
}

// ---- 2. interpreters -------------------------------------------------------

type benchInterpReport struct {
	N       int           `json:"n"`
	Warmup  int           `json:"warmup"`
	Rows    []benchRow    `json:"rows"`
	Targets []benchTarget `json:"targets"`
	Notes   []string      `json:"notes,omitempty"`
}

// benchInterps are the interpreted hello worlds: through the API, and the
// same interpreter run plainly.
var benchInterps = []struct {
	lang, code string
	argv       []string
}{
	{"python", `print("hello")`, []string{"/usr/bin/python3", "-c", `print("hello")`}},
	{"javascript", `console.log("hello")`, []string{"/usr/bin/node", "-e", `console.log("hello")`}},
}

func measureBenchInterp(o *benchOptions, b *benchServer) *benchInterpReport {
	rep := &benchInterpReport{N: o.interpN, Warmup: min(o.warmup, 10)}
	var variants []*benchVariant
	type pair struct{ plain, api *benchVariant }
	var pairs []pair
	for _, in := range benchInterps {
		if _, err := os.Stat(in.argv[0]); err != nil {
			rep.Notes = append(rep.Notes, fmt.Sprintf("%s skipped: %s not found", in.lang, in.argv[0]))
			continue
		}
		body, _ := json.Marshal(map[string]string{"language": in.lang, "code": in.code})
		p := pair{
			plain: &benchVariant{name: "fork/exec " + strings.Join(benchQuote(in.argv), " "), run: benchPlain(in.argv, "hello\n")},
			api:   &benchVariant{name: "API " + in.lang + " hello", run: b.execute(body, "hello\n")},
		}
		pairs = append(pairs, p)
		variants = append(variants, p.plain, p.api)
	}
	benchInterleave(variants, rep.N, rep.Warmup, 0, 0, mrand.New(mrand.NewPCG(3, 4)))
	for _, p := range pairs {
		plain, apiRow := benchRowOf(p.plain), benchRowOf(p.api)
		t := benchTarget{Target: p.api.name + " within 2 ms of " + p.plain.name + " at p50", Limit: 2, Unit: "ms"}
		if plain.Runs > 0 && apiRow.Runs > 0 {
			apiRow.DeltaMS = apiRow.P50 - plain.P50
			apiRow.VsFork = apiRow.P50 / plain.P50
			t.Known, t.Value, t.Met = true, apiRow.DeltaMS, apiRow.DeltaMS <= 2 && apiRow.Errors == 0
		}
		rep.Rows = append(rep.Rows, plain, apiRow)
		rep.Targets = append(rep.Targets, t)
	}
	return rep
}

// benchPlain runs argv with bench's environment, checking that it exits 0
// and prints want.
func benchPlain(argv []string, want string) func() (time.Duration, error) {
	return func() (time.Duration, error) {
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Env = benchEnv
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		code := 0
		if err := cmd.Run(); err != nil {
			if cmd.ProcessState == nil {
				return 0, err
			}
			code = cmd.ProcessState.ExitCode()
		}
		return 0, benchCheck(code, "", []byte(stdout.String()), []byte(stderr.String()), want)
	}
}

// benchQuote quotes the arguments a shell would need quoted, for row names.
func benchQuote(argv []string) []string {
	out := make([]string, len(argv))
	for i, a := range argv {
		if strings.ContainsAny(a, " \"'()$;") {
			a = "'" + a + "'"
		}
		out[i] = a
	}
	return out
}

// ---- 3. compile cache ----------------------------------------------------

// benchCompiled are the compiled hello worlds; %s is a comment that makes
// each cold program new.
var benchCompiled = []struct{ lang, code string }{
	{"go", "package main\n\nimport \"fmt\"\n\n// %s\nfunc main() { fmt.Println(\"hello\") }\n"},
	{"rust", "// %s\nfn main() {\n    println!(\"hello\");\n}\n"},
	{"java", "// %s\npublic class Main {\n    public static void main(String[] args) {\n        System.out.println(\"hello\");\n    }\n}\n"},
	{"cpp", "#include <iostream>\n\n// %s\nint main() {\n    std::cout << \"hello\\n\";\n}\n"},
}

type benchCompileRow struct {
	Language string `json:"language"`
	// Cold: requests with a program never compiled before.
	Cold          int     `json:"cold_runs"`
	ColdMS        float64 `json:"cold_p50_ms"`
	ColdCompileMS float64 `json:"cold_compile_p50_ms"` // the compile step's duration_ms
	// Hit: identical requests repeating the program of the cold one.
	Hits         int     `json:"hit_runs"`
	HitMS        float64 `json:"hit_p50_ms"`
	HitMinMS     float64 `json:"hit_min_ms"`
	HitMaxMS     float64 `json:"hit_max_ms"`
	HitCompileMS float64 `json:"hit_compile_p50_ms"`
	// Ratio is HitMS / ColdMS: what a repeated request costs against one
	// that compiles.
	Ratio float64 `json:"ratio_hit_vs_cold"`
	// The compile step's cache_hit flag as the answers gave it: how many
	// said true, false, or had no flag (a server without a compile cache),
	// and how many had no compile step at all.
	ColdFlag benchFlagCount `json:"cold_cache_hit"`
	HitFlag  benchFlagCount `json:"hit_cache_hit"`

	Errors     int    `json:"errors"`
	FirstError string `json:"first_error,omitempty"`
}

type benchFlagCount struct {
	True      int `json:"true"`
	False     int `json:"false"`
	NoFlag    int `json:"no_flag"`
	NoCompile int `json:"no_compile_step"`
}

func (c *benchFlagCount) add(a *benchAnswer) {
	switch {
	case a.Compile == nil:
		c.NoCompile++
	case a.Compile.CacheHit == nil:
		c.NoFlag++
	case *a.Compile.CacheHit:
		c.True++
	default:
		c.False++
	}
}

func (c benchFlagCount) String() string {
	var parts []string
	for _, p := range []struct {
		n    int
		what string
	}{{c.True, "true"}, {c.False, "false"}, {c.NoFlag, "absent"}, {c.NoCompile, "no compile step"}} {
		if p.n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", p.n, p.what))
		}
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ", ")
}

type benchCompileReport struct {
	Rounds  int               `json:"rounds"`
	Repeats int               `json:"repeats"`
	Rows    []benchCompileRow `json:"rows"`
	Targets []benchTarget     `json:"targets"`
	Notes   []string          `json:"notes,omitempty"`
}

// benchNonce is a random comment that no compile cache has seen.
func benchNonce() string {
	b := make([]byte, 12)
	rand.Read(b)
	return "bench " + hex.EncodeToString(b)
}

func measureBenchCompile(o *benchOptions, b *benchServer) *benchCompileReport {
	rep := &benchCompileReport{Rounds: o.compileRounds, Repeats: o.compileRepeats}
	type acc struct {
		row                    benchCompileRow
		cold, coldC, hit, hitC []time.Duration
	}
	accs := make([]*acc, len(benchCompiled))
	for i, c := range benchCompiled {
		accs[i] = &acc{row: benchCompileRow{Language: c.lang}}
	}
	ms := func(v float64) time.Duration { return time.Duration(v * float64(time.Millisecond)) }
	fail := func(a *acc, err error) {
		a.row.Errors++
		if a.row.FirstError == "" {
			a.row.FirstError = err.Error()
		}
	}
	// Round by round, each language in turn: a new program, then the
	// same request again -compile-repeats times.
	for round := 0; round < o.compileRounds; round++ {
		for i, c := range benchCompiled {
			a := accs[i]
			body, _ := json.Marshal(map[string]string{"language": c.lang, "code": fmt.Sprintf(c.code, benchNonce())})
			t := time.Now()
			ans, err := b.answer(body, "hello\n")
			el := time.Since(t)
			if err != nil {
				fail(a, fmt.Errorf("cold: %w", err))
				continue
			}
			a.row.ColdFlag.add(ans)
			a.cold = append(a.cold, el)
			if ans.Compile != nil {
				a.coldC = append(a.coldC, ms(ans.Compile.DurationMs))
			}
			for range o.compileRepeats {
				t := time.Now()
				ans, err := b.answer(body, "hello\n")
				el := time.Since(t)
				if err != nil {
					fail(a, fmt.Errorf("repeat: %w", err))
					continue
				}
				a.row.HitFlag.add(ans)
				a.hit = append(a.hit, el)
				if ans.Compile != nil {
					a.hitC = append(a.hitC, ms(ans.Compile.DurationMs))
				}
			}
		}
	}
	p50 := func(d []time.Duration) float64 {
		if len(d) == 0 {
			return 0
		}
		d = slices.Clone(d)
		slices.Sort(d)
		return benchMS(benchPercentile(d, 50))
	}
	for _, a := range accs {
		r := a.row
		r.Cold, r.Hits = len(a.cold), len(a.hit)
		r.ColdMS, r.ColdCompileMS, r.HitMS, r.HitCompileMS = p50(a.cold), p50(a.coldC), p50(a.hit), p50(a.hitC)
		if len(a.hit) > 0 {
			r.HitMinMS, r.HitMaxMS = benchMS(slices.Min(a.hit)), benchMS(slices.Max(a.hit))
		}
		t := benchTarget{Target: r.Language + ": identical request within 10% of a cold compile's time (p50 hit / p50 cold)", Limit: 0.10, Unit: "ratio"}
		if r.ColdMS > 0 && r.HitMS > 0 {
			r.Ratio = r.HitMS / r.ColdMS
			t.Known, t.Value, t.Met = true, r.Ratio, r.Ratio < 0.10 && r.Errors == 0
		}
		if r.ColdFlag.True > 0 {
			rep.Notes = append(rep.Notes, fmt.Sprintf("%s: %d cold request(s) said cache_hit true for a program never sent before", r.Language, r.ColdFlag.True))
		}
		rep.Rows = append(rep.Rows, r)
		rep.Targets = append(rep.Targets, t)
	}
	return rep
}

// ---- printing ----------------------------------------------------------

func printBenchSuite(w io.Writer, r *benchSuiteReport) {
	printBenchHost(w, r.Host)
	fmt.Fprintf(w, "date: %s; server: %s\nparts: %s\n", r.Date, r.Server, strings.Join(r.Parts, ", "))
	section := func(title string) { fmt.Fprintf(w, "\n=== %s\n\n", title) }
	if r.API != nil {
		section("1. bash true and echo hi through the HTTP API (bench --api)")
		printBenchAPI(w, r.API)
	}
	if in := r.Interp; in != nil {
		section("2. python and node hello through the API against the same interpreter unsandboxed")
		fmt.Fprintf(w, "%d measured (+%d warm-up) runs of each row, interleaved in an order shuffled per round\n\n", in.N, in.Warmup)
		printBenchRows(w, in.Rows, true)
		for _, n := range in.Notes {
			fmt.Fprintln(w, "note:", n)
		}
	}
	if c := r.Compile; c != nil {
		section("3. compiled hello: a new program (cold compile) against identical requests (compile cache)")
		fmt.Fprintf(w, "%d round(s) per language: one request with a never-seen comment, then %d identical requests; request times in ms\n\n", c.Rounds, c.Repeats)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "language\tcold runs\tcold p50\tcold compile p50\trepeat runs\trepeat p50\trepeat min-max\trepeat compile p50\trepeat/cold\tcache_hit (cold)\tcache_hit (repeats)\terrors\t")
		for _, row := range c.Rows {
			fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%d\t%s\t%s-%s\t%s\t%s\t%s\t%s\t%d\t\n", row.Language, row.Cold, benchCell(row.ColdMS), benchCell(row.ColdCompileMS),
				row.Hits, benchCell(row.HitMS), benchCell(row.HitMinMS), benchCell(row.HitMaxMS), benchCell(row.HitCompileMS),
				benchPct(row.Ratio), row.ColdFlag, row.HitFlag, row.Errors)
		}
		tw.Flush()
		for _, row := range c.Rows {
			if row.Errors > 0 {
				fmt.Fprintf(w, "errors in %s: %d, first: %s\n", row.Language, row.Errors, row.FirstError)
			}
		}
		for _, n := range c.Notes {
			fmt.Fprintln(w, "note:", n)
		}
	}
	if d := r.Docker; d != nil {
		section("4. docker run against the sandbox")
		printBenchDocker(w, d)
	}
	if m := r.Memory; m != nil {
		section("5. the server's memory (RSS of a sandbox-run serve process)")
		printBenchMemory(w, m)
	}
	section("targets")
	for _, t := range r.Targets {
		fmt.Fprintf(w, "  %-100s %-12s %s\n", t.Target, benchTargetValue(t), t.state())
	}
	fmt.Fprintf(w, "\nerrors: %d; %.0f s in all\n", r.Errors, r.Seconds)
}

// benchPct is a ratio as a percentage, or "-".
func benchPct(v float64) string {
	if v > 0 {
		return fmt.Sprintf("%.1f%%", 100*v)
	}
	return "-"
}

// benchTargetValue is a target's value with its unit and limit.
func benchTargetValue(t benchTarget) string {
	if !t.Known {
		return "-"
	}
	switch t.Unit {
	case "ms":
		return fmt.Sprintf("%+.2f ms", t.Value)
	case "x":
		return fmt.Sprintf("%.2fx", t.Value)
	case "ratio":
		return benchPct(t.Value)
	case "MB":
		return fmt.Sprintf("%.1f MB", t.Value)
	}
	return fmt.Sprintf("%.2f", t.Value)
}
