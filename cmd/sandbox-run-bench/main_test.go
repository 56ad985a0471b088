package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandbox-run/sandbox-run/internal/testkit/leakcheck"
	"github.com/sandbox-run/sandbox-run/pkg/sandbox"
)

// TestMain runs the tool itself when a test starts this binary with
// SANDBOX_RUN_BENCH=1, and otherwise builds the sandbox-run binary the
// tools start as a server (SANDBOX_RUN_BIN) before the tests.
func TestMain(m *testing.M) {
	sandbox.Init()
	if os.Getenv("SANDBOX_RUN_BENCH") == "1" {
		main()
	}
	// A TMPDIR of our own, inherited by the tools the tests start: the
	// soak's leak checks may count every entry in it.
	_, cleanupTmp, err := leakcheck.PrivateTempDir("sr-bench")
	if err != nil {
		panic(err)
	}
	bin, err := os.MkdirTemp("", "sandbox-run-bin-")
	if err != nil {
		panic(err)
	}
	productBin = filepath.Join(bin, "sandbox-run")
	build := exec.Command("go", "build", "-o", productBin, "../sandbox-run")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build sandbox-run: %v\n%s", err, out)
		os.Exit(1)
	}
	// Sessions and jobs in a directory of this test binary; toolchain
	// caches in the persistent test cache the other tests use too.
	dataDir = filepath.Join(bin, "data")
	home, _ := os.UserHomeDir()
	cache := filepath.Join(home, ".cache", "sandbox-run-test", "cache")
	if err := os.MkdirAll(dataDir, 0o755); err != nil {
		panic(err)
	}
	if err := os.MkdirAll(cache, 0o755); err != nil {
		panic(err)
	}
	if err := os.Symlink(cache, filepath.Join(dataDir, "cache")); err != nil {
		panic(err)
	}
	code := m.Run()
	os.RemoveAll(bin)
	cleanupTmp()
	os.Exit(code)
}

// productBin is the sandbox-run binary built for the tests; dataDir the
// data dir the tools get.
var productBin, dataDir string

type cliResult struct {
	code           int
	stdout, stderr string
}

// cli runs this tool (the test binary as main) with args and stdin.
func cli(t *testing.T, stdin string, args ...string) cliResult {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), "SANDBOX_RUN_BENCH=1", "SANDBOX_RUN_BIN="+productBin, "SANDBOX_RUN_DATA_DIR="+dataDir)
	if dir := flag.Lookup("test.gocoverdir"); dir != nil && dir.Value.String() != "" {
		cmd.Env = append(cmd.Env, "GOCOVERDIR="+dir.Value.String())
	}
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return cliResult{code, out.String(), errb.String()}
}
