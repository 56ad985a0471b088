package executor

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math"
	"runtime"
	"strings"
	"testing"
	"time"
)

func ptr(s string) *string { return &s }

const pySum = "a,b=map(int,input().split()); print(a+b)"

// describeCases renders a batch's cases for failure messages.
func describeCases(res *Result) string {
	var b strings.Builder
	b.WriteString(describe(res))
	for _, c := range res.TestCases {
		b.WriteString("\n  ")
		b.WriteString(strings.Join([]string{itoa(int64(c.Index)), string(c.Status), c.Verdict,
			"stdout=" + truncate(c.Stdout, 200), "stderr=" + truncate(c.Stderr, 500), "limit=" + c.LimitReason}, " "))
	}
	return b.String()
}

// expectVerdicts checks the result's verdicts and summary.
func expectVerdicts(t *testing.T, res *Result, status Status, verdicts []string, sum BatchSummary) {
	t.Helper()
	if res.Status != status {
		t.Errorf("status = %s, want %s", res.Status, status)
	}
	if len(res.TestCases) != len(verdicts) {
		t.Fatalf("%d case results, want %d: %s", len(res.TestCases), len(verdicts), describeCases(res))
	}
	for i, c := range res.TestCases {
		if c.Index != i {
			t.Errorf("case %d has index %d", i, c.Index)
		}
		if c.Verdict != verdicts[i] {
			t.Errorf("case %d: verdict %q, want %q", i, c.Verdict, verdicts[i])
		}
	}
	if res.Summary == nil || *res.Summary != sum {
		t.Errorf("summary = %+v, want %+v", res.Summary, sum)
	}
	if t.Failed() {
		t.Logf("result: %s", describeCases(res))
	}
}

func TestBatchPythonSum(t *testing.T) {
	res := execute(t, &Request{Language: "python", Code: []byte(pySum), TestCases: []TestCase{
		{InputData: "1 2", ExpectedOutput: ptr("3")},
		{InputData: "2 2", ExpectedOutput: ptr("5")},
		{InputData: "10 -3\n", ExpectedOutput: ptr("7\n")},
	}})
	expectVerdicts(t, res, StatusCompleted, []string{VerdictAccepted, VerdictWrongAnswer, VerdictAccepted},
		BatchSummary{Total: 3, Accepted: 2, Failed: 1})
	for i, want := range []string{"3\n", "4\n", "7\n"} {
		if c := res.TestCases[i]; c.Stdout != want || c.Status != StatusCompleted || c.ExitCode != 0 {
			t.Errorf("case %d: status %s exit %d stdout %q, want completed, 0, %q", i, c.Status, c.ExitCode, c.Stdout, want)
		}
	}
	if res.Stdout != "" || res.Stderr != "" || res.Compile != nil || res.ExitCode != 0 {
		t.Errorf("top level: %s", describe(res))
	}
	if res.DurationMs <= 0 || res.CPUTimeMs <= 0 || res.MemoryUsedMB <= 0 {
		t.Errorf("top-level usage: duration %g cpu %g memory %g", res.DurationMs, res.CPUTimeMs, res.MemoryUsedMB)
	}
	var cpu, mem float64
	for _, c := range res.TestCases {
		cpu += c.CPUTimeMs
		mem = math.Max(mem, c.MemoryUsedMB)
	}
	if math.Abs(cpu-res.CPUTimeMs) > 0.011 || mem != res.MemoryUsedMB {
		t.Errorf("cpu %g (cases sum %g), memory %g (cases max %g)", res.CPUTimeMs, cpu, res.MemoryUsedMB, mem)
	}
}

