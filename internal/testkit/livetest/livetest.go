// Package livetest runs commands in live sandboxes (pkg/live) for tests:
// through a sandbox's agent client, its output and exit code at the end.
package livetest

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandbox-run/sandbox-run/pkg/live"
	"github.com/sandbox-run/sandbox-run/pkg/live/agent"
)

// Run runs args through c (a live sandbox's agent) and returns its stdout
// and stderr together, and its exit code (-1 with the agent's error
// appended when it did not exit). It fails t past a minute.
func Run(t testing.TB, c *live.Client, args ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var mu sync.Mutex
	var out strings.Builder
	exit := make(chan agent.Event, 1)
	if _, err := c.Start(ctx, agent.Request{Args: args}, func(ev agent.Event) {
		mu.Lock()
		defer mu.Unlock()
		if ev.Type == agent.EvStdout || ev.Type == agent.EvStderr {
			out.Write(ev.Data)
		} else {
			exit <- ev
		}
	}); err != nil {
		t.Fatal(err)
	}
	select {
	case ev := <-exit:
		mu.Lock()
		defer mu.Unlock()
		if ev.Exit == nil {
			return out.String() + ev.Error, -1
		}
		return out.String(), *ev.Exit
	case <-ctx.Done():
		t.Fatalf("%q did not end", args)
		panic("unreachable")
	}
}
