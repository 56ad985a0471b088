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

// Live is a live sandbox under gVisor: on Linux only.
type Live struct{}

// LiveRecord is what takes a Live over.
type LiveRecord struct {
	ID  string `json:"id"`
	Dir string `json:"dir"`
}

var errLinux = errors.New("gvisor: runs on Linux only")

// StartLive fails: gVisor runs on Linux only.
func (*Runner) StartLive(context.Context, *sandbox.Spec) (*Live, error) { return nil, errLinux }

// AdoptLive fails: gVisor runs on Linux only.
func (*Runner) AdoptLive(LiveRecord) (*Live, error) { return nil, errLinux }

// The methods of a Live, which never exists here.
func (*Live) Wait() error                                             { return errLinux }
func (*Live) Kill()                                                   {}
func (*Live) Detach() error                                           { return errLinux }
func (*Live) Pause(context.Context) error                             { return errLinux }
func (*Live) Resume() error                                           { return errLinux }
func (*Live) LoadFiles(string) error                                  { return errLinux }
func (*Live) Stats() (sandbox.Stats, error)                           { return sandbox.Stats{}, errLinux }
func (*Live) Record() LiveRecord                                      { return LiveRecord{} }
func (*Live) SaveFiles(context.Context, string, int64) (int64, error) { return 0, errLinux }
func (*Live) AttachNetwork(*sandbox.Network) error                    { return errLinux }

// Checkpoint fails: gVisor runs on Linux only.
func (*Live) Checkpoint(context.Context, string, int64) (int64, error) { return 0, errLinux }

// RestoreLive fails: gVisor runs on Linux only.
func (*Runner) RestoreLive(context.Context, *sandbox.Spec, string) (*Live, error) {
	return nil, errLinux
}
