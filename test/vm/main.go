// Command vm-check drives the real sandbox-run binary end to end as the one
// workload of the throwaway VM of scripts/cgroupv2-vm; scripts/vm-check.sh
// builds both, brings the toolchains in and boots the VM with
// CGV2_LAYOUT=v2, v1 or hybrid. It checks:
//
//   - the CLI (sandbox-run doctor and execute) in each language the VM was
//     given: exact stdout, stderr and exit status, stdin, arguments, input and
//     output files, a compile step and a compile error, and the limits (wall
//     time, CPU time, memory, processes, output) with their exit codes and
//     limit reasons;
//   - the server (sandbox-run serve): readiness, languages, concurrent
//     executions (all checked byte for byte), its cgroups in the hierarchies
//     the layout says, limits, a refused request, a streamed one, /metrics
//     and /readyz after them, and SIGTERM during an execution (which still
//     completes) followed by exit status 0;
//   - after each phase: no process, cgroup or mount left behind.
//
// Each sandbox-run command runs in a cgroup of its own, made by the driver
// as systemd makes a unit's with Delegate=yes (units.go), which must hold
// nothing but the engine's own empty directories once the command is over.
//
// It prints RUN and then PASS or FAIL (or SKIP) for each check with its
// details between them, then a summary and the line VMCHECK-RESULT=PASS or
// VMCHECK-RESULT=FAIL, and exits 1 if any check failed (2 for a usage
// error). Flags take their defaults from the environment (the VM passes
// CGV2_ENV):
//
//	VMCHECK_SANDBOX_RUN  the sandbox-run binary (required)
//	VMCHECK_LAYOUT       v2, v1 or hybrid: the VM's cgroups (default v2); the
//	                     engine must use cgroup v2 on v2, v1 on the others
//	VMCHECK_LANGUAGES    comma-separated, among bash,python,c,javascript (the
//	                     default: all four); the others' checks are skipped
//	VMCHECK_CONCURRENCY  requests sent to the server at once (default 8)
//
// There are no timing assertions: the VM runs under software emulation.
package main

import (
	"flag"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// config is what the flags say.
type config struct {
	bin         string
	layout      string
	languages   []string
	concurrency int
	workDir     string
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == enterArg {
		os.Exit(enterAndExec(os.Args[2:]))
	}
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	var cfg config
	var langs string
	fs := flag.NewFlagSet("vm-check", flag.ContinueOnError)
	fs.StringVar(&cfg.bin, "sandbox-run", os.Getenv("VMCHECK_SANDBOX_RUN"), "the sandbox-run binary")
	fs.StringVar(&cfg.layout, "layout", envOr("VMCHECK_LAYOUT", "v2"), "cgroup layout of the VM: v2, v1 or hybrid")
	fs.StringVar(&langs, "languages", envOr("VMCHECK_LANGUAGES", "bash,python,c,javascript"), "comma-separated languages to check")
	fs.IntVar(&cfg.concurrency, "concurrency", envInt("VMCHECK_CONCURRENCY", 8), "requests sent to the server at once")
	fs.StringVar(&cfg.workDir, "work-dir", "/tmp/vm-check", "scratch directory (created)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	for _, l := range strings.Split(langs, ",") {
		if l = strings.TrimSpace(l); l == "" {
			continue
		}
		if _, known := square[l]; !known {
			fmt.Fprintf(os.Stderr, "vm-check: language %q: want bash, python, c or javascript\n", l)
			return 2
		}
		cfg.languages = append(cfg.languages, l)
	}
	switch {
	case cfg.bin == "":
		fmt.Fprintln(os.Stderr, "vm-check: no sandbox-run binary: set VMCHECK_SANDBOX_RUN or -sandbox-run")
		return 2
	case cfg.layout != "v1" && cfg.layout != "v2" && cfg.layout != "hybrid":
		fmt.Fprintf(os.Stderr, "vm-check: layout %q: want v2, v1 or hybrid\n", cfg.layout)
		return 2
	case cfg.concurrency < 1:
		fmt.Fprintln(os.Stderr, "vm-check: concurrency must be at least 1")
		return 2
	}
	if err := os.MkdirAll(cfg.workDir, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, "vm-check:", err)
		return 2
	}

	s := &suite{start: time.Now()}
	d := &driver{cfg: cfg, s: s}
	var err error
	if d.exe, err = os.Executable(); err != nil {
		fmt.Fprintln(os.Stderr, "vm-check:", err)
		return 2
	}
	d.describeHost()
	if d.unitParents, err = setupUnits(); err != nil {
		fmt.Fprintln(os.Stderr, "vm-check: cannot prepare the units' cgroups:", err)
		fmt.Println("VMCHECK-RESULT=FAIL")
		return 1
	}
	fmt.Printf("vm-check: each sandbox-run command runs in a cgroup of its own under %s\n", strings.Join(d.unitParents, ", "))
	d.base = takeSnapshot()

	s.phase("CLI: sandbox-run doctor and execute")
	d.cliChecks()
	s.run("cli: nothing left behind (processes, cgroups, mounts)", func() error { return d.checkUnits(d.cliUnits) })

	s.phase("server: sandbox-run serve")
	d.serverChecks()

	return s.summary()
}

