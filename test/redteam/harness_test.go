// Package redteam is the adversarial suite: one hostile program per attack
// class of SECURITY.md, each run through the real executor with every
// protection on, each with the safe outcome it must end in. Every case
// runs beside a benign canary that must finish correctly, and afterwards
// no process, cgroup, mount or temporary directory of the run may remain.
//
// Never run these programs outside the sandbox.
package redteam

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandbox-run/sandbox-run/internal/testkit/leakcheck"
	"github.com/sandbox-run/sandbox-run/pkg/executor"
	"github.com/sandbox-run/sandbox-run/pkg/gvisor"
	"github.com/sandbox-run/sandbox-run/pkg/live/agent"
	"github.com/sandbox-run/sandbox-run/pkg/sandbox"
)

// redCase is one attack and the outcome the sandbox must produce.
type redCase struct {
	name     string // class/what, e.g. "resources/fork-bomb-c"
	language string
	program  string // file under programs/
	stdin    string
	args     []string
	files    map[string]string
	limits   executor.Limits
	// Expectations: a zero field is not checked.
	status executor.Status
	limit  string // limit_reason
	// stdout must contain each of these (e.g. "EPERM" markers the
	// program prints) and none of notStdout.
	stdout    []string
	notStdout []string
	// check may assert anything else, with the host-side context.
	check func(t *testing.T, res *executor.Result)
	// setup runs on the host before the attack (e.g. starts a listener);
	// its cleanup is registered with t.Cleanup.
	setup func(t *testing.T, c *redCase)
}

var (
	casesMu sync.Mutex
	cases   []redCase
)

// register adds cases; each case file calls it from init.
func register(cs ...redCase) {
	casesMu.Lock()
	cases = append(cases, cs...)
	casesMu.Unlock()
}

var (
	testExec   *executor.Executor
	testEngine *sandbox.Engine
	testGVisor *gvisor.Runner // with isolation gvisor
	dataDir    string
	privateTmp string // this binary's TMPDIR (leakcheck.PrivateTempDir)
)

// isolation is the wall every attack meets: SANDBOX_RUN_ISOLATION=gvisor
// runs the suite under gVisor (as CI does, beside the native run); "":
// the engine's. The canaries beside each attack run on the engine.
var isolation = os.Getenv("SANDBOX_RUN_ISOLATION")

func TestMain(m *testing.M) {
	agent.Main()      // a live sandbox's agent is this binary (cases_live_test.go)
	gvisor.ShimMain() // and a gVisor sandbox booted ahead's first program
	sandbox.Init()    // the sandbox's PID 1 is this binary re-executed
	flag.Parse()
	os.Exit(run(m))
}

func run(m *testing.M) int {
	// Everything the executor and this binary put in the temporary
	// directory lands in one of our own, where the leak checks may count
	// every entry; the host's /tmp is shared with every other program.
	tmp, cleanup, err := leakcheck.PrivateTempDir("sr-redteam")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer cleanup()
	privateTmp = tmp
	if dataDir, err = os.MkdirTemp("", "sandbox-run-redteam-"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dataDir)
	home, _ := os.UserHomeDir()
	cache := filepath.Join(home, ".cache", "sandbox-run-test", "cache")
	os.MkdirAll(cache, 0o755)
	// A uid range of our own: the leak checks then see only our runs.
	lo, hi := sandboxUIDs()
	if testEngine, err = sandbox.New(sandbox.Config{UIDBase: lo, UIDSlots: (hi - lo) / 2}); err != nil {
		fmt.Fprintln(os.Stderr, "this host cannot sandbox:", err)
		return 1
	}
	if dir := flag.Lookup("test.gocoverdir"); dir != nil {
		testEngine.EnableInitCoverage(dir.Value.String())
	}
	cfg := executor.Config{DataDir: dataDir, CacheDir: cache, Engine: testEngine}
	if isolation == executor.IsolationGVisor {
		if testGVisor, err = gvisor.New(gvisor.Config{Dir: filepath.Join(dataDir, "gvisor"), Pool: 2}); err != nil {
			fmt.Fprintln(os.Stderr, "gVisor:", err)
			return 1
		}
		cfg.GVisor = testGVisor
	}
	if testExec, err = executor.New(cfg); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer testExec.Close()
	// Pooled sandboxes end on their own (-cover builds of PID 1 write
	// their counters then).
	defer testEngine.Close()
	return m.Run()
}

