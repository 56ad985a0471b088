package agent

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// host is a test's end of an agent in the socket mode: one connection.
type host struct {
	*frames
	conn net.Conn
}

// acceptHost waits for the agent's connection on ln and checks its hello.
func acceptHost(t *testing.T, ln net.Listener, secret string) *host {
	t.Helper()
	ln.(*net.UnixListener).SetDeadline(time.Now().Add(wait))
	conn, err := ln.Accept()
	if err != nil {
		t.Fatalf("the agent did not connect: %v", err)
	}
	out := make(chan []byte, 64)
	rd := bufio.NewScanner(conn)
	rd.Buffer(nil, MaxFrame)
	if !rd.Scan() {
		t.Fatal("no hello")
	}
	var hello Event
	if err := json.Unmarshal(rd.Bytes(), &hello); err != nil || hello.Type != EvHello || string(hello.Data) != secret {
		t.Fatalf("hello %q", rd.Bytes())
	}
	go func() {
		defer close(out)
		for rd.Scan() {
			out <- slices.Clone(rd.Bytes())
		}
	}()
	return &host{frames: &frames{t: t, enc: json.NewEncoder(conn), in: conn, out: out, held: map[uint64][]Event{}}, conn: conn}
}

// TestSocket: an agent on a socket keeps its processes when its host goes,
// holds their events, gives them to the next host that connects (a
// restarted server), and ends what it started once no host has come for
// OrphanTimeout.
func TestSocket(t *testing.T) {
	sock := filepath.Join(t.TempDir(), SocketName)
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	old := OrphanTimeout
	OrphanTimeout = 2 * time.Second
	defer func() { OrphanTimeout = old }()
	done := make(chan error, 1)
	go func() { done <- ServeSocket(sock, "s3cret") }()

	h := acceptHost(t, ln, "s3cret")
	// A process that prints, waits for its stdin, prints again.
	ev := h.do(Request{ID: 1, Op: OpStart, Args: []string{"sh", "-c", "echo before; read x; echo after $x"}, Env: path, Stdin: true})
	if ev.Type != EvStarted {
		t.Fatalf("start: %+v", ev)
	}
	pid := ev.PID
	if ev := h.next(1); ev.Type != EvStdout || string(ev.Data) != "before\n" {
		t.Fatalf("first output: %+v", ev)
	}
	// The host goes (a server's restart); a new one connects.
	h.conn.Close()
	h = acceptHost(t, ln, "s3cret")
	if ev := h.do(Request{ID: 2, Op: OpList}); len(ev.Procs) != 1 || ev.Procs[0].PID != pid {
		t.Fatalf("after the reconnection the agent runs %+v", ev.Procs)
	}
	if ev := h.do(Request{ID: 3, Op: OpInput, PID: pid, Data: []byte("again\n")}); ev.Type != EvOK {
		t.Fatalf("input: %+v", ev)
	}
	// Its events come under the first host's request id, with its pid.
	if ev := h.next(1); ev.Type != EvStdout || string(ev.Data) != "after again\n" || ev.PID != pid {
		t.Fatalf("output to the second host: %+v", ev)
	}
	if ev := h.next(1); ev.Type != EvExit || *ev.Exit != 0 {
		t.Fatalf("exit: %+v", ev)
	}

	// Events while no host is there are held for the next. The process
	// prints only once the host has gone (a file says so): what an agent
	// wrote before the host went is the host's to have read.
	gone := filepath.Join(t.TempDir(), "host-gone")
	ev = h.do(Request{ID: 4, Op: OpStart, Args: []string{"sh", "-c", `read x; while [ ! -e "$0" ]; do sleep 0.01; done; echo held $x`, gone}, Env: path, Stdin: true})
	pid = ev.PID
	h.do(Request{ID: 5, Op: OpInput, PID: pid, Data: []byte("it\n")})
	h.do(Request{ID: 6, Op: OpCloseStdin, PID: pid})
	h.conn.Close()
	if err := os.WriteFile(gone, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	h = acceptHost(t, ln, "s3cret")
	if ev := h.next(4); ev.Type != EvStdout || string(ev.Data) != "held it\n" {
		t.Fatalf("held output: %+v", ev)
	}
	if ev := h.next(4); ev.Type != EvExit {
		t.Fatalf("held exit: %+v", ev)
	}

	// No host for OrphanTimeout: the agent ends what it started, and ends.
	ev = h.do(Request{ID: 7, Op: OpStart, Args: []string{"sleep", "600"}, Env: path})
	sleeper := ev.PID
	h.conn.Close()
	ln.Close()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("ServeSocket ended without an error")
		}
	case <-time.After(wait + OrphanTimeout):
		t.Fatal("the agent did not end without a host")
	}
	if alive(sleeper) {
		t.Fatalf("its process %d outlived it", sleeper)
	}
}

