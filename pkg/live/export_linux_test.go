package live

import (
	"github.com/sandbox-run/sandbox-run/internal/testkit/leakcheck"
	"github.com/sandbox-run/sandbox-run/pkg/sandbox"
)

// Engine is the engine of this package's tests (TestMain), for its
// external tests.
func Engine() *sandbox.Engine { return testEngine }

// BigEngine is an engine of this binary's uid block (past the test
// engine's slots) with room for slots sandboxes at once.
func BigEngine(slots int) (*sandbox.Engine, error) {
	lo, _ := leakcheck.UIDBlock(leakcheck.BandLive)
	return sandbox.New(sandbox.Config{UIDBase: lo + 1000, UIDSlots: slots})
}
