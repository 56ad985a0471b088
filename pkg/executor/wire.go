package executor

import "github.com/sandbox-run/sandbox-run/pkg/wire"

// The result types are the API's: they live in pkg/wire, which clients
// import without the executor.
type (
	Status       = wire.Status
	Outcome      = wire.Outcome
	Result       = wire.Result
	StepResult   = wire.StepResult
	Skipped      = wire.Skipped
	TestCase     = wire.TestCase
	CaseResult   = wire.CaseResult
	BatchSummary = wire.BatchSummary
	Entrypoint   = wire.Entrypoint
	Exception    = wire.Exception
	FileData     = wire.FileData
	OutputFiles  = wire.OutputFiles
)

// The statuses of an execution (see wire.Status).
const (
	StatusCompleted    = wire.StatusCompleted
	StatusRuntimeError = wire.StatusRuntimeError
	StatusTimeout      = wire.StatusTimeout
	StatusCompileError = wire.StatusCompileError
	StatusSetupError   = wire.StatusSetupError
)

// The verdicts of a case whose run completed.
const (
	VerdictAccepted    = wire.VerdictAccepted
	VerdictWrongAnswer = wire.VerdictWrongAnswer
)

// ReasonResponseBudget is the reason of an output file skipped because
// the response budget ran out.
const ReasonResponseBudget = wire.ReasonResponseBudget

// DefaultMaxResponseBytes is the response budget when neither the request
// nor the executor's configuration sets one.
const DefaultMaxResponseBytes = wire.DefaultMaxResponseBytes

// EncodeOutput returns output as JSON should carry it: the text, or base64
// with encoding "base64" (see wire.EncodeOutput).
func EncodeOutput(b []byte) (data, encoding string) { return wire.EncodeOutput(b) }

// SessionFile is one regular file a session keeps in /work.
type SessionFile = wire.SessionFile
