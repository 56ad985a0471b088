//go:build !linux

package egress

import (
	"context"
	"os"
)

// Egress serves one run's TUN device; only Linux has one.
type Egress struct{}

// Start returns ErrUnsupported off Linux.
func Start(ctx context.Context, tun *os.File, cfg Config) (*Egress, error) {
	return nil, ErrUnsupported
}

// Close does nothing off Linux.
func (e *Egress) Close() error { return nil }

// Stats is empty off Linux.
func (e *Egress) Stats() Stats { return Stats{} }

// SetPolicy does nothing off Linux.
func (e *Egress) SetPolicy(Policy) {}

// SetBudgets does nothing off Linux.
func (e *Egress) SetBudgets(map[string]int64) {}
