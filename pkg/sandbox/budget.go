package sandbox

import "sync/atomic"

// Budget is a number of bytes that several runs draw on for what they
// hand back: captured stdout, stderr and result-pipe data, and collected
// output files. It bounds the memory a request that makes many runs (a
// compile and a run, or one run per test case) can make its caller hold,
// whatever each run's own output limit. A run whose output would go past
// what is left ends as if it had hit its output limit (LimitOutput, the
// stream truncated); a file that does not fit is skipped. It is safe for
// concurrent use by the runs that share it.
type Budget struct {
	left     atomic.Int64
	exceeded atomic.Bool
}

// NewBudget returns a budget of n bytes.
func NewBudget(n int64) *Budget {
	b := &Budget{}
	b.left.Store(max(n, 0))
	return b
}

// Left returns the bytes still available.
func (b *Budget) Left() int64 { return b.left.Load() }

// Exceeded reports whether something was cut or skipped because the
// budget ran out.
func (b *Budget) Exceeded() bool { return b.exceeded.Load() }

// Take grants up to n bytes and returns how many; fewer than n marks the
// budget exceeded.
func (b *Budget) Take(n int64) int64 {
	for {
		left := b.left.Load()
		got := min(n, left)
		if b.left.CompareAndSwap(left, left-got) {
			if got < n {
				b.exceeded.Store(true)
			}
			return got
		}
	}
}

// TakeAll grants n bytes or none (and marks the budget exceeded).
func (b *Budget) TakeAll(n int64) bool {
	for {
		left := b.left.Load()
		if left < n {
			b.exceeded.Store(true)
			return false
		}
		if b.left.CompareAndSwap(left, left-n) {
			return true
		}
	}
}

// Give returns n bytes taken earlier (e.g. output a caller dropped).
func (b *Budget) Give(n int64) { b.left.Add(n) }
