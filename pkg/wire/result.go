package wire

import "encoding/json"

// Status is the outcome of an execution, as in the seed API.
type Status string

// The statuses of an execution.
const (
	StatusCompleted    Status = "completed"     // ran and exited 0
	StatusRuntimeError Status = "error_runtime" // non-zero exit, signal, or a limit other than time
	StatusTimeout      Status = "timeout"       // the wall or CPU time limit ended it
	StatusCompileError Status = "error_compile" // the compile step failed
	StatusSetupError   Status = "error_setup"   // the sandbox could not be built
)

// Outcome is what one sandboxed step did: the run, or the compile.
type Outcome struct {
	Status         Status  `json:"status"`
	Stdout         string  `json:"stdout"`
	Stderr         string  `json:"stderr"`
	StdoutEncoding string  `json:"stdout_encoding,omitempty"` // "base64" when not UTF-8
	StderrEncoding string  `json:"stderr_encoding,omitempty"`
	ExitCode       int     `json:"exit_code"`
	Signal         string  `json:"signal,omitempty"`
	LimitReason    string  `json:"limit_reason,omitempty"`
	DurationMs     float64 `json:"duration_ms"`
	CPUTimeMs      float64 `json:"cpu_time_ms"`
	MemoryUsedMB   float64 `json:"memory_used_mb"`
}

// Result is the outcome of an execution. Its JSON form is the seed API's.
type Result struct {
	ExecutionID string `json:"execution_id"`
	Outcome
	Language string `json:"language,omitempty"`
	Version  string `json:"version,omitempty"`
	// Image and ImageDigest say which OCI image the run had as its root
	// (the reference as the store knows it, and its manifest's digest).
	Image       string `json:"image,omitempty"`
	ImageDigest string `json:"image_digest,omitempty"`
	// Isolation is the wall the run was behind when it was not the
	// engine alone ("gvisor"); absent: native.
	Isolation       string        `json:"isolation,omitempty"`
	StdoutTruncated bool          `json:"stdout_truncated"`
	StderrTruncated bool          `json:"stderr_truncated"`
	OutputFiles     OutputFiles   `json:"output_files"`
	SkippedFiles    []Skipped     `json:"skipped_files,omitempty"`
	Compile         *StepResult   `json:"compile,omitempty"`
	TestCases       []CaseResult  `json:"test_cases,omitempty"`
	Summary         *BatchSummary `json:"summary,omitempty"`
	Error           string        `json:"error,omitempty"`

	// ReturnValue is the entry point's return value as JSON (null when it
	// returned nothing); Exception what it raised instead, or why its value
	// could not be serialized.
	ReturnValue json.RawMessage `json:"return_value,omitempty"`
	Exception   *Exception      `json:"exception,omitempty"`
	// Value, Display and Restarted are an interpreter session's cell's
	// (SessionRequest.Interpreter): the value of its last expression and
	// what it displayed (figures, tables), each by MIME type as a notebook
	// has them ("text/plain", "text/html", "image/png" in base64, ...);
	// Restarted says the interpreter had to be started again (its state
	// is lost).
	Value     map[string]string   `json:"result,omitempty"`
	Display   []map[string]string `json:"display,omitempty"`
	Restarted bool                `json:"restarted,omitempty"`
	// Network is what a run with network access (ExecuteRequest.Network)
	// tried: every destination, allowed or denied, and the bytes each way.
	Network *NetworkReport `json:"network,omitempty"`
	// Worker names the worker of a cluster that ran it (none on a single
	// node).
	Worker string `json:"worker,omitempty"`
	// AutoTimeoutSeconds is the wall-time limit an automatic timeout chose.
	AutoTimeoutSeconds float64 `json:"auto_timeout_seconds,omitempty"`
	// ResponseTruncated is true when the response budget
	// (Request.MaxResponseBytes) ran out: some output was cut (the
	// *_truncated flags) or some output files were skipped (SkippedFiles,
	// with ReasonResponseBudget).
	ResponseTruncated bool `json:"response_truncated,omitempty"`
}

// StepResult is the compile step's own outcome.
type StepResult struct {
	Outcome
	// CacheHit is true when no compiler ran for this request: the artefacts
	// and this outcome (output, times) are those of an identical compile,
	// kept in the compile cache or running at the same time.
	CacheHit bool `json:"cache_hit"`
}

