package main

import (
	"encoding/json"
	"testing"

	"github.com/sandbox-run/sandbox-run/pkg/executor"
)

// TestSoakShort runs "sandbox-run soak" for 20 seconds as a process of its
// own (the in-process server's RSS, descriptors and goroutines are that
// process's) and checks that it passed every check and that each kind of
// request ran often enough to mean something. CI runs the 3-minute soak
// as a step of its own.
func TestSoakShort(t *testing.T) {
	if testing.Short() {
		t.Skip("the soak runs 20 s of load")
	}
	r := cli(t, "", "soak", "-duration", "20s", "-output-format", "json")
	var rep soakReport
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("exit %d and no report (%v)\nstdout: %s\nstderr: %s", r.code, err, r.stdout, r.stderr)
	}
	for _, f := range rep.Failures {
		t.Log("failure:", f)
	}
	for _, l := range rep.ServerLog {
		t.Log("server:", l)
	}
	for _, n := range rep.Notes {
		t.Log("note:", n)
	}
	for _, c := range rep.Checks {
		if !c.OK {
			t.Errorf("check %s failed: %s", c.Check, c.Detail)
		}
	}
	if r.code != 0 || !rep.Passed {
		t.Fatalf("soak exited %d (passed %v); stderr: %s", r.code, rep.Passed, r.stderr)
	}

	want := map[string]bool{}
	for _, k := range soakKinds() {
		want[k.name] = true
	}
	for _, k := range rep.Kinds {
		delete(want, k.Kind)
		if k.OK < 2 {
			t.Errorf("%s: %d of %d requests succeeded, want at least 2", k.Kind, k.OK, k.Sent)
		}
	}
	for k := range want {
		t.Errorf("no row for %s", k)
	}
	if rep.Total.OK < 40 {
		t.Errorf("only %d requests succeeded in 20 s", rep.Total.OK)
	}
	// Every CPU burner that ran was ended by its limit (the checks above),
	// and the report says how close to it.
	burners := 0
	for _, k := range rep.CPUKills {
		burners += k.Runs
		if k.Runs == 0 || k.P50 <= 0 || k.Max < k.P50 || k.Max > 600 {
			t.Errorf("CPU-limit kills of %s: %+v", k.Language, k)
		}
	}
	for _, k := range rep.Kinds {
		if k.Kind == "attack/cpu-burn" && k.OK != burners {
			t.Errorf("%d CPU burners succeeded, the report counts %d ended by their CPU limit", k.OK, burners)
		}
	}
	if res := rep.Resources; res == nil || res.RSSBaselineKiB == 0 || res.FDsBaseline == 0 {
		t.Errorf("the server's resources were not measured: %+v", res)
	}
	t.Logf("%d requests, %d retried; RSS %d -> %d KiB", rep.Total.Sent, rep.Total.Retried, rep.Resources.RSSBaselineKiB, rep.Resources.RSSEndKiB)
}

// TestSoakChecks: the soak's checks see what differs (no server needed).
func TestSoakChecks(t *testing.T) {
	want := soakExpected("c", 12)
	if want != "c 12 379\n1 13\n2 16\n3 21\n4 28\n5 37\n6 48\n" {
		t.Fatalf("soakExpected: %q", want)
	}
	good := &executor.Result{Outcome: executor.Outcome{Status: executor.StatusCompleted, Stdout: want}, Language: "c"}
	if d := soakCheckBenign(good, "c", want); len(d) != 0 {
		t.Errorf("a right result: %v", d)
	}
	bad := *good
	bad.Stdout = want[:len(want)-1]
	if d := soakCheckBenign(&bad, "c", want); len(d) != 1 {
		t.Errorf("a missing newline: %v", d)
	}
	bad = *good
	bad.Stderr = "warning"
	bad.ExitCode = 1
	bad.Status = executor.StatusRuntimeError
	if d := soakCheckBenign(&bad, "c", want); len(d) != 2 {
		t.Errorf("exit 1 with stderr: %v", d)
	}

	flood := &soakAttacks[2].variants[0] // bash yes, 100000 bytes
	res := &executor.Result{Outcome: executor.Outcome{Status: executor.StatusRuntimeError, LimitReason: "output",
		Stdout: flood.stdout("7")}, StdoutTruncated: true}
	if len(res.Stdout) != 100000 || res.Stdout[:8] != "flood 7\n" {
		t.Fatalf("flood: %d bytes %.20q", len(res.Stdout), res.Stdout)
	}
	if d := soakCheckAttack(res, flood, "7"); len(d) != 0 {
		t.Errorf("a right flood: %v", d)
	}
	res.StdoutTruncated = false
	res.LimitReason = ""
	if d := soakCheckAttack(res, flood, "7"); len(d) != 2 {
		t.Errorf("a flood not cut: %v", d)
	}
}
