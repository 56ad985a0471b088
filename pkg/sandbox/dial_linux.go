package sandbox

import (
	"context"
	"fmt"
	"net"
	"runtime"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// DialTCP connects to port on the loopback (127.0.0.1) of the run's
// network namespace, where its programs listen (a web server on
// 127.0.0.1:8000), from the host: the sandbox gets no network for it, and
// the host's own loopback is not the sandbox's. The dial honours ctx. It
// fails with ErrRunEnded once the run is over; a sandbox dialed into
// serves no other run.
func (p *Process) DialTCP(ctx context.Context, port int) (net.Conn, error) {
	if port < 1 || port > 65535 {
		return nil, fmt.Errorf("sandbox: port %d out of range", port)
	}
	p.killMu.Lock()
	over, detached := p.over || p.ended.Load(), p.detached
	if !over && !detached {
		p.dialed = true
	}
	p.killMu.Unlock()
	switch {
	case detached:
		return nil, ErrDetached
	case over:
		return nil, ErrRunEnded
	}
	ns, err := p.openNetNS()
	if err != nil {
		return nil, err
	}
	defer unix.Close(ns)
	return dialLoopback(ctx, ns, port)
}

// dialLoopback dials 127.0.0.1:port over TCP from the network namespace ns.
func dialLoopback(ctx context.Context, ns, port int) (net.Conn, error) {
	return dialInNetNS(ctx, ns, net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
}

// openNetNS opens the network namespace of the run: its sandbox's PID 1's,
// which every program of the sandbox shares (with a Spec.Network, tun0 is
// there too: attachTUN).
func (p *Process) openNetNS() (int, error) {
	proc := p.c.cmd.Process
	ns, err := unix.Open("/proc/"+strconv.Itoa(proc.Pid)+"/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		if !p.c.alive() {
			return -1, ErrRunEnded
		}
		return -1, fmt.Errorf("sandbox: open the run's network namespace: %w", err)
	}
	// The pid was PID 1's when it was opened if PID 1 is not reaped yet
	// now: only its reaping, by this process, frees the pid for another.
	// The signal goes through the pidfd os.Process holds, never to a pid
	// reused meanwhile.
	if proc.Signal(syscall.Signal(0)) != nil || p.runOver() {
		unix.Close(ns)
		return -1, ErrRunEnded
	}
	return ns, nil
}

// runOver says whether the run is over (Wait returned or finish began) or
// no longer this Process's (Detach).
func (p *Process) runOver() bool {
	p.killMu.Lock()
	defer p.killMu.Unlock()
	return p.over || p.ended.Load() || p.detached
}

// dialInNetNS dials addr over TCP from the network namespace ns. The
// socket is made there by a thread that enters it for the dial and then
// returns to its own namespace; it stays in ns for its life.
func dialInNetNS(ctx context.Context, ns int, addr string) (net.Conn, error) {
	type result struct {
		conn net.Conn
		err  error
	}
	done := make(chan result, 1)
	go func() {
		// A thread whose namespace is changed is not let go back to the
		// Go runtime's other goroutines until it is back in its own; one
		// that cannot go back ends with this goroutine, still locked.
		runtime.LockOSThread()
		home, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			runtime.UnlockOSThread()
			done <- result{err: fmt.Errorf("sandbox: open the host's network namespace: %w", err)}
			return
		}
		defer unix.Close(home)
		if err := unix.Setns(ns, unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			done <- result{err: fmt.Errorf("sandbox: enter the run's network namespace: %w", err)}
			return
		}
		var d net.Dialer
		conn, err := d.DialContext(ctx, "tcp", addr)
		if unix.Setns(home, unix.CLONE_NEWNET) == nil {
			runtime.UnlockOSThread()
		}
		done <- result{conn, err}
	}()
	r := <-done
	return r.conn, r.err
}
