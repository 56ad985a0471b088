package client

import (
	"context"
	"encoding/base64"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sandbox-run/sandbox-run/pkg/api"
	"github.com/sandbox-run/sandbox-run/pkg/executor"
)

// output collects a session's events by stream, checking their offsets.
type output struct {
	t       *testing.T
	streams map[string]*strings.Builder
}

func newOutput(t *testing.T) *output { return &output{t: t, streams: map[string]*strings.Builder{}} }

func (o *output) add(ev api.Event) {
	b := o.streams[ev.Type]
	if b == nil {
		b = &strings.Builder{}
		o.streams[ev.Type] = b
	}
	if ev.Offset != int64(b.Len()) {
		o.t.Errorf("%s event at offset %d, want %d", ev.Type, ev.Offset, b.Len())
	}
	data := ev.Data
	if ev.Encoding == "base64" {
		d, err := base64.StdEncoding.DecodeString(ev.Data)
		if err != nil {
			o.t.Errorf("base64 event: %v", err)
		}
		data = string(d)
	}
	b.WriteString(data)
}

func (o *output) get(stream string) string {
	if b := o.streams[stream]; b != nil {
		return b.String()
	}
	return ""
}

// until reads events until stdout ends with suffix.
func (o *output) until(s *Session, suffix string) {
	o.t.Helper()
	timeout := time.After(60 * time.Second)
	for !strings.HasSuffix(o.get("stdout"), suffix) {
		select {
		case ev, ok := <-s.Events():
			if !ok {
				res, err := s.Result()
				o.t.Fatalf("the session ended before stdout ended with %q: stdout %q, result %+v, %v", suffix, o.get("stdout"), res, err)
			}
			o.add(ev)
		case <-timeout:
			o.t.Fatalf("stdout %q never ended with %q", o.get("stdout"), suffix)
		}
	}
}

// drain reads the remaining events.
func (o *output) drain(s *Session) {
	for ev := range s.Events() {
		o.add(ev)
	}
}

func TestInteractiveSession(t *testing.T) {
	c := New(server(t))
	ctx := context.Background()
	s, err := c.Interactive(ctx, &api.ExecuteRequest{Language: "python", Code: `import sys
while True:
    print("name?", flush=True)
    line = sys.stdin.readline()
    if not line:
        break
    print("hello " + line.strip(), flush=True)
    print("greeted", line.strip(), file=sys.stderr, flush=True)
print("bye")
`, InputData: "Ada\n"})
	if err != nil {
		t.Fatal(err)
	}
	o := newOutput(t)
	o.until(s, "name?\nhello Ada\nname?\n") // input_data is the start of stdin
	if err := s.WriteStdin([]byte("Grace\n")); err != nil {
		t.Fatal(err)
	}
	o.until(s, "hello Grace\nname?\n")
	if err := s.CloseStdin(); err != nil {
		t.Fatal(err)
	}
	o.drain(s)
	res, err := s.Result()
	if err != nil {
		t.Fatal(err)
	}
	want := "name?\nhello Ada\nname?\nhello Grace\nname?\nbye\n"
	if res.Status != executor.StatusCompleted || res.Stdout != want || o.get("stdout") != want {
		t.Errorf("result %+v, events' stdout %q", res, o.get("stdout"))
	}
	if e := "greeted Ada\ngreeted Grace\n"; o.get("stderr") != e || res.Stderr != e {
		t.Errorf("stderr: events %q, result %q", o.get("stderr"), res.Stderr)
	}
	if err := s.WriteStdin([]byte("late")); err == nil {
		t.Error("WriteStdin after the end succeeded")
	}
}

func TestInteractiveCompiled(t *testing.T) {
	c := New(server(t))
	s, err := c.Interactive(context.Background(), &api.ExecuteRequest{Language: "c", Code: `#include <stdio.h>
#warning "compiling"
int main(void) { int n; printf("n?\n"); fflush(stdout); if (scanf("%d", &n) != 1) return 1; printf("%d\n", n * 2); return 0; }
`})
	if err != nil {
		t.Fatal(err)
	}
	o := newOutput(t)
	o.until(s, "n?\n")
	if !strings.Contains(o.get("compile"), "compiling") {
		t.Errorf("compile events %q lack the warning", o.get("compile"))
	}
	s.WriteStdin([]byte("21\n"))
	o.drain(s)
	if res, err := s.Result(); err != nil || res.Stdout != "n?\n42\n" || res.Status != executor.StatusCompleted {
		t.Errorf("result %+v, %v", res, err)
	}
}