// engineVersion is the cgroup version the engine must use in the layout:
// v2 on pure v2, v1 on v1 and on hybrid (whose cgroup2 has no controllers).
func (d *driver) engineVersion() string {
	if d.cfg.layout == "v2" {
		return "v2"
	}
	return "v1"
}

// has says whether the language is among those to check.
func (d *driver) has(lang string) bool { return slices.Contains(d.cfg.languages, lang) }

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

func envInt(key string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(key)); err == nil {
		return n
	}
	return def
}

// suite prints and counts the checks.
type suite struct {
	start                   time.Time
	passed, failed, skipped int
	failures, notes         []string
}

func (s *suite) phase(name string) {
	fmt.Printf("\n=== %s (t+%s)\n", name, time.Since(s.start).Round(time.Second))
}

// run runs one check: fn returns nil (PASS) or what was wrong (FAIL).
func (s *suite) run(name string, fn func() error) {
	fmt.Printf("RUN  %s\n", name)
	start := time.Now()
	err := func() (err error) {
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("panic: %v", r)
			}
		}()
		return fn()
	}()
	took := time.Since(start).Round(10 * time.Millisecond)
	if err != nil {
		s.failed++
		s.failures = append(s.failures, name)
		fmt.Printf("FAIL %s (%s)\n%s\n", name, took, indent(err.Error()))
		return
	}
	s.passed++
	fmt.Printf("PASS %s (%s)\n", name, took)
}

func (s *suite) skip(name, why string) {
	s.skipped++
	fmt.Printf("SKIP %s: %s\n", name, why)
}

// note records something worth reporting that is not a failure.
func (s *suite) note(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	s.notes = append(s.notes, msg)
	fmt.Printf("NOTE %s\n", msg)
}

// info prints a detail of the check that is running.
func info(format string, args ...any) {
	fmt.Printf("     %s\n", fmt.Sprintf(format, args...))
}

func (s *suite) summary() int {
	fmt.Printf("\n=== summary (%s in all)\n", time.Since(s.start).Round(time.Second))
	fmt.Printf("vm-check: %d passed, %d failed, %d skipped\n", s.passed, s.failed, s.skipped)
	for _, f := range s.failures {
		fmt.Printf("  failed: %s\n", f)
	}
	for _, n := range s.notes {
		fmt.Printf("  note: %s\n", n)
	}
	if s.failed > 0 || s.passed == 0 {
		fmt.Println("VMCHECK-RESULT=FAIL")
		return 1
	}
	fmt.Println("VMCHECK-RESULT=PASS")
	return 0
}

func indent(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i, l := range lines {
		lines[i] = "     | " + l
	}
	return strings.Join(lines, "\n")
}

// problems collects what a check found wrong.
type problems []string

func (p *problems) addf(format string, args ...any) {
	*p = append(*p, fmt.Sprintf(format, args...))
}

// eq records a mismatch of got and want.
func (p *problems) eq(what string, got, want any) {
	if got != want {
		p.addf("%s: got %#v, want %#v", what, got, want)
	}
}

// contains records that s lacks sub.
func (p *problems) contains(what, s, sub string) {
	if !strings.Contains(s, sub) {
		p.addf("%s: %q does not contain %q", what, clip(s), sub)
	}
}

func (p problems) err() error {
	if len(p) == 0 {
		return nil
	}
	return fmt.Errorf("%s", strings.Join(p, "\n"))
}

// clip shortens long output for messages.
func clip(s string) string {
	const max = 1500
	if len(s) <= max {
		return s
	}
	return s[:max/2] + fmt.Sprintf("...[%d bytes]...", len(s)-max) + s[len(s)-max/2:]
}
