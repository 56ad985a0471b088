package runner_test

import (
	"context"
	"errors"
	"math"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sandbox-run/sandbox-run/pkg/config"
	"github.com/sandbox-run/sandbox-run/pkg/executor"
	"github.com/sandbox-run/sandbox-run/pkg/local"
	"github.com/sandbox-run/sandbox-run/pkg/runner"
	"github.com/sandbox-run/sandbox-run/pkg/wire"
)

// TestCheck: each bound and maximum of the configuration refuses a
// request past it, in the API's field names.
func TestCheck(t *testing.T) {
	cfg := config.Default()
	cfg.MaxFiles, cfg.MaxArgs, cfg.MaxEnv = 1, 1, 1
	ok := func() *wire.ExecuteRequest { return &wire.ExecuteRequest{Language: "bash", Code: "true"} }
	if err := runner.Check(ok(), &cfg); err != nil {
		t.Fatal(err)
	}
	for want, change := range map[string]func(r *wire.ExecuteRequest){
		"language is required":           func(r *wire.ExecuteRequest) { r.Language = " " },
		"code is required":               func(r *wire.ExecuteRequest) { r.Code = "" },
		"too many files":                 func(r *wire.ExecuteRequest) { r.Files = map[string]wire.FileData{"a": nil, "b": nil} },
		"too many args":                  func(r *wire.ExecuteRequest) { r.Args = []string{"a", "b"} },
		"too many env":                   func(r *wire.ExecuteRequest) { r.Env = map[string]string{"A": "", "B": ""} },
		"invalid file name":              func(r *wire.ExecuteRequest) { r.Files = map[string]wire.FileData{"../x": nil} },
		"input_data is not valid base64": func(r *wire.ExecuteRequest) { r.InputData, r.InputDataEncoding = "%", "base64" },
		"input_data_encoding":            func(r *wire.ExecuteRequest) { r.InputDataEncoding = "latin1" },
		"timeout_seconds 301 is above":   func(r *wire.ExecuteRequest) { r.TimeoutSeconds = 301 },
		"max_memory_mb must not be":      func(r *wire.ExecuteRequest) { r.MaxMemoryMB = -1 },
		"cpu_time_seconds must not be":   func(r *wire.ExecuteRequest) { r.CPUTimeSeconds = math.NaN() },
		"max_response_bytes":             func(r *wire.ExecuteRequest) { r.MaxResponseBytes = cfg.MaxResponseBytes + 1 },
	} {
		r := ok()
		change(r)
		err := runner.Check(r, &cfg)
		if runner.KindOf(err) != runner.Invalid || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v", want, err)
		}
	}
}

// fakeSessions is an executor with the real language table and session
// files it makes up.
type fakeSessions struct {
	reg     *executor.Registry
	used    map[string]int64
	deleted []string
}

func (f *fakeSessions) Execute(ctx context.Context, req *executor.Request) (*executor.Result, error) {
	return nil, errors.New("not here")
}
func (f *fakeSessions) Registry() *executor.Registry { return f.reg }
func (f *fakeSessions) DeleteSession(id string) error {
	f.deleted = append(f.deleted, id)
	return nil
}
func (f *fakeSessions) TryDeleteSession(id string) error { return nil }
func (f *fakeSessions) SessionFiles(id string) ([]executor.SessionFile, int64, error) {
	return nil, f.used[id], nil
}
func (f *fakeSessions) OpenSessionFile(id, path string) (*os.File, error) { return nil, os.ErrNotExist }
func (f *fakeSessions) RemoveSessionFile(id, path string) error           { return nil }
func (f *fakeSessions) SessionBusy(id string) bool                        { return false }

