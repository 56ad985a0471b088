package executor

// TestCase is one input of a test-case batch and what it should print.
type TestCase struct {
	InputData      string   `json:"input_data,omitempty"`
	ExpectedOutput *string  `json:"expected_output,omitempty"`
	Args           []string `json:"args,omitempty"`
}

// CaseResult is the outcome of one test case.
type CaseResult struct {
	Index int `json:"index"`
	Outcome
	StdoutTruncated bool `json:"stdout_truncated"`
	// Verdict is accepted or wrong_answer when the case has an expected
	// output and the run completed; otherwise it names the failure
	// (error_runtime, timeout, ...), or is empty without an expectation.
	Verdict string `json:"verdict,omitempty"`
}

// BatchSummary counts a batch's verdicts.
type BatchSummary struct {
	Total    int `json:"total"`
	Accepted int `json:"accepted"`
	Failed   int `json:"failed"`
}