// TestRedTeam runs every registered attack.
func TestRedTeam(t *testing.T) {
	casesMu.Lock()
	all := append([]redCase(nil), cases...)
	casesMu.Unlock()
	sort.Slice(all, func(i, j int) bool { return all[i].name < all[j].name })
	if len(all) == 0 {
		t.Fatal("no red-team cases registered")
	}
	for i := range all {
		c := all[i]
		t.Run(c.name, func(t *testing.T) { runCase(t, &c) })
	}
}

// canaryCode is a benign program that must finish correctly beside every
// attack.
const canaryCode = "print(sum(range(100000)))"

func runCase(t *testing.T, c *redCase) {
	if f := gvisorExpect[c.name]; f != nil && isolation == executor.IsolationGVisor {
		f(c)
	}
	if c.setup != nil {
		c.setup(t, c)
	}
	code, err := os.ReadFile(filepath.Join("programs", c.program))
	if err != nil {
		t.Fatalf("program %s: %v", c.program, err)
	}
	before := snapshot()
	req := &executor.Request{Language: c.language, Code: code, Args: c.args, Limits: c.limits, Isolation: isolation}
	if c.stdin != "" {
		req.Stdin = strings.NewReader(c.stdin)
	}
	for name, data := range c.files {
		req.Files = append(req.Files, sandbox.File{Path: name, Data: []byte(data)})
	}
	if req.Limits.WallTime == 0 {
		req.Limits.WallTime = 10 * time.Second
	}

	// Benign canaries run, one after another, for the whole of the attack:
	// every one must finish correctly, and (unless the attack's program was
	// over at once) one must have started once the program ran, after its
	// compile, so that the check proves the neighbour survived the attack
	// itself, not its compiler.
	type canaryRun struct {
		start time.Time
		res   *executor.Result
		err   error
	}
	var canaries []canaryRun
	attackDone := make(chan struct{})
	canariesDone := make(chan struct{})
	go func() {
		defer close(canariesDone)
		for {
			start := time.Now()
			r, err := testExec.Execute(context.Background(), &executor.Request{Language: "python", Code: []byte(canaryCode)})
			canaries = append(canaries, canaryRun{start, r, err})
			select {
			case <-attackDone:
				return
			case <-time.After(20 * time.Millisecond): // pacing, not synchronisation
			}
		}
	}()
	began := time.Now()
	res, err := testExec.Execute(context.Background(), req)
	ended := time.Now()
	close(attackDone)
	<-canariesDone
	if err != nil {
		t.Fatalf("execute: %v", err)
	}
	if res.Isolation != isolation && isolation != executor.IsolationNative {
		t.Errorf("ran with isolation %q, want %q", res.Isolation, isolation)
	}
	t.Logf("status=%s exit=%d signal=%s limit=%s stdout=%.300q stderr=%.300q", res.Status, res.ExitCode, res.Signal, res.LimitReason, res.Stdout, res.Stderr)
	for _, cr := range canaries {
		if cr.err != nil || cr.res.Status != executor.StatusCompleted || cr.res.Stdout != "4999950000\n" {
			t.Errorf("a canary beside the attack failed: %v %+v", cr.err, cr.res)
		}
	}
	program := began
	if res.Compile != nil {
		program = began.Add(time.Duration(res.Compile.DurationMs * float64(time.Millisecond)))
	}
	overlapped := false
	for _, cr := range canaries {
		overlapped = overlapped || (!cr.start.Before(program) && cr.start.Before(ended))
	}
	if ended.Sub(program) > 500*time.Millisecond && !overlapped {
		t.Errorf("no canary started while the attack's program ran (%v to %v after it began): the neighbour's check proves nothing",
			program.Sub(began), ended.Sub(began))
	}
	if c.status != "" && res.Status != c.status {
		t.Errorf("status %s, want %s", res.Status, c.status)
	}
	if c.limit != "" && res.LimitReason != c.limit {
		t.Errorf("limit_reason %q, want %q", res.LimitReason, c.limit)
	}
	for _, want := range c.stdout {
		if !strings.Contains(res.Stdout, want) {
			t.Errorf("stdout lacks %q", want)
		}
	}
	for _, bad := range c.notStdout {
		if strings.Contains(res.Stdout, bad) {
			t.Errorf("stdout has %q", bad)
		}
	}
	if c.check != nil {
		c.check(t, res)
	}
	if left := leftovers(before); len(left) > 0 {
		t.Errorf("left behind: %v", left)
	}
}

