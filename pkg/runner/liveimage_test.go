package runner_test

import (
	"context"
	"strings"
	"testing"

	"github.com/sandbox-run/sandbox-run/pkg/config"
	"github.com/sandbox-run/sandbox-run/pkg/live"
	"github.com/sandbox-run/sandbox-run/pkg/local"
	"github.com/sandbox-run/sandbox-run/pkg/runner"
)

// TestLiveImageAllowed: a live sandbox's image passes the server's
// images.allow as a run's does (Invalid, in the same words, otherwise),
// and a malformed reference is Invalid; an allowed one is the sandbox's.
func TestLiveImageAllowed(t *testing.T) {
	app := config.Default()
	app.Images.Allow = []string{"python:3.12"}
	s := runner.New(runner.Config{App: app}, liveBackend{local.New(newGate())}, quiet(), nil)
	defer s.Stop()
	ctx := context.Background()
	c := runner.Caller{Key: &runner.Key{APIKey: config.APIKey{ID: "a"}}}
	for ref, want := range map[string]string{
		"alpine:3.20": "is not allowed here",
		"Not A Ref!":  "image: ",
	} {
		_, err := s.CreateLive(ctx, c, live.CreateOptions{Image: ref})
		if runner.KindOf(err) != runner.Invalid || !strings.Contains(err.Error(), want) {
			t.Errorf("image %q: %v (want Invalid saying %q)", ref, err, want)
		}
	}
	sb, err := s.CreateLive(ctx, c, live.CreateOptions{Image: "python:3.12"})
	if err != nil {
		t.Fatal(err)
	}
	if sb.Image != "python:3.12" {
		t.Errorf("the sandbox's image: %q", sb.Image)
	}
	if err := s.KillLive(c, sb.ID); err != nil {
		t.Error(err)
	}

	// A server that allows no image says so.
	none := runner.New(runner.Config{App: config.Default()}, liveBackend{local.New(newGate())}, quiet(), nil)
	defer none.Stop()
	if _, err := none.CreateLive(ctx, c, live.CreateOptions{Image: "python:3.12"}); runner.KindOf(err) != runner.Invalid ||
		!strings.Contains(err.Error(), "images.allow is empty") {
		t.Errorf("no image allowed: %v", err)
	}
}
