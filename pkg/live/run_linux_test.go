package live_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/sandbox-run/sandbox-run/pkg/executor"
	"github.com/sandbox-run/sandbox-run/pkg/live"
	"github.com/sandbox-run/sandbox-run/pkg/live/agent"
	"github.com/sandbox-run/sandbox-run/pkg/local"
	"github.com/sandbox-run/sandbox-run/pkg/wire"
)

// TestRun: commands run to their end in a real live sandbox: their
// outputs each cut at the bound, their exit code; one past its timeout is
// killed; one whose caller goes is killed; one whose sandbox ends says so;
// one that cannot start is the agent's refusal.
func TestRun(t *testing.T) {
	home, _ := os.UserHomeDir()
	x, err := executor.New(executor.Config{DataDir: t.TempDir(), CacheDir: filepath.Join(home, ".cache", "sandbox-run-test", "cache"),
		Engine: live.Engine()})
	if err != nil {
		t.Fatal(err)
	}
	m := live.NewManager(local.LiveStarter(x), live.Config{DefaultMemoryBytes: 256 << 20})
	t.Cleanup(m.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := m.Create(ctx, "k", live.CreateOptions{Languages: []string{"bash"}})
	if err != nil {
		t.Fatal(err)
	}
	bash := func(script string) agent.Request { return agent.Request{Args: []string{"bash", "-c", script}} }

	res, err := s.Run(ctx, bash(`printf abcdefgh; printf 0123456789 >&2; exit 3`), live.RunOptions{MaxOutput: 4})
	if err != nil || string(res.Stdout) != "abcd" || string(res.Stderr) != "0123" || !res.StdoutTruncated || !res.StderrTruncated ||
		res.ExitCode != 3 || res.Status != "exit status 3" || res.TimedOut || res.Gone || res.PID <= 0 {
		t.Fatalf("bounded: %+v %v", res, err)
	}
	res, err = s.Run(ctx, bash(`echo out; echo err >&2`), live.RunOptions{})
	if err != nil || string(res.Stdout) != "out\n" || string(res.Stderr) != "err\n" || res.StdoutTruncated || res.ExitCode != 0 {
		t.Fatalf("unbounded: %+v %v", res, err)
	}

	// Past its timeout: killed, with what it wrote before.
	start := time.Now()
	res, err = s.Run(ctx, bash(`echo started; exec sleep 60`), live.RunOptions{Timeout: 300 * time.Millisecond})
	if err != nil || !res.TimedOut || res.ExitCode != -1 || string(res.Stdout) != "started\n" || time.Since(start) > 30*time.Second {
		t.Fatalf("timed out: %+v %v after %v", res, err, time.Since(start))
	}

	// Its caller goes: killed, and the caller's error.
	short, stop := context.WithTimeout(ctx, 300*time.Millisecond)
	defer stop()
	if _, err := s.Run(short, bash(`exec sleep 60`), live.RunOptions{}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a caller that went: %v", err)
	}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		ev, err := s.Client().Call(ctx, agent.Request{Op: agent.OpList})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.ContainsFunc(ev.Procs, func(p agent.Process) bool { return slices.Contains(p.Args, "60") }) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the command of a caller that went runs on: %+v", ev.Procs)
		}
	}

	// It cannot start: the agent's refusal, by its kind.
	var le *live.Error
	if _, err := s.Run(ctx, agent.Request{Args: []string{"/nonexistent"}}, live.RunOptions{}); !errors.As(err, &le) || le.Kind() != wire.KindNotFound {
		t.Fatalf("a program that does not exist: %v", err)
	}

	// The sandbox ends while it runs.
	go func() {
		time.Sleep(500 * time.Millisecond)
		m.Kill("k", s.ID)
	}()
	res, err = s.Run(ctx, bash(`exec sleep 60`), live.RunOptions{})
	if err != nil || !res.Gone || res.Error == "" || res.ExitCode != -1 {
		t.Fatalf("the sandbox ended: %+v %v", res, err)
	}
}
