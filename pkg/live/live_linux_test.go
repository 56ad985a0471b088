package live

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandbox-run/sandbox-run/internal/testkit/leakcheck"
	"github.com/sandbox-run/sandbox-run/pkg/live/agent"
	"github.com/sandbox-run/sandbox-run/pkg/sandbox"
)

var testEngine *sandbox.Engine

func TestMain(m *testing.M) {
	sandbox.Init() // a sandbox's PID 1 is this binary re-executed
	agent.Main()   // and a live sandbox's first program
	flag.Parse()
	os.Exit(run(m))
}

func run(m *testing.M) int {
	lo, _ := leakcheck.UIDBlock(leakcheck.BandLive)
	var err error
	if testEngine, err = sandbox.New(sandbox.Config{UIDBase: lo, UIDSlots: 16}); err != nil {
		fmt.Fprintln(os.Stderr, "this host cannot sandbox:", err)
		return 1
	}
	if dir := flag.Lookup("test.gocoverdir"); dir != nil {
		testEngine.EnableInitCoverage(dir.Value.String())
	}
	defer testEngine.Close()
	code := m.Run()
	// Every process of every live sandbox ended with it.
	testEngine.Quiesce()
	if left := leakcheck.ProgramProcesses(lo, lo+2*16, ""); len(left) > 0 && code == 0 {
		fmt.Fprintln(os.Stderr, "processes of ended live sandboxes still run:", left)
		return 1
	}
	return code
}

// startLive starts a sandbox whose program is the agent (this test binary,
// mounted read-only at agent.Path), and a client of it; the sandbox ends
// at cleanup.
func startLive(t *testing.T, limits sandbox.Limits) *Client {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	reqR, reqW := io.Pipe()
	evR, evW := io.Pipe()
	var logs strings.Builder
	limits.WallTime = max(limits.WallTime, 10*time.Minute)
	p, err := testEngine.Start(context.Background(), &sandbox.Spec{
		Args:   []string{agent.Path},
		Env:    []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/work", "LANG=C.UTF-8"},
		Mounts: append(append([]sandbox.Mount{}, sandbox.SystemMounts...), sandbox.Mount{Source: exe, Target: agent.Path}),
		Stdin:  reqR, Stream: true, ResultPipe: true, ResultOut: evW, Stderr: &logs,
		Limits: limits,
	})
	if err != nil {
		t.Fatal(err)
	}
	ended := make(chan *sandbox.Result, 1)
	go func() {
		res, _ := p.Wait()
		evW.Close()
		ended <- res
	}()
	t.Cleanup(func() {
		reqW.Close() // the agent ends with its input, and the sandbox with it
		select {
		case <-ended:
		case <-time.After(bounded):
			p.Kill()
			t.Errorf("the live sandbox did not end with its agent's input")
		}
		if t.Failed() {
			t.Logf("agent's stderr: %s", logs.String())
		}
	})
	return NewClient(reqW, evR)
}

// TestLiveSandbox: the agent in a real sandbox starts processes as the
// sandbox's user and does file operations inside its walls.
func TestLiveSandbox(t *testing.T) {
	c := startLive(t, sandbox.Limits{})
	testProcesses(t, c, "/work")
	testFiles(t, c, "/tmp")

	ctx, cancel := context.WithTimeout(context.Background(), bounded)
	defer cancel()
	// Inside: the sandbox's user, its own pid namespace, no network.
	o := newOutput()
	if _, err := c.Start(ctx, agent.Request{Args: []string{"bash", "-c", "id -u; ls /proc | grep -c '^[0-9]'; cat /sys/class/net/*/operstate 2>/dev/null | wc -l"},
		Env: []string{"PATH=/usr/bin:/bin"}}, o.on); err != nil {
		t.Fatal(err)
	}
	if ev := o.wait(t); *ev.Exit != 0 || !strings.HasPrefix(o.String(), "1000\n") {
		t.Fatalf("%+v %q", ev, o.String())
	}
	// The agent's descriptors are its own: a process it starts cannot
	// write the host a frame (descriptor 3) nor read its requests.
	o = newOutput()
	if _, err := c.Start(ctx, agent.Request{Args: []string{"bash", "-c", `echo '{"id":1,"type":"ok"}' >&3 && echo WROTE; ls /proc/$$/fd | tr '\n' ' '`},
		Env: []string{"PATH=/usr/bin:/bin"}}, o.on); err != nil {
		t.Fatal(err)
	}
	if o.wait(t); strings.Contains(o.String(), "WROTE") || !strings.HasPrefix(o.String(), "0 1 2 ") {
		t.Fatalf("a process of the agent's: %q", o.String())
	}
	// A symlink a program plants resolves inside the sandbox: the agent
	// reads the sandbox's /etc/hostname, not the host's files.
	o = newOutput()
	if _, err := c.Start(ctx, agent.Request{Args: []string{"ln", "-s", "/etc/passwd", "/work/link"}, Env: []string{"PATH=/usr/bin:/bin"}}, o.on); err != nil {
		t.Fatal(err)
	}
	o.wait(t)
	ev, err := c.Call(ctx, agent.Request{Op: agent.OpReadFile, Path: "/work/link"})
	host, _ := os.ReadFile("/etc/passwd")
	if err != nil || string(ev.Data) == string(host) {
		t.Fatalf("the link read %d bytes (the host's passwd is %d), %v", len(ev.Data), len(host), err)
	}
	// Outside what is writable: refused, as for the sandbox's user.
	var e *Error
	if _, err := c.Call(ctx, agent.Request{Op: agent.OpWriteFile, Path: "/usr/evil", Data: []byte("x")}); !errors.As(err, &e) {
		t.Fatalf("a write to /usr: %v", err)
	}
	if _, err := c.Call(ctx, agent.Request{Op: agent.OpStat, Path: filepath.Join("/work", "nothing")}); !errors.As(err, &e) || e.Code != agent.CodeNotFound {
		t.Fatalf("%v", err)
	}
}
