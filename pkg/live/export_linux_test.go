package live

import "github.com/sandbox-run/sandbox-run/pkg/sandbox"

// Engine is the engine of this package's tests (TestMain), for its
// external tests.
func Engine() *sandbox.Engine { return testEngine }