// Skipped is an output file that was not returned, and why.
type Skipped struct {
	Path   string `json:"path"`
	Reason string `json:"reason"`
}

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
	StderrTruncated bool `json:"stderr_truncated,omitempty"`
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

// The verdicts of a case whose run completed.
const (
	VerdictAccepted    = "accepted"
	VerdictWrongAnswer = "wrong_answer"
)

// Entrypoint names what an execution calls instead of running the code as
// a script: a method of a class (instantiated without arguments) or a plain
// function, with parameters given as a JSON object (keyword arguments in
// Python). Exactly one of ClassName+MethodName and Function is set.
type Entrypoint struct {
	ClassName    string          `json:"class_name,omitempty"`
	MethodName   string          `json:"method_name,omitempty"`
	MethodParams json.RawMessage `json:"method_params,omitempty"`
	Function     string          `json:"function,omitempty"`
	Params       json.RawMessage `json:"params,omitempty"`
}

// Exception is an error raised (thrown) by the called entry point, or the
// failure to serialize its return value.
type Exception struct {
	Type      string `json:"type"`
	Message   string `json:"message"`
	Traceback string `json:"traceback"`
}

// NetworkReport is what a run's network access did.
type NetworkReport struct {
	Destinations []Destination `json:"destinations"`
	// Allowed and Denied count connections, name lookups and datagrams.
	Allowed int `json:"allowed"`
	Denied  int `json:"denied"`
	// BytesOut and BytesIn are the bytes sent and received over every
	// connection.
	BytesOut int64 `json:"bytes_out"`
	BytesIn  int64 `json:"bytes_in"`
	// Limit names the limit the run reached, if one: "connections",
	// "bytes_out" or "bytes_in".
	Limit string `json:"limit,omitempty"`
	// Dropped counts destinations left out of Destinations past its cap.
	Dropped int `json:"dropped,omitempty"`
	// Requests are the run's HTTP and HTTPS requests, as its program sent
	// them (placeholders, never secrets), when its egress carried them
	// (a run with secrets); RequestsDropped counts those past the cap.
	Requests        []HTTPRequest `json:"requests,omitempty"`
	RequestsDropped int           `json:"requests_dropped,omitempty"`
}

// HTTPRequest is one HTTP or HTTPS request a run made, as its egress
// logged it (pkg/intercept). No field ever holds a secret's value.
type HTTPRequest struct {
	// Scheme is "http" or "https".
	Scheme string `json:"scheme"`
	// Host is the Host header as the program sent it (the authority of an
	// absolute request-URI if it used one).
	Host   string `json:"host"`
	Method string `json:"method"`
	// Path is the request-URI as the program sent it, placeholders
	// included.
	Path string `json:"path"`
	// Status is the final status code the program received (from the
	// upstream, or the egress's own 400, 405, 431 or 502); 0 when none.
	Status int `json:"status"`
	// BytesOut counts the request's bytes sent upstream (headers and
	// body); BytesIn the response's returned to the program
	// (informational responses included, upgraded traffic excluded).
	BytesOut int64 `json:"bytes_out"`
	BytesIn  int64 `json:"bytes_in"`
	// Secrets names the secrets put in place of their placeholders, or
	// set as a header.
	Secrets []string `json:"secrets,omitempty"`
	// Error says what went wrong, if anything.
	Error string `json:"error,omitempty"`
}

// Destination is one destination a run tried to reach.
type Destination struct {
	// Host is the name the run looked up, or the address it used.
	Host string `json:"host"`
	IP   string `json:"ip,omitempty"`
	Port int    `json:"port,omitempty"`
	// Protocol is tcp, udp or dns (a name looked up).
	Protocol string `json:"protocol"`
	Allowed  bool   `json:"allowed"`
	// Reason says why it was denied; Error what failed on the way to an
	// allowed one (the server's connect, the name's lookup).
	Reason      string `json:"reason,omitempty"`
	Error       string `json:"error,omitempty"`
	Connections int    `json:"connections"`
	BytesOut    int64  `json:"bytes_out"`
	BytesIn     int64  `json:"bytes_in"`
}
