package executor

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sandbox-run/sandbox-run/pkg/sandbox"
)

// Test-case batches
//
// A request with TestCases compiles the program once (as any request) and
// then runs it once per case, each in a fresh sandbox with the same limits
// as a normal run, at most batchParallelism at a time. A case's stdin is
// its InputData; its arguments are the request's Args followed by its own.
//
// Each case gets a Verdict:
//   - accepted / wrong_answer: the run completed (exit 0, no limit) and the
//     case has an ExpectedOutput, which its stdout did or did not match;
//   - the run's status (error_runtime, timeout, error_setup) when the run
//     did not complete, whether or not the case has an expectation;
//   - "" when the run completed and the case has no expectation.
//
// Summary.Total counts every case, Accepted the accepted ones, Failed the
// wrong answers and the failed runs; cases with an empty verdict count in
// neither.
//
// The Result's Status is completed when every run completed, wrong answers
// included: verdicts are in TestCases and Summary. Otherwise it is the
// worst status among the cases (error_setup, then timeout, then
// error_runtime), with the exit code, signal and limit reason of the first
// case that has it. A compile error ends the batch with error_compile, as
// for a single run. The top-level Stdout and Stderr are empty (each case
// carries its own), DurationMs is the wall time of all the runs, CPUTimeMs
// their sum and MemoryUsedMB their maximum. Live writers (Request.Stdout,
// Stderr) are not used: cases run in parallel.

// The ways outputs meet expectations (Request.Compare).
const (
	CompareExact = "exact" // byte for byte
	CompareLines = "lines" // line by line, trailing whitespace and blank lines ignored (the default)
	CompareFloat = "float" // token by token, numbers within FloatTolerance
)

// Batch bounds.
const (
	// MaxTestCases is the most cases one request may carry.
	MaxTestCases = 100
	// MaxCaseBytes bounds one case's input, and its expected output.
	MaxCaseBytes = MaxFileBytes
	// DefaultFloatTolerance is used by the float comparison when the
	// request sets none.
	DefaultFloatTolerance = 1e-6
)

// batchParallelism is how many cases of one batch run at once.
var batchParallelism = runtime.NumCPU()

// validateBatch checks the test-case fields of a request.
func validateBatch(req *Request) error {
	if len(req.TestCases) == 0 {
		return nil
	}
	if len(req.TestCases) > MaxTestCases {
		return invalid("too many test cases: %d (at most %d)", len(req.TestCases), MaxTestCases)
	}
	if req.SessionID != "" {
		return invalid("test cases cannot run in a session")
	}
	if req.Stdin != nil {
		return invalid("input_data and test cases cannot be combined: give each case its input_data")
	}
	if len(req.OutputFiles) > 0 {
		return invalid("output_files and test cases cannot be combined")
	}
	switch req.Compare {
	case "", CompareExact, CompareLines, CompareFloat:
	default:
		return invalid("invalid compare %q: use exact, lines or float", req.Compare)
	}
	if req.FloatTolerance < 0 || math.IsNaN(req.FloatTolerance) || math.IsInf(req.FloatTolerance, 0) {
		return invalid("float_tolerance must be a finite number >= 0")
	}
	var total int64
	for i, c := range req.TestCases {
		if len(c.InputData) > MaxCaseBytes {
			return invalid("test case %d: input_data is %d bytes (at most %d)", i, len(c.InputData), MaxCaseBytes)
		}
		total += int64(len(c.InputData))
		if c.ExpectedOutput != nil {
			if len(*c.ExpectedOutput) > MaxCaseBytes {
				return invalid("test case %d: expected_output is %d bytes (at most %d)", i, len(*c.ExpectedOutput), MaxCaseBytes)
			}
			total += int64(len(*c.ExpectedOutput))
		}
		args := append(append([]string(nil), req.Args...), c.Args...)
		if len(args) > MaxArgs {
			return invalid("test case %d: too many arguments: %d (at most %d)", i, len(args), MaxArgs)
		}
		n := 0
		for _, a := range args {
			n += len(a)
			if strings.ContainsRune(a, 0) {
				return invalid("test case %d: argument contains a NUL byte", i)
			}
		}
		if n > MaxArgBytes {
			return invalid("test case %d: arguments total %d bytes (at most %d)", i, n, MaxArgBytes)
		}
	}
	if total > MaxTotalBytes {
		return invalid("test cases total %d bytes of input and expected output (at most %d)", total, MaxTotalBytes)
	}
	return nil
}