// TestBatchCompiledOnce compiles a C program once and runs it per case: the
// compiler's warning reaches CompileOutput exactly once.
func TestBatchCompiledOnce(t *testing.T) {
	code := "#warning batch-compile-marker\n#include <stdio.h>\nint main(void) { long n; if (scanf(\"%ld\", &n) != 1) return 2; printf(\"%ld\\n\", n * n); return 0; }\n"
	var compileOut bytes.Buffer
	res := execute(t, &Request{Language: "c", Code: []byte(code), CompileOutput: &compileOut, TestCases: []TestCase{
		{InputData: "2", ExpectedOutput: ptr("4")},
		{InputData: "3", ExpectedOutput: ptr("9")},
		{InputData: "-5", ExpectedOutput: ptr("25")},
		{InputData: "100000", ExpectedOutput: ptr("10000000000")},
	}})
	expectVerdicts(t, res, StatusCompleted, []string{VerdictAccepted, VerdictAccepted, VerdictAccepted, VerdictAccepted},
		BatchSummary{Total: 4, Accepted: 4})
	if res.Compile == nil || res.Compile.Status != StatusCompleted {
		t.Fatalf("compile step: %+v", res.Compile)
	}
	if n := strings.Count(compileOut.String(), "warning: #warning batch-compile-marker"); n != 1 {
		t.Errorf("the compiler ran %d times, want once; compile output:\n%s", n, compileOut.String())
	}
}

func TestBatchCompileError(t *testing.T) {
	res := execute(t, &Request{Language: "c", Code: []byte("int main(void) { return nope; }\n"), TestCases: []TestCase{
		{InputData: "1", ExpectedOutput: ptr("1")},
	}})
	if res.Status != StatusCompileError || res.Compile == nil || res.TestCases != nil || res.Summary != nil {
		t.Errorf("want error_compile without case results; got %s cases=%v summary=%v", describe(res), res.TestCases, res.Summary)
	}
}

func TestBatchFloat(t *testing.T) {
	code := []byte("import sys\nfor line in sys.stdin:\n    a, b = map(float, line.split())\n    print('%.10f' % (a / b), 'ok')\n")
	cases := []TestCase{
		{InputData: "1 3", ExpectedOutput: ptr("0.333333 ok")},     // 3.3e-7 off: within 1e-6
		{InputData: "1 3", ExpectedOutput: ptr("0.3333 ok")},       // 3.3e-5 off
		{InputData: "2e9 1", ExpectedOutput: ptr("2000000001 ok")}, // 1 off: within relative 1e-6
		{InputData: "1 3", ExpectedOutput: ptr("0.333333 no")},     // a word differs
		{InputData: "1 3", ExpectedOutput: ptr("0.333333")},        // a token fewer
	}
	res := execute(t, &Request{Language: "python", Code: code, Compare: CompareFloat, TestCases: cases})
	expectVerdicts(t, res, StatusCompleted,
		[]string{VerdictAccepted, VerdictWrongAnswer, VerdictAccepted, VerdictWrongAnswer, VerdictWrongAnswer},
		BatchSummary{Total: 5, Accepted: 2, Failed: 3})

	res = execute(t, &Request{Language: "python", Code: code, Compare: CompareFloat, FloatTolerance: 1e-3, TestCases: cases[:2]})
	expectVerdicts(t, res, StatusCompleted, []string{VerdictAccepted, VerdictAccepted}, BatchSummary{Total: 2, Accepted: 2})
}

func TestBatchExactVersusLines(t *testing.T) {
	code := []byte("print('3 ')\nprint()\n") // "3 \n\n"
	cases := []TestCase{
		{ExpectedOutput: ptr("3")},
		{ExpectedOutput: ptr("3 \n\n")},
		{ExpectedOutput: ptr("3\n4")},
	}
	for _, c := range []struct {
		compare  string
		verdicts []string
		sum      BatchSummary
	}{
		{CompareExact, []string{VerdictWrongAnswer, VerdictAccepted, VerdictWrongAnswer}, BatchSummary{Total: 3, Accepted: 1, Failed: 2}},
		{CompareLines, []string{VerdictAccepted, VerdictAccepted, VerdictWrongAnswer}, BatchSummary{Total: 3, Accepted: 2, Failed: 1}},
		{"", []string{VerdictAccepted, VerdictAccepted, VerdictWrongAnswer}, BatchSummary{Total: 3, Accepted: 2, Failed: 1}},
	} {
		t.Run("compare="+c.compare, func(t *testing.T) {
			res := execute(t, &Request{Language: "python", Code: code, Compare: c.compare, TestCases: cases})
			expectVerdicts(t, res, StatusCompleted, c.verdicts, c.sum)
		})
	}
}

