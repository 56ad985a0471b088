package wire

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