// hostState is what a run must not change on the host: the entries of
// this binary's private TMPDIR (all ours), the host /tmp entries a run
// could have made (leakcheck.HostTemp: owned by our sandbox uids), and the
// mounts of our mount namespace but those of other programs' temporary
// directories (other test binaries mount tmpfs in theirs).
type hostState struct {
	tmp    map[string]string
	mounts int
}

func snapshot() hostState {
	lo, hi := sandboxUIDs()
	s := hostState{tmp: leakcheck.HostTemp(lo, hi)}
	for name, why := range leakcheck.Entries(privateTmp) {
		s.tmp[filepath.Join(privateTmp, name)] = why
	}
	mi, _ := os.ReadFile("/proc/self/mountinfo")
	for _, line := range strings.Split(string(mi), "\n") {
		// runsc mounts an empty network namespace in its state directory
		// for each sandbox it boots (gVisor's pool boots them between
		// runs); the runner unmounts them all at Close.
		if f := strings.Fields(line); len(f) > 4 && !othersTemp(f[4]) && !strings.HasSuffix(f[4], "/null-netns") {
			s.mounts++
		}
	}
	return s
}

// othersTemp tells a path in the host's /tmp outside our private TMPDIR.
func othersTemp(p string) bool {
	in := func(dir string) bool { return p == dir || strings.HasPrefix(p, dir+"/") }
	return in(leakcheck.HostTempDir) && !in(privateTmp)
}

// leftovers lists processes, cgroups, mounts and temporary directories a
// run left (polling briefly: the kernel reaps asynchronously).
func leftovers(before hostState) []string {
	var left []string
	for wait := 10 * time.Millisecond; wait < 3*time.Second; wait *= 2 {
		left = left[:0]
		left = append(left, sandboxProcesses()...)
		left = append(left, runCgroups()...)
		after := snapshot()
		if after.mounts != before.mounts {
			left = append(left, fmt.Sprintf("mounts: %d before, %d after", before.mounts, after.mounts))
		}
		left = append(left, leakcheck.NewIn(before.tmp, after.tmp)...)
		if testGVisor != nil {
			testGVisor.Quiesce()
			left = append(left, testGVisor.Leftovers()...)
		}
		if len(left) == 0 {
			return nil
		}
		time.Sleep(wait)
	}
	return left
}

// sandboxUIDs is the host uid range of this binary's engine: the start of
// its block (leakcheck.UIDBlock), which no other test binary's engine
// uses, so that every process in it is ours.
func sandboxUIDs() (lo, hi int) {
	lo, _ = leakcheck.UIDBlock(leakcheck.BandRedTeam)
	return lo, lo + 2*256
}

// sandboxProcesses lists host processes owned by this engine's sandbox uids.
func sandboxProcesses() []string {
	lo, hi := sandboxUIDs()
	return leakcheck.ProgramProcesses(lo, hi, "")
}

// runCgroups lists run cgroups of this process left under the engine's
// parent cgroups.
func runCgroups() []string {
	testEngine.Quiesce()
	return leakcheck.RunCgroups(testEngine.Cgroups().Parents, os.Getpid())
}