// TestBatchFailures mixes a timeout, a runtime error, passing cases and one
// without an expectation.
func TestBatchFailures(t *testing.T) {
	code := []byte("import sys, time\ns = sys.stdin.read().strip()\nif s == 'sleep':\n    time.sleep(30)\nif s == 'crash':\n    sys.exit(3)\nprint(s)\n")
	res := execute(t, &Request{Language: "python", Code: code, Limits: Limits{WallTime: 1500 * time.Millisecond}, TestCases: []TestCase{
		{InputData: "a", ExpectedOutput: ptr("a")},
		{InputData: "crash", ExpectedOutput: ptr("crash")},
		{InputData: "sleep", ExpectedOutput: ptr("sleep")},
		{InputData: "b", ExpectedOutput: ptr("b")},
		{InputData: "c"},
	}})
	expectVerdicts(t, res, StatusTimeout,
		[]string{VerdictAccepted, string(StatusRuntimeError), string(StatusTimeout), VerdictAccepted, ""},
		BatchSummary{Total: 5, Accepted: 2, Failed: 2})
	if c := res.TestCases[1]; c.ExitCode != 3 {
		t.Errorf("crash case: exit %d, want 3", c.ExitCode)
	}
	if c := res.TestCases[2]; c.LimitReason != "wall_time" {
		t.Errorf("sleep case: limit %q, want wall_time", c.LimitReason)
	}
	if res.LimitReason != "wall_time" {
		t.Errorf("top-level limit %q, want wall_time", res.LimitReason)
	}
	if c := res.TestCases[4]; c.Status != StatusCompleted || c.Stdout != "c\n" {
		t.Errorf("case without expectation: %s %q", c.Status, c.Stdout)
	}

	// Only a runtime error: the batch's status is error_runtime.
	res = execute(t, &Request{Language: "python", Code: code, TestCases: []TestCase{
		{InputData: "crash"}, {InputData: "x", ExpectedOutput: ptr("x")},
	}})
	expectVerdicts(t, res, StatusRuntimeError, []string{string(StatusRuntimeError), VerdictAccepted}, BatchSummary{Total: 2, Accepted: 1, Failed: 1})
	if res.ExitCode != 3 {
		t.Errorf("top-level exit code %d, want 3", res.ExitCode)
	}
}

func TestBatchArgs(t *testing.T) {
	code := []byte("import sys\nprint(' '.join(sys.argv[1:]))\n")
	res := execute(t, &Request{Language: "python", Code: code, Args: []string{"base"}, TestCases: []TestCase{
		{Args: []string{"x", "y z"}, ExpectedOutput: ptr("base x y z")},
		{ExpectedOutput: ptr("base")},
		{Args: []string{"ü"}, ExpectedOutput: ptr("base ü")},
	}})
	expectVerdicts(t, res, StatusCompleted, []string{VerdictAccepted, VerdictAccepted, VerdictAccepted}, BatchSummary{Total: 3, Accepted: 3, Failed: 0})
}

