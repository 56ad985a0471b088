package live

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sandbox-run/sandbox-run/pkg/live/agent"
)

// RunOptions bound a process that Run waits for.
type RunOptions struct {
	// MaxOutput bounds what is kept of its stdout and of its stderr, each,
	// in bytes (0: no bound).
	MaxOutput int
	// Timeout is how long it may run: past it its process group is killed
	// (0: no limit).
	Timeout time.Duration
}

// RunResult is what a process run by Run did.
type RunResult struct {
	PID int
	// Stdout (with a terminal's output) and Stderr are its outputs, each
	// cut at RunOptions.MaxOutput (then Truncated says so).
	Stdout, Stderr                   []byte
	StdoutTruncated, StderrTruncated bool
	// ExitCode is its exit code: -1 when a signal ended it (as when it
	// timed out), or when it has none (Gone).
	ExitCode int
	// Status says how it ended ("exit status 3", "signal: killed"); Error
	// why, when it did not exit on its own (or what Gone was).
	Status, Error string
	// TimedOut: it ran past RunOptions.Timeout and was killed.
	TimedOut bool
	// Gone: the sandbox went away before the process ended.
	Gone bool
}

// killGrace is how long Run waits for the end of a process it killed.
const killGrace = 30 * time.Second

// Run runs the process r describes in s (as Start does) and waits for its
// end. An *Error is the agent's refusal to start it. When ctx ends first
// (the caller went away), the process is killed and ctx's error returned;
// so is an error when a process killed past its timeout does not end
// within killGrace.
func (s *Sandbox) Run(ctx context.Context, r agent.Request, o RunOptions) (RunResult, error) {
	p, sub, err := s.Start(ctx, r)
	if err != nil {
		return RunResult{}, err
	}
	defer sub.Close()
	res := RunResult{PID: p.PID, ExitCode: -1}
	wait := ctx
	if o.Timeout > 0 {
		var cancel context.CancelFunc
		wait, cancel = context.WithTimeout(ctx, o.Timeout)
		defer cancel()
	}
	for {
		ev, err := sub.Next(wait)
		switch {
		case errors.Is(err, ErrEnded): // after the last event: never
			return res, errors.New("live: the process's events ended before its end")
		case err != nil && ctx.Err() != nil:
			_ = s.Signal(p.PID, 9)
			return res, ctx.Err()
		case err != nil && res.TimedOut:
			return res, fmt.Errorf("live: process %d was killed but did not end within %v", p.PID, killGrace)
		case err != nil:
			res.TimedOut = true
			_ = s.Signal(p.PID, 9)
			grace, cancel := context.WithTimeout(ctx, killGrace)
			defer cancel() // once: TimedOut
			wait = grace
			continue
		}
		switch ev.Type {
		case agent.EvStdout, agent.EvPTY:
			res.Stdout, res.StdoutTruncated = appendBounded(res.Stdout, ev.Data, o.MaxOutput, res.StdoutTruncated)
		case agent.EvStderr:
			res.Stderr, res.StderrTruncated = appendBounded(res.Stderr, ev.Data, o.MaxOutput, res.StderrTruncated)
		case agent.EvExit:
			if ev.Exit != nil {
				res.ExitCode = *ev.Exit
			}
			res.Status, res.Error = ev.Status, ev.Error
			return res, nil
		case agent.EvError:
			res.Gone, res.Error = true, ev.Error
			return res, nil
		}
	}
}

// appendBounded appends data to b up to limit bytes in all (0: no limit),
// and says whether anything was left out (cut: already).
func appendBounded(b, data []byte, limit int, cut bool) ([]byte, bool) {
	if room := limit - len(b); limit > 0 && len(data) > room {
		return append(b, data[:max(room, 0)]...), true
	}
	return append(b, data...), cut
}

// Signal sends sig to process pid's group in s (for at most 10 s),
// whatever the context of the call that asks does meanwhile.
func (s *Sandbox) Signal(pid, sig int) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := s.client.Call(ctx, agent.Request{Op: agent.OpSignal, PID: pid, Signal: sig})
	return err
}
