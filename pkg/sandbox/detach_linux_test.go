package sandbox

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sandbox-run/sandbox-run/internal/testkit/leakcheck"
)

// detachSlots is the number of uid slots of the detach tests' engines.
const detachSlots = 4

// detachEngine is an engine of the uids of test engine k, closed when the
// test ends.
func detachEngine(t *testing.T, k int) *Engine {
	t.Helper()
	e, err := New(Config{UIDBase: testUIDs(k), UIDSlots: detachSlots})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

// startDetachable starts a web server as a live sandbox is started
// (Detachable, streamed, with terminals and a home), serving index.html
// with marker on port, and waits until it listens. The server logs to
// /dev/null: once the run is detached its stderr leads nowhere, and
// writes there fail.
func startDetachable(t *testing.T, e *Engine, port int, marker string) *Process {
	t.Helper()
	p, err := e.Start(context.Background(), detachableSpec(port, marker))
	if err != nil {
		t.Fatal(err)
	}
	awaitServer(t, p, port)
	return p
}

// detachableSpec is the spec startDetachable starts.
func detachableSpec(port int, marker string) *Spec {
	spec := serverSpec(port, marker)
	spec.Args = []string{"/bin/sh", "-c", "exec " + strings.Join(spec.Args, " ") + " 2>/dev/null"}
	spec.Detachable, spec.Stream, spec.PTY, spec.Home = true, true, true, "/home/user"
	return spec
}

// killAtEnd kills the run of d, if it still goes on, when the test ends
// (one that failed halfway).
func killAtEnd(t *testing.T, e *Engine, d *Detached) {
	t.Cleanup(func() {
		if a, err := e.Adopt(d); err == nil {
			a.Kill()
			a.Wait()
		}
	})
}

// awaitEnd waits for an adopted run's Wait, within a bound.
func awaitEnd(t *testing.T, a *Adopted) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- a.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(30 * time.Second):
		t.Fatal("Wait did not return")
		return nil
	}
}

// checkGone checks that nothing of the run of d is left: its cgroups, its
// processes (those of the engine's uids), its uid slot held by engines.
func checkGone(t *testing.T, d *Detached, engines ...*Engine) {
	t.Helper()
	dirs := append(mapValues(d.Sandbox), mapValues(d.Run)...)
	for _, dir := range dirs {
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("cgroup %s left: %v", dir, err)
		}
	}
	lo := engines[0].cfg.UIDBase
	hi := lo + 2*detachSlots
	if !waitUntil(30*time.Second, func() bool { return len(leakcheck.Processes(lo, hi, "")) == 0 }) {
		t.Errorf("processes left: %v", leakcheck.Processes(lo, hi, ""))
	}
	for i, e := range engines {
		slot, _ := e.uidSlot(d.UID)
		if !waitUntil(30*time.Second, func() bool { return slotFree(e, slot) }) {
			t.Errorf("engine %d holds the run's uid slot %d still", i, slot)
		}
	}
}