func TestInteractiveKill(t *testing.T) {
	c := New(server(t))
	s, err := c.Interactive(context.Background(), &api.ExecuteRequest{Language: "bash", Code: "echo waiting; read x; echo never"})
	if err != nil {
		t.Fatal(err)
	}
	o := newOutput(t)
	o.until(s, "waiting\n")
	if err := s.Kill(); err != nil {
		t.Fatal(err)
	}
	o.drain(s)
	res, err := s.Result()
	if err != nil || res.LimitReason != "canceled" || strings.Contains(res.Stdout, "never") {
		t.Errorf("result %+v, %v; want limit_reason canceled", res, err)
	}
}

// Refusals are *Error, before the run (the handshake) or as its end.
func TestInteractiveErrors(t *testing.T) {
	url := serve(t, newExecutor(t), func(cfg *api.Config) {
		cfg.Keys = []api.APIKey{{ID: "k", Key: "secret"}}
	})
	ctx := context.Background()
	req := &api.ExecuteRequest{Language: "python", Code: "print('ok')"}
	_, err := New(url).Interactive(ctx, req)
	var e *Error
	if !errors.As(err, &e) || e.StatusCode != http.StatusUnauthorized || !strings.Contains(e.Message, "API key") {
		t.Errorf("without a key: %v", err)
	}
	c := New(url, WithAPIKey("secret"), WithHTTPClient(&http.Client{Timeout: time.Minute}))
	s, err := c.Interactive(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	o := newOutput(t)
	o.drain(s)
	if res, err := s.Result(); err != nil || res.Stdout != "ok\n" || o.get("stdout") != "ok\n" {
		t.Errorf("with the key: %+v, %v", res, err)
	}
	for _, bad := range []*api.ExecuteRequest{
		{Language: "cobol-2099", Code: "x"},
		{Language: "python", Code: "x", TestCases: []executor.TestCase{{InputData: "1"}}},
		{Language: "python"},
	} {
		s, err := c.Interactive(ctx, bad)
		if err != nil {
			t.Fatal(err)
		}
		o.drain(s)
		res, err := s.Result()
		if !errors.As(err, &e) || e.StatusCode != http.StatusBadRequest || res != nil {
			t.Errorf("%+v: %+v, %v; want a 400 *Error", bad, res, err)
		}
	}
}

// Cancelling the context closes the connection: the server kills the run.
func TestInteractiveContextCancel(t *testing.T) {
	c := New(server(t))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	start := time.Now()
	s, err := c.Interactive(ctx, &api.ExecuteRequest{Language: "bash", Code: "echo up; sleep 30"})
	if err != nil {
		t.Fatal(err)
	}
	newOutput(t).until(s, "up\n")
	cancel()
	for range s.Events() {
	}
	if res, err := s.Result(); !errors.Is(err, context.Canceled) || res != nil {
		t.Errorf("%+v, %v; want context.Canceled", res, err)
	}
	// The server's worker is free again soon: a run with a short timeout
	// goes through.
	res, err := c.Execute(context.Background(), &api.ExecuteRequest{Language: "bash", Code: "echo next"})
	if err != nil || res.Stdout != "next\n" {
		t.Errorf("next run: %+v, %v", res, err)
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("took %v", d)
	}
}

// Close ends a session whose events nobody reads.
func TestInteractiveClose(t *testing.T) {
	c := New(server(t))
	s, err := c.Interactive(context.Background(), &api.ExecuteRequest{Language: "bash", Code: "while :; do echo line; done"})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond) // the events fill the channel
	done := make(chan error, 1)
	go func() { done <- s.Close() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Close: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close hangs")
	}
	if _, err := s.Result(); err == nil {
		t.Error("Result after Close: no error")
	}
}