// TestSessions: a session belongs to the key that made it, is checked on
// creation, fills a run's limits, and its disk counts against the key.
func TestSessions(t *testing.T) {
	reg, err := executor.NewRegistry("")
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeSessions{reg: reg, used: map[string]int64{}}
	app := config.Default()
	app.MaxSessionsPerKey, app.SessionQuotaBytesPerKey = 2, 100
	s := runner.New(runner.Config{Workers: 1, App: app}, local.New(f), quiet(), nil)
	for want, req := range map[string]wire.SessionRequest{
		"language is required":  {},
		"Unsupported language":  {Language: "cobol-85"},
		"ttl_seconds must be":   {Language: "bash", TTLSeconds: -1},
		"above the maximum of":  {Language: "bash", TTLSeconds: app.SessionMaxTTLSeconds + 1},
		"max_memory_mb 9999 is": {Language: "bash", SessionLimits: wire.SessionLimits{MaxMemoryMB: 9999}},
	} {
		if _, err := s.CreateSession("k", req); runner.KindOf(err) != runner.Invalid || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v", want, err)
		}
	}
	a, err := s.CreateSession("k", wire.SessionRequest{Language: "shell", SessionLimits: wire.SessionLimits{TimeoutSeconds: 9, MaxMemoryMB: 99}})
	if err != nil || a.Language != "bash" || a.TTLSeconds != app.SessionIdleSeconds {
		t.Fatalf("create: %+v %v", a, err)
	}
	b, _ := s.CreateSession("k", wire.SessionRequest{Language: "bash"})
	if _, err := s.CreateSession("k", wire.SessionRequest{Language: "bash"}); runner.KindOf(err) != runner.Full {
		t.Fatalf("a third session of a key with two at most: %v", err)
	}
	req := &wire.ExecuteRequest{Language: "bash", Code: "true", SessionID: a.ID, Limits: wire.Limits{MaxMemoryMB: 10}}
	if err := s.UseSession(req, "other"); runner.KindOf(err) != runner.Invalid || !strings.Contains(err.Error(), "unknown session") {
		t.Fatalf("another key's session: %v", err)
	}
	if err := s.UseSession(&wire.ExecuteRequest{Language: "python", SessionID: a.ID}, "k"); err == nil || !strings.Contains(err.Error(), "is for bash") {
		t.Fatalf("a session of another language: %v", err)
	}
	if err := s.UseSession(req, "k"); err != nil || req.TimeoutSeconds != 9 || req.MaxMemoryMB != 10 {
		t.Fatalf("use: %v, timeout %g (the session's 9), memory %d (the run's 10)", err, req.TimeoutSeconds, req.MaxMemoryMB)
	}
	f.used[a.ID], f.used[b.ID] = 60, 50
	if err := s.UseSession(req, "k"); runner.KindOf(err) != runner.Full || !strings.Contains(err.Error(), "quota") {
		t.Fatalf("past the key's session disk: %v", err)
	}
	if found, err := s.EndSession(a.ID, "other"); found || err != nil {
		t.Fatal("another key ended the session")
	}
	if found, err := s.EndSession(a.ID, "k"); !found || err != nil || len(f.deleted) != 1 {
		t.Fatalf("end: %v %v, deleted %v", found, err, f.deleted)
	}
	s.EndAllSessions()
	if ids := s.Sessions().IDs(); len(ids) != 0 || len(f.deleted) != 2 {
		t.Fatalf("after EndAllSessions: %v, deleted %v", ids, f.deleted)
	}
	s.SweepSessions(time.Now())
}

// TestPrepare: the one sequence every transport passes: bounds first, then
// the session (whose defaults fill the request), the language, and what
// the backend refuses at start; CheckRun skips the session.
func TestPrepare(t *testing.T) {
	reg, err := executor.NewRegistry("")
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeSessions{reg: reg, used: map[string]int64{}}
	app := config.Default()
	s := runner.New(runner.Config{Workers: 1, App: app}, local.New(f), quiet(), nil)
	sess, err := s.CreateSession("k", wire.SessionRequest{Language: "bash", SessionLimits: wire.SessionLimits{TimeoutSeconds: 7}})
	if err != nil {
		t.Fatal(err)
	}
	for want, req := range map[string]*wire.ExecuteRequest{
		"timeout_seconds 1e+06 is above": {Language: "bash", Code: "true", SessionID: sess.ID, Limits: wire.Limits{TimeoutSeconds: 1e6}},
		"unknown session":                {Language: "bash", Code: "true", SessionID: sess.ID + "x"},
		"Unsupported language":           {Language: "cobol-85", Code: "x"},
	} {
		if err := s.Prepare(context.Background(), req, "k"); runner.KindOf(err) != runner.Invalid || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v", want, err)
		}
	}
	req := &wire.ExecuteRequest{Language: "bash", Code: "true", SessionID: sess.ID}
	if err := s.Prepare(context.Background(), req, "k"); err != nil || req.TimeoutSeconds != 7 {
		t.Fatalf("a session's run: %v, timeout %g (the session's 7)", err, req.TimeoutSeconds)
	}
	if err := s.CheckRun(&wire.ExecuteRequest{Language: "bash", Code: "true", SessionID: "elsewhere"}); err != nil {
		t.Fatalf("CheckRun looks at no session: %v", err)
	}
}