func mapValues(m map[string]string) []string {
	var out []string
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

func slotFree(e *Engine, slot int) bool {
	e.uids.mu.Lock()
	defer e.uids.mu.Unlock()
	return slices.Contains(e.uids.free, slot)
}

// roundTrip is d through JSON, as a server keeps it over its restart.
func roundTrip(t *testing.T, d *Detached) *Detached {
	t.Helper()
	b, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	var back Detached
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	return &back
}

// TestDetachAdoptInProcess: a detached run goes on without the Process
// that started it (its Wait returns, its engine's Close kills nothing)
// and a new engine takes it over from its record: dials into it, reads
// its use, kills it, and then nothing of it is left and its record adopts
// nothing.
func TestDetachAdoptInProcess(t *testing.T) {
	const port, marker = 8000, "marker-detached"
	e1 := detachEngine(t, 21)
	p := startDetachable(t, e1, port, marker)
	waited := make(chan error, 1)
	go func() {
		_, err := p.Wait()
		waited <- err
	}()
	d, err := p.Detach()
	if err != nil {
		p.Kill()
		t.Fatal(err)
	}
	killAtEnd(t, e1, d)
	select {
	case err := <-waited:
		if err != ErrDetached {
			t.Errorf("Wait of a detached run: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Wait did not return after Detach")
	}
	if _, err := p.Detach(); !errors.Is(err, ErrDetached) {
		t.Errorf("a second Detach: %v", err)
	}
	if _, err := p.DialTCP(context.Background(), port); !errors.Is(err, ErrDetached) {
		t.Errorf("DialTCP after Detach: %v", err)
	}
	if _, err := p.Stats(); !errors.Is(err, ErrDetached) {
		t.Errorf("Stats after Detach: %v", err)
	}
	p.Kill() // does nothing now
	d = roundTrip(t, d)
	if err := e1.Close(); err != nil {
		t.Fatal(err)
	}

	e2 := detachEngine(t, 21)
	bad := *d
	bad.StartTime++
	if _, err := e2.Adopt(&bad); !errors.Is(err, ErrRunEnded) {
		t.Fatalf("adopt with a wrong start time: %v", err)
	}
	a, err := e2.Adopt(d)
	if err != nil {
		t.Fatal(err)
	}
	if body := get(t, a, port, "/index.html"); body != marker {
		t.Fatalf("GET through the adopted run: %q", body)
	}
	s, err := a.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if s.CPU <= 0 || s.Memory <= 0 || s.MemoryPeak < s.Memory || s.Disk <= 0 || s.DiskTotal < 2*(64<<20) {
		t.Errorf("stats of the adopted server: %+v", s)
	}
	if slot, _ := e2.uidSlot(d.UID); slotFree(e2, slot) {
		t.Errorf("the adopting engine may give the run's uid slot %d to another run", slot)
	}

	a.Kill()
	if err := awaitEnd(t, a); err != nil {
		t.Errorf("Wait after Kill: %v", err)
	}
	checkGone(t, d, e1, e2)
	if _, err := a.DialTCP(context.Background(), port); !errors.Is(err, ErrRunEnded) {
		t.Errorf("DialTCP after the end: %v", err)
	}
	if _, err := a.Stats(); !errors.Is(err, ErrRunEnded) {
		t.Errorf("Stats after the end: %v", err)
	}
	if _, err := a.Detach(); !errors.Is(err, ErrRunEnded) {
		t.Errorf("Detach after the end: %v", err)
	}
	if _, err := e2.Adopt(d); !errors.Is(err, ErrRunEnded) {
		t.Errorf("adopt of a run that ended: %v", err)
	}
}

// oldServerEnv configures TestDetachOldServer in the process of its own
// that the tests below start.
const oldServerEnv = "SANDBOX_TEST_OLD_SERVER"

// recordPrefix starts the line of the old server's output with its record.
const recordPrefix = "DETACHED-RECORD "

// oldServer is what the old server does: Mode "detach" detaches its
// server and exits, "abandon" exits without, "prewarm" prepares
// sandboxes for it (Prewarm) and exits without Close, printing a record
// of each.
type oldServer struct {
	Mode    string
	UIDBase int
	Port    int
	Marker  string
}

// TestDetachOldServer is the old server of the tests below, in a process
// of its own: it starts a detachable web server, prints the run's record
// and exits, leaving the run to its fate.
func TestDetachOldServer(t *testing.T) {
	conf := os.Getenv(oldServerEnv)
	if conf == "" {
		t.Skip("the old server of TestDetachSurvivesProcess, run in a process of its own")
	}
	var o oldServer
	if err := json.Unmarshal([]byte(conf), &o); err != nil {
		t.Fatal(err)
	}
	e, err := New(Config{UIDBase: o.UIDBase, UIDSlots: detachSlots})
	if err != nil {
		t.Fatal(err)
	}
	if o.Mode == "prewarm" {
		prewarmOldServer(t, e, o)
		return
	}
	p := startDetachable(t, e, o.Port, o.Marker)
	var d *Detached
	switch o.Mode {
	case "detach":
		// Detach before Wait is called (the test in one process has Wait
		// waiting): Wait then returns at once.
		if d, err = p.Detach(); err == nil {
			if _, werr := p.Wait(); werr != ErrDetached {
				t.Errorf("Wait after Detach: %v", werr)
			}
		}
		e.Close()
	case "abandon":
		d, err = p.record()
	}
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("%s%s\n", recordPrefix, b)
}

// runOldServer runs TestDetachOldServer in a process of its own with the
// uids of test engine k, and returns the record it printed once it has
// exited.
func runOldServer(t *testing.T, o oldServer, k int) *Detached {
	t.Helper()
	return runOldServerRecords(t, o, k)[0]
}

// runOldServerRecords is runOldServer returning every record printed.
func runOldServerRecords(t *testing.T, o oldServer, k int) []*Detached {
	t.Helper()
	o.UIDBase = testUIDs(k)
	conf, err := json.Marshal(o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestDetachOldServer$", "-test.count=1")
	cmd.Env = append(os.Environ(), oldServerEnv+"="+string(conf))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("old server: %v\nstdout:\n%s\nstderr:\n%s", err, out, stderr.Bytes())
	}
	var records []*Detached
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if rec, ok := strings.CutPrefix(sc.Text(), recordPrefix); ok {
			var d Detached
			if err := json.Unmarshal([]byte(rec), &d); err != nil {
				t.Fatal(err)
			}
			records = append(records, &d)
		}
	}
	if len(records) == 0 {
		t.Fatalf("old server printed no record:\n%s", out)
	}
	return records
}

// TestDetachSurvivesProcess: a run detached by a process that then exits
// goes on, and a new engine in another process takes it over: dials into
// it, hands it on and takes it again (as at a second restart), and ends
// it, after which nothing of it is left.
func TestDetachSurvivesProcess(t *testing.T) {
	const k, port, marker = 22, 8000, "marker-survived"
	d := runOldServer(t, oldServer{Mode: "detach", Port: port, Marker: marker}, k)
	e := detachEngine(t, k) // the new server, which finds the run's cgroups
	killAtEnd(t, e, d)
	// Runs of the new server before the adoption take every other slot,
	// never the one the run to adopt has (the engine parked it at New).
	var others []*Process
	for range detachSlots - 1 {
		p, err := e.Start(context.Background(), withDefaults(&Spec{Args: []string{"sleep", "600"}}))
		if err != nil {
			t.Fatalf("a run before the adoption: %v", err)
		}
		others = append(others, p)
	}
	a, err := e.Adopt(d)
	for _, p := range others {
		p.Kill()
		p.Wait()
	}
	e.pool.drain(true) // their sandboxes, idle in the pool
	if err != nil {
		t.Fatal(err)
	}
	if body := get(t, a, port, "/index.html"); body != marker {
		t.Fatalf("GET from a run that outlived its process: %q", body)
	}
	if _, err := a.Stats(); err != nil {
		t.Fatal(err)
	}

	again, err := a.Detach()
	if err != nil {
		t.Fatal(err)
	}
	if err := awaitEnd(t, a); err != ErrDetached {
		t.Errorf("Wait of a run handed on: %v", err)
	}
	if _, err := a.DialTCP(context.Background(), port); !errors.Is(err, ErrDetached) {
		t.Errorf("DialTCP of a run handed on: %v", err)
	}
	a.Kill() // does nothing now
	a, err = e.Adopt(roundTrip(t, again))
	if err != nil {
		t.Fatal(err)
	}
	if body := get(t, a, port, "/index.html"); body != marker {
		t.Fatalf("GET from a run adopted again: %q", body)
	}

	a.Kill()
	if err := awaitEnd(t, a); err != nil {
		t.Errorf("Wait after Kill: %v", err)
	}
	checkGone(t, d, e)
	if _, err := e.Adopt(d); !errors.Is(err, ErrRunEnded) {
		t.Errorf("adopt of a run that ended: %v", err)
	}
}

// TestDetachableEndsWithHost: a detachable run that was not detached ends
// when the process that started it does, as any run does: its PID 1
// sees its control socket close. Its record then adopts nothing, and the
// adoption that fails removes its cgroups.
func TestDetachableEndsWithHost(t *testing.T) {
	const k = 23
	d := runOldServer(t, oldServer{Mode: "abandon", Port: 8000, Marker: "abandoned"}, k)
	e := detachEngine(t, k)
	killAtEnd(t, e, d)
	if !waitUntil(30*time.Second, func() bool {
		start, err := procStartTime(d.Pid)
		return err != nil || start != d.StartTime
	}) {
		t.Fatalf("the run's PID 1 outlived the process that started it")
	}
	if !waitUntil(30*time.Second, func() bool {
		if _, err := e.Adopt(d); !errors.Is(err, ErrRunEnded) {
			return false
		}
		for _, dir := range d.Sandbox {
			if _, err := os.Stat(dir); !os.IsNotExist(err) {
				return false
			}
		}
		return true
	}) {
		_, err := e.Adopt(d)
		t.Fatalf("adopt of a run that ended with its host: %v", err)
	}
	checkGone(t, d, e)
}

// TestDetachNotDetachable: a run whose spec is not Detachable cannot be
// detached, and goes on as ever.
func TestDetachNotDetachable(t *testing.T) {
	p, err := testEngine(t).Start(context.Background(), withDefaults(&Spec{Args: []string{"sleep", "30"}}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Detach(); err == nil {
		t.Error("a run that is not Detachable was detached")
	}
	p.Kill()
	res, err := p.Wait()
	if err != nil || res.Limit != LimitCanceled {
		t.Fatalf("the run after a refused Detach: %+v %v", res, err)
	}
}

// TestDetachableOrdinaryRun: a detachable run that is never detached is a
// run as any other (its sandbox not pooled); once it is over it cannot be
// detached; a detachable spec may have a network too.
func TestDetachableOrdinaryRun(t *testing.T) {
	p, err := testEngine(t).Start(context.Background(), withDefaults(&Spec{Args: []string{"echo", "hello"}, Detachable: true}))
	if err != nil {
		t.Fatal(err)
	}
	c := p.c
	res, err := p.Wait()
	if err != nil || res.ExitCode != 0 || string(res.Stdout) != "hello\n" {
		t.Fatalf("result: %+v %v", res, err)
	}
	if _, err := p.Detach(); !errors.Is(err, ErrRunEnded) {
		t.Errorf("Detach of a run that is over: %v", err)
	}
	testEngine(t).Quiesce()
	if c.alive() {
		t.Error("a detachable run's sandbox serves again")
	}
	n := &Network{Address: netip.MustParsePrefix("10.77.0.2/24"), Gateway: netip.MustParseAddr("10.77.0.1"),
		Attach: func(*os.File) (func(), error) { return func() {}, nil }}
	p, err = testEngine(t).Start(context.Background(), withDefaults(&Spec{Args: []string{"true"}, Detachable: true, Network: n}))
	if err != nil {
		t.Fatalf("a detachable run with a network: %v", err)
	}
	if res, err := p.Wait(); err != nil || res.ExitCode != 0 {
		t.Errorf("a detachable run with a network: %+v %v", res, err)
	}
}
