package executor

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandbox-run/sandbox-run/pkg/live"
	"github.com/sandbox-run/sandbox-run/pkg/live/agent"
	"github.com/sandbox-run/sandbox-run/pkg/sandbox"
)

// TestStartLive: a live sandbox as the executor starts it: the agent
// answers, its languages' toolchains are on PATH with the spec's
// environment, and it ends when its requests do. A language the registry
// does not know is refused.
func TestStartLive(t *testing.T) {
	var ue *UnsupportedLanguageError
	if _, err := testExec.StartLive(context.Background(), LiveSpec{Languages: []string{"cobol-85"}}); !errors.As(err, &ue) {
		t.Fatalf("an unknown language: %v", err)
	}
	reqR, reqW := io.Pipe()
	evR, evW := io.Pipe()
	p, err := testExec.StartLive(context.Background(), LiveSpec{Languages: []string{"python"}, Env: map[string]string{"X": "y"},
		Limits: sandbox.Limits{WallTime: 10 * time.Minute}, Requests: reqR, Events: evW})
	if err != nil {
		t.Fatal(err)
	}
	ended := make(chan struct{})
	go func() { _, _ = p.Wait(); evW.Close(); close(ended) }()
	c := live.NewClient(reqW, evR)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var mu sync.Mutex
	var out strings.Builder
	exit := make(chan agent.Event, 1)
	// No environment of its own: the sandbox's (its PATH, its X).
	if _, err := c.Start(ctx, agent.Request{Args: []string{"python3", "-c", "import os; print(6*7, os.environ['X'])"}}, func(ev agent.Event) {
		mu.Lock()
		defer mu.Unlock()
		if ev.Type == agent.EvStdout {
			out.Write(ev.Data)
		} else if ev.Type != agent.EvStderr {
			exit <- ev
		}
	}); err != nil {
		t.Fatal(err)
	}
	select {
	case ev := <-exit:
		mu.Lock()
		got := out.String()
		mu.Unlock()
		if ev.Exit == nil || *ev.Exit != 0 || got != "42 y\n" {
			t.Fatalf("%+v %q", ev, got)
		}
	case <-ctx.Done():
		t.Fatal("python did not end")
	}
	reqW.Close()
	select {
	case <-ended:
	case <-time.After(time.Minute):
		p.Kill()
		t.Fatal("the live sandbox did not end with its requests")
	}
}