// runBatch runs every test case against runFiles (the sources and, for
// compiled languages, the artefacts) and completes res.
func (x *Executor) runBatch(ctx context.Context, lang *Language, tc *Toolchain, req *Request, vars map[string]string, runFiles []sandbox.File, res *Result) (*Result, error) {
	limits := x.runLimits(req, lang, vars)
	run := expandAll(lang.Run, vars)
	env := environment(lang, tc, vars, req.Env)
	mounts := x.mounts(tc)

	start := time.Now()
	cases := make([]CaseResult, len(req.TestCases))
	errs := make([]string, len(req.TestCases))
	sem := make(chan struct{}, max(batchParallelism, 1))
	var wg sync.WaitGroup
	for i, c := range req.TestCases {
		cases[i].Index = i
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			cases[i].Outcome = Outcome{Status: StatusSetupError, ExitCode: -1, LimitReason: string(sandbox.LimitCanceled)}
			errs[i] = ctx.Err().Error()
			continue
		}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			spec := &sandbox.Spec{
				Args:   append(append(append([]string(nil), run...), req.Args...), c.Args...),
				Env:    env,
				Mounts: mounts,
				Root:   tc.Root,
				Files:  runFiles,
				Limits: limits,
				Budget: req.budget,
				Tenant: req.Tenant,
			}
			if c.InputData != "" {
				spec.Stdin = strings.NewReader(c.InputData)
			}
			out, err := x.isolator(req).Run(ctx, spec)
			if err != nil {
				cases[i].Outcome = Outcome{Status: StatusSetupError, ExitCode: -1}
				errs[i] = err.Error()
				return
			}
			cases[i].Outcome = outcomeOf(out)
			cases[i].StdoutTruncated, cases[i].StderrTruncated = out.StdoutTruncated, out.StderrTruncated
			if cases[i].Status == StatusCompleted && c.ExpectedOutput != nil {
				if Match(req.Compare, req.FloatTolerance, out.Stdout, []byte(*c.ExpectedOutput)) {
					cases[i].Verdict = VerdictAccepted
				} else {
					cases[i].Verdict = VerdictWrongAnswer
				}
			}
		}()
	}
	wg.Wait()

	res.Outcome = Outcome{Status: StatusCompleted, DurationMs: ms(time.Since(start))}
	sum := &BatchSummary{Total: len(cases)}
	var cpu float64
	for i := range cases {
		c := &cases[i]
		if c.Status != StatusCompleted {
			c.Verdict = string(c.Status)
		}
		switch c.Verdict {
		case VerdictAccepted:
			sum.Accepted++
		case "":
		default:
			sum.Failed++
		}
		cpu += c.CPUTimeMs
		res.MemoryUsedMB = max(res.MemoryUsedMB, c.MemoryUsedMB)
		if severity(c.Status) > severity(res.Status) {
			res.Status, res.ExitCode, res.Signal, res.LimitReason = c.Status, c.ExitCode, c.Signal, c.LimitReason
		}
		if errs[i] != "" && res.Error == "" {
			res.Error = fmt.Sprintf("test case %d: %s", i, errs[i])
		}
	}
	res.CPUTimeMs = math.Round(cpu*100) / 100
	res.TestCases, res.Summary = cases, sum
	return res, nil
}

// severity orders statuses for a batch's overall status.
func severity(s Status) int {
	switch s {
	case StatusCompleted:
		return 0
	case StatusRuntimeError:
		return 1
	case StatusTimeout:
		return 2
	}
	return 3
}

// Match reports whether output meets expected under a comparison mode
// ("exact", "lines", "float"; "" is lines). tolerance applies to float and
// defaults to DefaultFloatTolerance when zero.
func Match(mode string, tolerance float64, output, expected []byte) bool {
	switch mode {
	case CompareExact:
		return bytes.Equal(output, expected)
	case CompareFloat:
		if tolerance <= 0 {
			tolerance = DefaultFloatTolerance
		}
		return matchFloat(output, expected, tolerance)
	}
	return matchLines(output, expected)
}

// matchLines compares line by line after stripping each line's trailing
// whitespace (\r included) and the trailing blank lines.
func matchLines(output, expected []byte) bool {
	a, b := normalLines(output), normalLines(expected)
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !bytes.Equal(a[i], b[i]) {
			return false
		}
	}
	return true
}

func normalLines(s []byte) [][]byte {
	lines := bytes.Split(s, []byte("\n"))
	for i, l := range lines {
		lines[i] = bytes.TrimRight(l, " \t\r\v\f")
	}
	for len(lines) > 0 && len(lines[len(lines)-1]) == 0 {
		lines = lines[:len(lines)-1]
	}
	return lines
}

// matchFloat compares whitespace-separated tokens: two tokens that both
// parse as numbers match when within tolerance, absolutely or relatively
// to the larger magnitude; any other tokens must be equal.
func matchFloat(output, expected []byte, tolerance float64) bool {
	a, b := bytes.Fields(output), bytes.Fields(expected)
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if bytes.Equal(a[i], b[i]) {
			continue
		}
		x, errX := strconv.ParseFloat(string(a[i]), 64)
		y, errY := strconv.ParseFloat(string(b[i]), 64)
		if errX != nil || errY != nil || !floatsClose(x, y, tolerance) {
			return false
		}
	}
	return true
}

func floatsClose(x, y, tolerance float64) bool {
	switch {
	case math.IsNaN(x) || math.IsNaN(y):
		return math.IsNaN(x) && math.IsNaN(y)
	case math.IsInf(x, 0) || math.IsInf(y, 0):
		return x == y
	}
	d := math.Abs(x - y)
	return d <= tolerance || d <= tolerance*math.Max(math.Abs(x), math.Abs(y))
}