// alive says whether process pid exists (and is no zombie of ours: the
// agent reaps what it started).
func alive(pid int) bool { return syscall.Kill(pid, 0) == nil }

// TestOOMStanding: what the agent starts goes before it to the
// out-of-memory killer (set before its start is answered).
func TestOOMStanding(t *testing.T) {
	f := serve(t)
	ev := f.do(Request{ID: 1, Op: OpStart, Args: []string{"sleep", "60"}, Env: path})
	if ev.Type != EvStarted {
		t.Fatalf("start: %+v", ev)
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/oom_score_adj", ev.PID))
	if err != nil || strings.TrimSpace(string(b)) != oomScoreAdj {
		t.Fatalf("oom_score_adj %q, %v", b, err)
	}
	f.do(Request{ID: 2, Op: OpSignal, PID: ev.PID, Signal: 9})
}

// TestSocketRelay: in the socket mode the agent relays a port (OpDial): it
// connects to the port on its loopback, then to the host's relay socket
// beside its own, says the token, and copies bytes both ways; a port
// nothing listens on and a bad request are refused; SIGUSR1 drops its
// connection and its relays (after a checkpoint), and it connects again.
func TestSocketRelay(t *testing.T) {
	dir := t.TempDir()
	ln, err := net.Listen("unix", filepath.Join(dir, SocketName))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	relay, err := net.Listen("unix", filepath.Join(dir, RelayName))
	if err != nil {
		t.Fatal(err)
	}
	defer relay.Close()
	echo, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer echo.Close()
	go func() {
		for {
			c, err := echo.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); bufio.NewReader(c).WriteTo(c) }()
		}
	}()
	port := echo.Addr().(*net.TCPAddr).Port
	go ServeSocket(filepath.Join(dir, SocketName), "s")
	h := acceptHost(t, ln, "s")

	if ev := h.do(Request{ID: 1, Op: OpDial, Port: port, Token: "tok-1"}); ev.Type != EvOK {
		t.Fatalf("dial: %+v", ev)
	}
	relay.(*net.UnixListener).SetDeadline(time.Now().Add(wait))
	c, err := relay.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	rd := bufio.NewReader(c)
	if token, err := rd.ReadString('\n'); err != nil || token != "tok-1\n" {
		t.Fatalf("token %q %v", token, err)
	}
	fmt.Fprintf(c, "ping\n")
	if got, err := rd.ReadString('\n'); err != nil || got != "ping\n" {
		t.Fatalf("through the relay: %q %v", got, err)
	}
	closed, _ := net.Listen("tcp", "127.0.0.1:0")
	closedPort := closed.Addr().(*net.TCPAddr).Port
	closed.Close()
	if ev := h.do(Request{ID: 2, Op: OpDial, Port: closedPort, Token: "tok-2"}); ev.Type != EvError {
		t.Errorf("a port nothing listens on: %+v", ev)
	}
	for id, r := range map[uint64]Request{3: {Port: 0, Token: "t"}, 4: {Port: port}, 5: {Port: port, Token: "a\nb"}} {
		r.ID, r.Op = id, OpDial
		if ev := h.do(r); ev.Type != EvError || ev.Code != CodeInvalid {
			t.Errorf("dial %+v: %+v", r, ev)
		}
	}

	// SIGUSR1: the relay and the connection end; it connects again.
	syscall.Kill(os.Getpid(), syscall.SIGUSR1)
	c.SetReadDeadline(time.Now().Add(wait))
	if _, err := rd.ReadString('\n'); err == nil {
		t.Error("the relay goes on after SIGUSR1")
	}
	h = acceptHost(t, ln, "s")
	if ev := h.do(Request{ID: 6, Op: OpList}); ev.Type != EvOK {
		t.Errorf("after SIGUSR1: %+v", ev)
	}
}
