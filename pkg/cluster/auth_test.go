package cluster

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/sandbox-run/sandbox-run/internal/testkit/natstest"
	"github.com/sandbox-run/sandbox-run/internal/testkit/syncbuf"
)

// TestCredentials: a nats-server that wants a user and password (or a
// token) takes a node that gives them, and refuses one that does not,
// with an error that says so.
func TestCredentials(t *testing.T) {
	bin := natstest.ServerBinary(t)
	for _, tc := range []struct {
		name  string
		flags []string
		good  Options
	}{
		{"user and password", []string{"--user", "sr", "--pass", "s3cret-pass"}, Options{User: "sr", Password: "s3cret-pass"}},
		{"token", []string{"--auth", "s3cret-token"}, Options{Token: "s3cret-token"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			port := l.Addr().(*net.TCPAddr).Port
			l.Close()
			cmd := exec.Command(bin, append([]string{"-js", "-sd", t.TempDir(), "-a", "127.0.0.1", "-p", fmt.Sprint(port)}, tc.flags...)...)
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
			url := fmt.Sprintf("nats://127.0.0.1:%d", port)
			ctx, cancel := context.WithTimeout(context.Background(), bounded)
			defer cancel()
			good := tc.good
			good.URLs = []string{url}
			var c *Conn
			for deadline := time.Now().Add(bounded); ; {
				if c, err = Connect(ctx, good); err == nil || time.Now().After(deadline) {
					break
				}
				time.Sleep(100 * time.Millisecond) // the server may still be starting
			}
			if err != nil {
				t.Fatalf("with the credentials: %v", err)
			}
			c.Close()
			_, err = Connect(ctx, Options{URLs: []string{url}})
			if err == nil || !strings.Contains(strings.ToLower(err.Error()), "authoriz") {
				t.Fatalf("without the credentials: %v", err)
			}
		})
	}
}

// TestWaitsForNATS: a node started before any NATS server answers waits
// for one, saying so in its log, and joins when it comes.
func TestWaitsForNATS(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	var logged syncbuf.Buffer
	log := slog.New(slog.NewTextHandler(&logged, nil))
	ctx, cancel := context.WithTimeout(context.Background(), bounded)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		c, err := Connect(ctx, Options{URLs: []string{fmt.Sprintf("nats://127.0.0.1:%d", port)}, Insecure: true, Log: log})
		if err == nil {
			c.Close()
		}
		done <- err
	}()
	for !strings.Contains(logged.String(), "waiting for NATS") {
		select {
		case err := <-done:
			t.Fatalf("Connect returned with no server: %v", err)
		case <-ctx.Done():
			t.Fatal("no log line says the node waits")
		case <-time.After(50 * time.Millisecond):
		}
	}
	cmd := exec.Command(natstest.ServerBinary(t), "-js", "-sd", t.TempDir(), "-a", "127.0.0.1", "-p", fmt.Sprint(port))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	if err := <-done; err != nil {
		t.Fatalf("once NATS came: %v", err)
	}
	if !strings.Contains(logged.String(), "NATS answered") {
		t.Fatalf("log: %s", logged.String())
	}
}
