package executor

import (
	"bytes"
	"encoding/base64"
	"sort"
	"testing"
)

// TestResponseBudgetTestCases: 8 test cases of 4 MiB of NUL each, under a
// response budget of 8 MiB: the result's JSON stays within the budget
// (plus its fields), base64, and says it was cut.
func TestResponseBudgetTestCases(t *testing.T) {
	const budget = 8 << 20
	var cases []TestCase
	for range 8 {
		cases = append(cases, TestCase{})
	}
	res := execute(t, &Request{Language: "python", Code: []byte("import sys\nsys.stdout.buffer.write(bytes(4 << 20))\n"),
		TestCases: cases, MaxResponseBytes: budget, Limits: Limits{OutputBytes: 8 << 20}})
	var out bytes.Buffer
	if err := res.WriteJSON(&out, false); err != nil {
		t.Fatal(err)
	}
	if out.Len() > budget+64<<10 {
		t.Fatalf("result JSON is %d bytes, budget %d", out.Len(), budget)
	}
	if !res.ResponseTruncated {
		t.Fatal("response_truncated is false although 32 MiB of output met an 8 MiB budget")
	}
	full, cut := 0, 0
	for _, c := range res.TestCases {
		if c.StdoutEncoding != "base64" && c.Stdout != "" {
			t.Fatalf("case %d: NUL output as %q text", c.Index, c.StdoutEncoding)
		}
		raw, _ := base64.StdEncoding.DecodeString(c.Stdout)
		switch {
		case len(raw) == 4<<20 && !c.StdoutTruncated:
			full++
		case c.StdoutTruncated:
			cut++
		default:
			t.Fatalf("case %d: %d bytes, not truncated", c.Index, len(raw))
		}
	}
	// Which cases come back whole depends on which ran first; some must
	// have been cut.
	if cut == 0 || full > 1 {
		t.Fatalf("%d cases whole, %d cut: want at most one whole (5.3 MiB as base64) and the rest cut", full, cut)
	}
}

// TestResponseBudgetFiles: output files past the budget are skipped with
// the budget as their reason, and the rest come back whole.
func TestResponseBudgetFiles(t *testing.T) {
	res := execute(t, &Request{Language: "python", MaxResponseBytes: 3 << 20,
		Code: []byte("for n in 'abcde':\n    open(n + '.txt', 'w').write(n * (1 << 20))\nprint('done')\n")})
	if res.Status != StatusCompleted || res.Stdout != "done\n" {
		t.Fatalf("%s", describe(res))
	}
	if !res.ResponseTruncated {
		t.Fatal("response_truncated is false")
	}
	var got, skipped []string
	for name, d := range res.OutputFiles {
		if len(d) != 1<<20 {
			t.Fatalf("%s: %d bytes", name, len(d))
		}
		got = append(got, name)
	}
	for _, s := range res.SkippedFiles {
		if s.Reason == ReasonResponseBudget {
			skipped = append(skipped, s.Path)
		}
	}
	sort.Strings(got)
	if len(got) != 2 || len(skipped) != 3 {
		t.Fatalf("returned %v, skipped for the budget %v: want 2 and 3", got, skipped)
	}
}
