//go:build !linux

package sandbox

import (
	"context"
	"net"
	"time"
)

// Config sets up an Engine.
type Config struct {
	CgroupParent string
	UIDBase      int
	UIDSlots     int
	Executable   string
	PoolSize     int
	PoolIdle     time.Duration
}

// Engine runs sandboxes; only Linux has one.
type Engine struct{}

// Process is a started run.
type Process struct{}

// CgroupInfo describes the host's cgroup setup.
type CgroupInfo struct {
	Version     int
	Parents     map[string]string
	Controllers []string
}

// Init does nothing off Linux.
func Init() {}

// New reports that sandboxing needs Linux.
func New(Config) (*Engine, error) { return nil, ErrUnsupported }

// Default reports that sandboxing needs Linux.
func Default() (*Engine, error) { return nil, ErrUnsupported }

// Run reports that sandboxing needs Linux.
func Run(context.Context, *Spec) (*Result, error) { return nil, ErrUnsupported }

// Run reports that sandboxing needs Linux.
func (e *Engine) Run(context.Context, *Spec) (*Result, error) { return nil, ErrUnsupported }

// Start reports that sandboxing needs Linux.
func (e *Engine) Start(context.Context, *Spec) (*Process, error) { return nil, ErrUnsupported }

// Cgroups is empty off Linux.
func (e *Engine) Cgroups() CgroupInfo { return CgroupInfo{} }

// Wait reports that sandboxing needs Linux.
func (p *Process) Wait() (*Result, error) { return nil, ErrUnsupported }

// Kill does nothing off Linux.
func (p *Process) Kill() {}

// DialTCP reports that sandboxing needs Linux.
func (p *Process) DialTCP(context.Context, int) (net.Conn, error) { return nil, ErrUnsupported }

// Prioritize does nothing where there is no sandbox.
func (p *Process) Prioritize() error { return ErrUnsupported }

// SignalNumber knows no signals off Linux.
func SignalNumber(string) int { return 0 }

// EnableInitCoverage does nothing off Linux.
func (e *Engine) EnableInitCoverage(string) error { return nil }

// Prewarm reports that sandboxing needs Linux.
func (e *Engine) Prewarm(*Spec, int) error { return ErrUnsupported }

// Drain does nothing off Linux.
func (e *Engine) Drain() {}

// Close does nothing off Linux.
func (e *Engine) Close() error { return nil }

// NoPool as Config.PoolSize makes an engine for one-shot use.
const NoPool = -1

// CloseDefault does nothing off Linux.
func CloseDefault() {}

// Quiesce does nothing off Linux.
func (e *Engine) Quiesce() {}

// Stats reports that sandboxing needs Linux.
func (p *Process) Stats() (Stats, error) { return Stats{}, ErrUnsupported }

// Detach reports that sandboxing needs Linux.
func (p *Process) Detach() (*Detached, error) { return nil, ErrUnsupported }

// Adopted is a detached run taken over; only Linux has them.
type Adopted struct{}

// Adopt reports that sandboxing needs Linux.
func (e *Engine) Adopt(*Detached) (*Adopted, error) { return nil, ErrUnsupported }

// Wait reports that sandboxing needs Linux.
func (a *Adopted) Wait() error { return ErrUnsupported }

// Kill does nothing off Linux.
func (a *Adopted) Kill() {}

// DialTCP reports that sandboxing needs Linux.
func (a *Adopted) DialTCP(context.Context, int) (net.Conn, error) { return nil, ErrUnsupported }

// Stats reports that sandboxing needs Linux.
func (a *Adopted) Stats() (Stats, error) { return Stats{}, ErrUnsupported }

// Detach reports that sandboxing needs Linux.
func (a *Adopted) Detach() (*Detached, error) { return nil, ErrUnsupported }

// AttachNetwork is unsupported off Linux.
func (a *Adopted) AttachNetwork(*Network) error { return ErrUnsupported }

// Freeze reports that sandboxing needs Linux.
func (p *Process) Freeze(context.Context) error { return ErrUnsupported }

// Thaw reports that sandboxing needs Linux.
func (p *Process) Thaw() error { return ErrUnsupported }

// Freeze reports that sandboxing needs Linux.
func (a *Adopted) Freeze(context.Context) error { return ErrUnsupported }

// Thaw reports that sandboxing needs Linux.
func (a *Adopted) Thaw() error { return ErrUnsupported }

// SaveFiles reports that sandboxing needs Linux.
func (p *Process) SaveFiles(context.Context, string, int64) (int64, error) { return 0, ErrUnsupported }

// LoadFiles reports that sandboxing needs Linux.
func (p *Process) LoadFiles(string) error { return ErrUnsupported }

// SaveFiles reports that sandboxing needs Linux.
func (a *Adopted) SaveFiles(context.Context, string, int64) (int64, error) { return 0, ErrUnsupported }

// LoadFiles reports that sandboxing needs Linux.
func (a *Adopted) LoadFiles(string) error { return ErrUnsupported }
