package api

import (
	"github.com/sandbox-run/sandbox-run/pkg/executor"
	"github.com/sandbox-run/sandbox-run/pkg/local"
	"github.com/sandbox-run/sandbox-run/pkg/runner"
)

// The tests build servers over executors (real ones and fakes) as the
// wiring does: the executor behind pkg/local's backend.

// Executor is what a test's executor provides (local.Executor).
type Executor = local.Executor

// NewExecutor builds the executor cfg describes (local.NewExecutor).
func NewExecutor(cfg Config) (*executor.Executor, error) { return local.NewExecutor(cfg) }

// toExecutor is req as the backend hands it to the executor.
func toExecutor(req *ExecuteRequest) *executor.Request {
	return local.Request(&runner.Run{Request: req})
}
