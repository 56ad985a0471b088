package sandbox

import (
	"context"
	"os"
	"strings"
	"testing"
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
