package sandbox

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"
)

func TestMain(m *testing.M) {
	Init()
	os.Exit(m.Run())
}

func testEngine(t testing.TB) *Engine {
	t.Helper()
	e, err := Default()
	if err != nil {
		t.Fatalf("engine: %v", err)
	}
	return e
}

func run(t testing.TB, spec *Spec) *Result {
	t.Helper()
	if spec.Mounts == nil {
		spec.Mounts = SystemMounts
	}
	if spec.Env == nil {
		spec.Env = []string{"PATH=/usr/bin:/bin", "HOME=/tmp"}
	}
	res, err := testEngine(t).Run(context.Background(), spec)
	if err != nil {
		t.Fatalf("run %q: %v", spec.Args, err)
	}
	return res
}

func TestEcho(t *testing.T) {
	res := run(t, &Spec{Args: []string{"sh", "-c", "echo hello; id; echo err >&2; exit 3"}})
	t.Logf("%+v stdout=%q stderr=%q", res, res.Stdout, res.Stderr)
	if !strings.HasPrefix(string(res.Stdout), "hello\n") || res.ExitCode != 3 {
		t.Fatalf("got %+v", res)
	}
}

func TestLimitsQuick(t *testing.T) {
	cases := []struct {
		name   string
		script string
		limits Limits
	}{
		{"memory", "python3 -c 'x=bytearray(1<<30); print(1)'", Limits{Memory: 64 << 20}},
		{"fork", ":(){ :|:& };:", Limits{Processes: 20, WallTime: 2 * time.Second}},
		{"cpu", "while :; do :; done", Limits{CPUTime: 300 * time.Millisecond}},
		{"wall", "sleep 5", Limits{WallTime: 300 * time.Millisecond}},
		{"output", "yes", Limits{OutputBytes: 1000}},
		{"fsize", "head -c 100000 /dev/zero > /work/x", Limits{FileSize: 1000}},
		{"disk", "head -c 10000000 /dev/zero > /work/x", Limits{WorkSize: 1 << 20}},
	}
	for _, c := range cases {
		res := run(t, &Spec{Args: []string{"bash", "-c", c.script}, Limits: c.limits})
		t.Logf("%s: limit=%q exit=%d sig=%s wall=%v cpu=%v mem=%d out=%d trunc=%v err=%.100q", c.name, res.Limit, res.ExitCode, res.Signal, res.WallTime, res.CPUTime, res.PeakMemory, len(res.Stdout), res.StdoutTruncated, res.Stderr)
	}
}