// TestBatchParallel checks that cases overlap when the host has CPUs to
// spare.
func TestBatchParallel(t *testing.T) {
	if runtime.NumCPU() < 2 {
		t.Skip("one CPU: cases run one at a time")
	}
	code := []byte("import time\ntime.sleep(0.6)\nprint('done')\n")
	cases := make([]TestCase, 4)
	for i := range cases {
		cases[i].ExpectedOutput = ptr("done")
	}
	res := execute(t, &Request{Language: "python", Code: code, TestCases: cases})
	expectVerdicts(t, res, StatusCompleted, []string{"accepted", "accepted", "accepted", "accepted"}, BatchSummary{Total: 4, Accepted: 4, Failed: 0})
	var sum float64
	for _, c := range res.TestCases {
		sum += c.DurationMs
	}
	if res.DurationMs > 0.8*sum {
		t.Errorf("batch took %g ms for cases totalling %g ms: not run in parallel", res.DurationMs, sum)
	}
}

// TestBatchAcceptanceJSON is the example request, decoded as the
// API sends it; the result's JSON carries both verdicts.
func TestBatchAcceptanceJSON(t *testing.T) {
	body := `{"language":"python","code":"a,b=map(int,input().split()); print(a+b)","test_cases":[{"input_data":"1 2","expected_output":"3"},{"input_data":"2 2","expected_output":"5"}]}`
	var in struct {
		Language  string     `json:"language"`
		Code      string     `json:"code"`
		TestCases []TestCase `json:"test_cases"`
	}
	if err := json.Unmarshal([]byte(body), &in); err != nil {
		t.Fatal(err)
	}
	res := execute(t, &Request{Language: in.Language, Code: []byte(in.Code), TestCases: in.TestCases})
	out, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	s := string(out)
	for _, want := range []string{`"verdict":"accepted"`, `"verdict":"wrong_answer"`, `"summary":{"total":2,"accepted":1,"failed":1}`, `"status":"completed"`, `"test_cases":[{"index":0,`} {
		if !strings.Contains(s, want) {
			t.Errorf("JSON lacks %s: %s", want, s)
		}
	}
	// A plain run has neither field.
	out, _ = json.Marshal(execute(t, &Request{Language: "python", Code: []byte("print(1)")}))
	if strings.Contains(string(out), "test_cases") || strings.Contains(string(out), "summary") {
		t.Errorf("plain run JSON has batch fields: %s", out)
	}
}

func TestBatchInvalid(t *testing.T) {
	one := []TestCase{{InputData: "1 2", ExpectedOutput: ptr("3")}}
	many := make([]TestCase, MaxTestCases+1)
	manyArgs := make([]string, MaxArgs)
	for _, c := range []struct {
		name string
		req  Request
		msg  string
	}{
		{"too many cases", Request{TestCases: many}, "too many test cases"},
		{"compare", Request{TestCases: one, Compare: "fuzzy"}, "invalid compare"},
		{"negative tolerance", Request{TestCases: one, Compare: CompareFloat, FloatTolerance: -1}, "float_tolerance"},
		{"NaN tolerance", Request{TestCases: one, Compare: CompareFloat, FloatTolerance: math.NaN()}, "float_tolerance"},
		{"session", Request{TestCases: one, SessionID: "s1"}, "session"},
		{"stdin", Request{TestCases: one, Stdin: strings.NewReader("x")}, "input_data"},
		{"output files", Request{TestCases: one, OutputFiles: []string{"*"}}, "output_files"},
		{"big input", Request{TestCases: []TestCase{{InputData: strings.Repeat("x", MaxCaseBytes+1)}}}, "input_data is"},
		{"big expectation", Request{TestCases: []TestCase{{ExpectedOutput: ptr(strings.Repeat("x", MaxCaseBytes+1))}}}, "expected_output is"},
		{"total", Request{TestCases: []TestCase{{InputData: strings.Repeat("x", MaxCaseBytes)}, {InputData: strings.Repeat("x", MaxCaseBytes)}, {InputData: strings.Repeat("x", MaxCaseBytes)}, {InputData: "x"}}}, "total"},
		{"too many args", Request{Args: []string{"a"}, TestCases: []TestCase{{Args: manyArgs}}}, "too many arguments"},
		{"NUL arg", Request{TestCases: []TestCase{{Args: []string{"a\x00b"}}}}, "NUL"},
		{"long args", Request{TestCases: []TestCase{{Args: []string{strings.Repeat("a", MaxArgBytes+1)}}}}, "arguments total"},
	} {
		t.Run(c.name, func(t *testing.T) {
			req := c.req
			req.Language, req.Code = "python", []byte(pySum)
			res, err := testExec.Execute(context.Background(), &req)
			var ire *InvalidRequestError
			if !errors.As(err, &ire) {
				t.Fatalf("err = %v (%T), result %+v; want *InvalidRequestError", err, err, res)
			}
			if !strings.Contains(err.Error(), c.msg) {
				t.Errorf("error %q does not mention %q", err, c.msg)
			}
		})
	}
	// The limits themselves are accepted.
	if err := validateBatch(&Request{TestCases: make([]TestCase, MaxTestCases), Compare: CompareFloat, FloatTolerance: 0}); err != nil {
		t.Errorf("%d cases: %v", MaxTestCases, err)
	}
}

