package repl

import (
	"slices"
	"strings"
	"testing"
)

// TestReplCells: how lines make cells, as the loop reads them (terminal
// or pipe alike).
func TestReplCells(t *testing.T) {
	for _, tc := range []struct {
		python bool
		in     string
		want   []string
	}{
		{true, "x = 41\nx + 1\n", []string{"x = 41", "x + 1"}},
		{true, "def f(a):\n    return a * 2\n\nf(1)\n", []string{"def f(a):\n    return a * 2", "f(1)"}},
		// A block without its empty line ends at the next line that is
		// not indented and continues no clause.
		{true, "if x:\n    y = 1\nelse:\n    y = 2\nprint(y)\n", []string{"if x:\n    y = 1\nelse:\n    y = 2", "print(y)"}},
		{true, "try:\n  a()\nexcept E as e:\n  pass\nfinally:\n  b()\n\n", []string{"try:\n  a()\nexcept E as e:\n  pass\nfinally:\n  b()"}},
		{true, "for i in range(3):\n    # a comment\n\n", []string{"for i in range(3):\n    # a comment"}},
		{true, "x = [1,\n  2,\n]\nx\n", []string{"x = [1,\n  2,\n]", "x"}},
		{true, "f(')', \"(\")\n", []string{"f(')', \"(\")"}},
		{true, "s = '''a\n(\nb'''\n", []string{"s = '''a\n(\nb'''"}},
		{true, "x = 1 + \\\n  2\n", []string{"x = 1 + \\\n  2"}},
		{true, "d = {'a': 1,  # {\n 'b': 2}\n", []string{"d = {'a': 1,  # {\n 'b': 2}"}},
		{true, "@dec\ndef f():\n  pass\n\n", []string{"@dec\ndef f():\n  pass"}},
		{true, "\n\nx\n\n", []string{"x"}},
		{true, "x[1:]\nlambda: 1\n", []string{"x[1:]", "lambda: 1"}},
		{false, "let y = 2\ny * 21\n", []string{"let y = 2", "y * 21"}},
		{false, "function f(a) {\n  return a * 2 // }\n}\nf(21)\n", []string{"function f(a) {\n  return a * 2 // }\n}", "f(21)"}},
		{false, "const s = `a\n{\nb`\n/* (\n*/ 1\n", []string{"const s = `a\n{\nb`", "/* (\n*/ 1"}},
		{false, "if (x) {\n\n  y()\n}\n", []string{"if (x) {\n\n  y()\n}"}},
	} {
		b := cellBuffer{python: tc.python}
		var got []string
		for _, line := range strings.SplitAfter(tc.in, "\n") {
			if line != "" {
				got = append(got, b.add(strings.TrimSuffix(line, "\n"))...)
			}
		}
		got = append(got, b.flush()...)
		if !slices.Equal(got, tc.want) {
			t.Errorf("%q:\ngot  %q\nwant %q", tc.in, got, tc.want)
		}
	}
	// At the end of the input, a cell begun runs as it is.
	b := cellBuffer{python: true}
	if got := b.add("def f():"); got != nil || !b.pending() {
		t.Errorf("def f(): %q", got)
	}
	b.add("  return 1")
	if got := b.flush(); !slices.Equal(got, []string{"def f():\n  return 1"}) {
		t.Errorf("flush: %q", got)
	}
}
