package runner_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/sandbox-run/sandbox-run/pkg/config"
	"github.com/sandbox-run/sandbox-run/pkg/executor"
	"github.com/sandbox-run/sandbox-run/pkg/local"
	"github.com/sandbox-run/sandbox-run/pkg/runner"
)

// TestLiveTemplate: the templates every door takes: base (the executor's
// default languages), the code interpreter's, a language's name (by any of
// its names, and bash), names joined with +; anything else Invalid,
// saying what is.
func TestLiveTemplate(t *testing.T) {
	reg, err := executor.NewRegistry("")
	if err != nil {
		t.Fatal(err)
	}
	s := runner.New(runner.Config{Workers: 1, App: config.Default()}, local.New(&fakeSessions{reg: reg}), quiet(), nil)
	for name, want := range map[string]runner.LiveTemplate{
		"":                    {Name: "base", Languages: executor.DefaultLiveLanguages, Default: true},
		"base":                {Name: "base", Languages: executor.DefaultLiveLanguages, Default: true},
		"code-interpreter-v1": {Name: "code-interpreter-v1", Languages: []string{"python", "javascript", "bash"}, Interpreter: true},
		"code-interpreter":    {Name: "code-interpreter", Languages: []string{"python", "javascript", "bash"}, Interpreter: true},
		"go":                  {Name: "go", Languages: []string{"go", "bash"}},
		"shell":               {Name: "shell", Languages: []string{"bash"}},
		"python+go":           {Name: "python+go", Languages: []string{"python", "go", "bash"}},
		"bash+python+bash":    {Name: "bash+python+bash", Languages: []string{"bash", "python"}},
	} {
		got, err := s.LiveTemplate(name)
		if err != nil || got.Name != want.Name || !slices.Equal(got.Languages, want.Languages) || got.Default != want.Default ||
			got.Interpreter != want.Interpreter {
			t.Errorf("%q: %+v %v, want %+v", name, got, err, want)
		}
	}
	for _, name := range []string{"no-such-template", "python+", "python+cobol-2099", "+"} {
		if _, err := s.LiveTemplate(name); runner.KindOf(err) != runner.Invalid || !strings.Contains(err.Error(), "code-interpreter-v1") {
			t.Errorf("%q: %v", name, err)
		}
	}
	// The defaults are a copy: a caller's change is its own.
	a, _ := s.LiveTemplate("")
	a.Languages[0] = "changed"
	if b, _ := s.LiveTemplate(""); !slices.Equal(b.Languages, executor.DefaultLiveLanguages) {
		t.Errorf("the defaults changed: %v", b.Languages)
	}
}