func TestMatch(t *testing.T) {
	for _, c := range []struct {
		mode      string
		tolerance float64
		out, exp  string
		want      bool
	}{
		// exact
		{CompareExact, 0, "3\n", "3\n", true},
		{CompareExact, 0, "3\n", "3", false},
		{CompareExact, 0, "3 \n", "3\n", false},
		{CompareExact, 0, "", "", true},
		{CompareExact, 0, "a\r\n", "a\n", false},
		// lines (and the default)
		{CompareLines, 0, "3\n", "3", true},
		{CompareLines, 0, "3 \t\n\n\n", "3", true},
		{CompareLines, 0, "a\r\nb\r\n", "a\nb", true},
		{CompareLines, 0, "a\n\nb\n", "a\nb\n", false}, // inner blank lines count
		{CompareLines, 0, " a\n", "a\n", false},        // leading space counts
		{CompareLines, 0, "a b\n", "a  b\n", false},
		{CompareLines, 0, "", "\n\n", true},
		{CompareLines, 0, "x", "", false},
		{"", 0, "3 \n", "3", true},
		{"", 0, "3\n4\n", "3\n", false},
		// float
		{CompareFloat, 0, "0.3333333", "0.333333", true},
		{CompareFloat, 0, "0.3334", "0.3333", false},
		{CompareFloat, 1e-3, "0.3334", "0.3333", true},
		{CompareFloat, 0, "1000000.5", "1000000", true}, // relative: 5e-7
		{CompareFloat, 0, "1000002", "1000000", false},  // relative: 2e-6
		{CompareFloat, 0, "1e-9", "0", true},            // absolute
		{CompareFloat, 0, "1.0 2.0\n3.0\n", "1 2 3", true},
		{CompareFloat, 0, "1 2", "1 2 3", false},
		{CompareFloat, 0, "yes 1.0", "yes 1", true},
		{CompareFloat, 0, "YES 1.0", "yes 1", false},
		{CompareFloat, 0, "abc", "abc", true},
		{CompareFloat, 0, "1.0", "one", false},
		{CompareFloat, 0, "nan", "NaN", true},
		{CompareFloat, 0, "nan", "1", false},
		{CompareFloat, 0, "inf", "+Inf", true},
		{CompareFloat, 0, "inf", "-inf", false},
		{CompareFloat, 1e300, "inf", "1e308", false},
		{CompareFloat, 0, "", "\n", true},
		{CompareFloat, 0, "-0", "0", true},
	} {
		if got := Match(c.mode, c.tolerance, []byte(c.out), []byte(c.exp)); got != c.want {
			t.Errorf("Match(%q, %g, %q, %q) = %v, want %v", c.mode, c.tolerance, c.out, c.exp, got, c.want)
		}
	}
}
