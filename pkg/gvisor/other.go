//go:build !linux

package gvisor

import (
	"context"
	"errors"

	"github.com/sandbox-run/sandbox-run/pkg/sandbox"
)

// Runner runs specs under gVisor: on Linux only.
type Runner struct{}

// New fails: gVisor runs on Linux only.
func New(Config) (*Runner, error) { return nil, errors.New("gvisor: runs on Linux only") }

// Run fails: gVisor runs on Linux only.
func (*Runner) Run(context.Context, *sandbox.Spec) (*sandbox.Result, error) {
	return nil, errors.New("gvisor: runs on Linux only")
}

// Close does nothing.
func (*Runner) Close() error { return nil }

// Diagnose says gVisor does not run here.
func Diagnose(Config) sandbox.Check {
	return sandbox.Check{Name: "gvisor", Detail: "gVisor runs on Linux only"}
}

// Quiesce does nothing.
func (*Runner) Quiesce() {}

// Leftovers is none.
func (*Runner) Leftovers() []string { return nil }
