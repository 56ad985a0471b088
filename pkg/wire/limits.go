package wire

import (
	"fmt"
	"math"
)

// Bounds of what a request and a session may hold, the same for every
// server (its configuration may only lower them).
const (
	// MaxFileBytes is the most one file of an execution may hold (a
	// request's files, a stored file it names, an entry point).
	MaxFileBytes = 16 << 20
	// MaxSessionBytes is the most a session keeps between executions: the
	// files of /work are collected up to this total after each run, and
	// the rest are dropped.
	MaxSessionBytes = 48 << 20
	// MaxTotalBytes is the most an execution's code and files (and its
	// test cases' inputs and outputs) may hold together.
	MaxTotalBytes = 48 << 20
)

// Limits are a run's limits as a request, a session (its runs' defaults)
// and every transport give them: flat in the JSON of each. Zero leaves a
// limit to the next in line: the request's to its session's, the
// session's to the language's and then the server's defaults (Or). They
// are checked against the server's maximums once (Within).
type Limits struct {
	TimeoutSeconds        float64 `json:"timeout_seconds,omitempty"`
	CPUTimeSeconds        float64 `json:"cpu_time_seconds,omitempty"`
	MaxMemoryMB           int64   `json:"max_memory_mb,omitempty"`
	MaxProcesses          int     `json:"max_processes,omitempty"`
	MaxOutputBytes        int64   `json:"max_output_bytes,omitempty"`
	MaxFileSizeBytes      int64   `json:"max_file_size_bytes,omitempty"`
	CompileTimeoutSeconds float64 `json:"compile_timeout_seconds,omitempty"`
}

// Or is l with each limit it leaves at zero taken from d.
func (l Limits) Or(d Limits) Limits {
	orF := func(a, b float64) float64 {
		if a == 0 {
			return b
		}
		return a
	}
	orI := func(a, b int64) int64 {
		if a == 0 {
			return b
		}
		return a
	}
	l.TimeoutSeconds = orF(l.TimeoutSeconds, d.TimeoutSeconds)
	l.CPUTimeSeconds = orF(l.CPUTimeSeconds, d.CPUTimeSeconds)
	l.CompileTimeoutSeconds = orF(l.CompileTimeoutSeconds, d.CompileTimeoutSeconds)
	l.MaxMemoryMB = orI(l.MaxMemoryMB, d.MaxMemoryMB)
	l.MaxProcesses = int(orI(int64(l.MaxProcesses), int64(d.MaxProcesses)))
	l.MaxOutputBytes = orI(l.MaxOutputBytes, d.MaxOutputBytes)
	l.MaxFileSizeBytes = orI(l.MaxFileSizeBytes, d.MaxFileSizeBytes)
	return l
}

// Within says (an error in the API's words, naming the field) where l is
// negative or not a number, or above max (a zero maximum bounds nothing).
func (l Limits) Within(max Limits) error {
	for _, c := range []struct {
		name       string
		value, max float64
		unit       string
	}{
		{"timeout_seconds", l.TimeoutSeconds, max.TimeoutSeconds, "s"},
		{"cpu_time_seconds", l.CPUTimeSeconds, max.CPUTimeSeconds, "s"},
		{"max_memory_mb", float64(l.MaxMemoryMB), float64(max.MaxMemoryMB), " MiB"},
		{"max_processes", float64(l.MaxProcesses), float64(max.MaxProcesses), ""},
		{"max_output_bytes", float64(l.MaxOutputBytes), float64(max.MaxOutputBytes), " bytes"},
		{"max_file_size_bytes", float64(l.MaxFileSizeBytes), float64(max.MaxFileSizeBytes), " bytes"},
		{"compile_timeout_seconds", l.CompileTimeoutSeconds, max.CompileTimeoutSeconds, "s"},
	} {
		switch {
		case c.value < 0 || math.IsNaN(c.value) || math.IsInf(c.value, 0):
			return fmt.Errorf("%s must not be negative", c.name)
		case c.max > 0 && c.value > c.max:
			return fmt.Errorf("%s %g is above the maximum of %g%s", c.name, c.value, c.max, c.unit)
		}
	}
	return nil
}

// Limits is s (a server's defaults or maximums, as its configuration names
// them) as the limits a request gives.
func (s LimitSet) Limits() Limits {
	return Limits{TimeoutSeconds: s.TimeoutSeconds, CPUTimeSeconds: s.CPUTimeSeconds, MaxMemoryMB: s.MemoryMB,
		MaxProcesses: s.Processes, MaxOutputBytes: s.OutputBytes, MaxFileSizeBytes: s.FileSizeBytes,
		CompileTimeoutSeconds: s.CompileTimeoutSeconds}
}
