package local

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/sandbox-run/sandbox-run/pkg/executor"
	"github.com/sandbox-run/sandbox-run/pkg/runner"
	"github.com/sandbox-run/sandbox-run/pkg/sandbox"
	"github.com/sandbox-run/sandbox-run/pkg/wire"
)

// TestRequest: the request's fields reach the executor in its units;
// stdin decoded, files in name order, "auto" leaving the wall time to the
// executor.
func TestRequest(t *testing.T) {
	x := Request(&runner.Run{Request: &wire.ExecuteRequest{Language: "python", Version: "3", Code: "print(1)", InputData: "aGk=", InputDataEncoding: "base64",
		Files: map[string]wire.FileData{"b": wire.FileData("2"), "a": wire.FileData("1")}, TimeoutAuto: true,
		SessionID: "s", MaxResponseBytes: 8, Compare: "exact",
		Limits: wire.Limits{TimeoutSeconds: 1.5, CPUTimeSeconds: 2, MaxMemoryMB: 3, MaxProcesses: 4, MaxOutputBytes: 5, MaxFileSizeBytes: 6, CompileTimeoutSeconds: 7}}})
	stdin, _ := io.ReadAll(x.Stdin)
	if x.Language != "python" || x.Version != "3" || string(x.Code) != "print(1)" || string(stdin) != "hi" ||
		len(x.Files) != 2 || x.Files[0].Path != "a" || !x.AutoTimeout || x.Limits.WallTime != 0 ||
		x.Limits.CPUTime != 2*time.Second || x.Limits.MemoryBytes != 3<<20 || x.Limits.Processes != 4 || x.Limits.OutputBytes != 5 ||
		x.Limits.FileSize != 6 || x.CompileLimits.WallTime != 7*time.Second || x.SessionID != "s" || x.MaxResponseBytes != 8 || x.Compare != "exact" {
		t.Fatalf("%+v (stdin %q)", x, stdin)
	}
}

// fake is an executor with the real language table whose runs return err.
type fake struct {
	reg  *executor.Registry
	err  error
	last *executor.Request
}

func (f *fake) Execute(ctx context.Context, req *executor.Request) (*executor.Result, error) {
	f.last = req
	if f.err != nil {
		return nil, f.err
	}
	return &executor.Result{Outcome: executor.Outcome{Status: executor.StatusCompleted}, Language: req.Language}, nil
}

func (f *fake) Registry() *executor.Registry { return f.reg }

func newFake(t *testing.T) *fake {
	reg, err := executor.NewRegistry("")
	if err != nil {
		t.Fatal(err)
	}
	return &fake{reg: reg}
}

// TestClassify: the executor's errors become the kinds every transport
// maps to its answers, wrapping them.
func TestClassify(t *testing.T) {
	f := newFake(t)
	b := New(f)
	for _, c := range []struct {
		err  error
		want runner.Kind
	}{
		{fmt.Errorf("start: %w", sandbox.ErrBusy), runner.Busy},
		{&executor.UnsupportedLanguageError{Language: "cobol"}, runner.Invalid},
		{&executor.InvalidRequestError{Msg: "bad layout"}, runner.Invalid},
		{fmt.Errorf("run: %w", context.Canceled), runner.Canceled},
		{errors.New("disk on fire"), runner.Internal},
	} {
		f.err = c.err
		_, err := b.Execute(context.Background(), &runner.Run{Request: &wire.ExecuteRequest{Language: "bash"}})
		if runner.KindOf(err) != c.want || !errors.Is(err, c.err) {
			t.Errorf("%v: got %v (kind %d), want kind %d wrapping it", c.err, err, runner.KindOf(err), c.want)
		}
	}
	f.err = nil
	var traced any
	run := &runner.Run{Request: &wire.ExecuteRequest{Language: "bash", Code: "true"}, Tenant: "k", Local: func(x any) { traced = x }}
	if res, err := b.Execute(context.Background(), run); err != nil || res.Status != wire.StatusCompleted {
		t.Fatalf("%+v %v", res, err)
	}
	if traced != f.last || f.last.Tenant != "k" {
		t.Fatalf("Local saw %v, the executor got %+v", traced, f.last)
	}
	tr := new(executor.Trace)
	run.Local = Trace(tr)
	if _, err := b.Execute(context.Background(), run); err != nil || f.last.Trace != tr {
		t.Fatalf("the CLI's trace did not reach the executor: %v", err)
	}
	// Prepare maps the run once: Execute runs the very request it made.
	prepared := &runner.Run{Request: &wire.ExecuteRequest{Language: "bash", Code: "true"}}
	b.Prepare(context.Background(), prepared)
	if _, err := b.Execute(context.Background(), prepared); err != nil || prepared.Prepared == nil || f.last != prepared.Prepared {
		t.Fatalf("Execute did not run what Prepare made: %v", err)
	}
}

// TestLanguages: the executor's language table as the run service sees
// it: bash (installed everywhere this runs) found by name and alias, with
// its installed versions and the default among them; an unknown language
// refused in the API's words.
func TestLanguages(t *testing.T) {
	b := New(newFake(t))
	l, ok := b.Lookup("shell")
	if !ok || l.Name != "bash" || !l.Available || l.DefaultVersion() == "" || l.Compiled || l.Source == "" {
		t.Fatalf("bash by its alias: %+v %v", l, ok)
	}
	if _, v, err := b.Resolve("bash", ""); err != nil || v.Version != l.DefaultVersion() || !v.Default {
		t.Fatalf("resolve: %+v %v", v, err)
	}
	_, _, err := b.Resolve("cobol-85", "")
	if runner.KindOf(err) != runner.Invalid || !strings.Contains(err.Error(), "Unsupported language") {
		t.Fatalf("an unknown language: %v", err)
	}
	if _, ok := b.Lookup("cobol-85"); ok {
		t.Fatal("an unknown language found")
	}
	found := false
	for _, x := range b.Languages() {
		found = found || x.Name == "bash"
	}
	if !found {
		t.Fatal("bash is not among the languages")
	}
	if err := b.Validate(&runner.Run{Request: &wire.ExecuteRequest{Language: "bash", Code: "true"}}); err != nil {
		t.Fatalf("validate: %v", err)
	}
}
