package executor

import (
	"slices"
	"testing"

	"github.com/sandbox-run/sandbox-run/pkg/sandbox"
)

// TestOutputPatternDoubleStar: "**" in an output pattern spans any number
// of directories, in the sandbox's collector (no session) and in
// selectOutputs (a session collects everything and selects afterwards).
func TestOutputPatternDoubleStar(t *testing.T) {
	code := []byte(`import os
os.makedirs("d/e/f", exist_ok=True)
for p in ["a.txt", "d/b.txt", "d/e/f/c.txt", "d/e/f/x.csv"]:
    open(p, "w").write(p)
`)
	want := []string{"a.txt", "d/b.txt", "d/e/f/c.txt"}
	for _, session := range []string{"", "test-doublestar"} {
		if session != "" {
			t.Cleanup(func() { testExec.DeleteSession(session) })
		}
		res := execute(t, &Request{Language: "python", Code: code, SessionID: session, OutputFiles: []string{"**/*.txt"}})
		if res.Status != StatusCompleted {
			t.Fatalf("session %q: %s", session, describe(res))
		}
		if got := sortedKeys(res.OutputFiles); !slices.Equal(got, want) {
			t.Errorf("session %q: **/*.txt returned %v, want %v", session, got, want)
		}
		res = execute(t, &Request{Language: "python", Code: code, SessionID: session, OutputFiles: []string{"d/**"}})
		if got := sortedKeys(res.OutputFiles); !slices.Equal(got, []string{"d/b.txt", "d/e/f/c.txt", "d/e/f/x.csv"}) {
			t.Errorf("session %q: d/** returned %v", session, got)
		}
	}
}

// TestOutputPatternOmitsSource: a wildcard never returns the program's own
// source (nor a compiled language's artefacts); naming the file exactly
// does.
func TestOutputPatternOmitsSource(t *testing.T) {
	res := execute(t, &Request{Language: "python", Code: []byte("open('out.txt', 'w').write('x')\n"), OutputFiles: []string{"*"}})
	if got := sortedKeys(res.OutputFiles); !slices.Equal(got, []string{"out.txt"}) {
		t.Errorf("python, *: %v, want only out.txt", got)
	}
	res = execute(t, &Request{Language: "python", Code: []byte("open('out.txt', 'w').write('x')\n"), OutputFiles: []string{"**", "main.py"}})
	if got := sortedKeys(res.OutputFiles); !slices.Equal(got, []string{"main.py", "out.txt"}) {
		t.Errorf("python, ** and main.py: %v, want main.py and out.txt", got)
	}
	res = execute(t, &Request{Language: "c", Code: []byte("#include <stdio.h>\nint main(){FILE*f=fopen(\"r.txt\",\"w\");fputs(\"c\",f);fclose(f);return 0;}\n"), OutputFiles: []string{"*"}})
	if got := sortedKeys(res.OutputFiles); !slices.Equal(got, []string{"r.txt"}) {
		t.Errorf("c, *: %v (%s), want only r.txt", got, describe(res))
	}
}

// TestSelectOutputsOwnFiles: selectOutputs on its own.
func TestSelectOutputsOwnFiles(t *testing.T) {
	out := &sandbox.Result{Files: []sandbox.OutputFile{{Path: "main.py", Data: []byte("src")}, {Path: "sub/main.py", Data: []byte("o")}, {Path: "o.txt", Data: []byte("o")}}}
	inputs := []sandbox.File{{Path: "main.py", Data: []byte("src")}}
	for _, c := range []struct {
		patterns []string
		want     []string
	}{
		{nil, []string{"o.txt", "sub/main.py"}},
		{[]string{"*"}, []string{"o.txt"}},
		{[]string{"**/main.py"}, []string{"sub/main.py"}},
		{[]string{"main.py"}, []string{"main.py"}},
		{[]string{"*.py", "main.py"}, []string{"main.py"}},
	} {
		files, _ := selectOutputs(out, inputs, c.patterns, []string{"main.py"})
		if got := sortedKeys(files); !slices.Equal(got, c.want) {
			t.Errorf("%q: %v, want %v", c.patterns, got, c.want)
		}
	}
}

func sortedKeys(m OutputFiles) []string {
	ks := keys(m)
	slices.Sort(ks)
	return ks
}
