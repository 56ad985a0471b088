package gvisor

import (
	"bufio"
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandbox-run/sandbox-run/pkg/sandbox"
)

// liveProgram connects to the host's socket /sock/s (again whenever the
// connection ends, as the agent does; SIGUSR1 is handled, as the agent
// does, whose reads it wakes), says hello with its pid and the
// 16 MiB digest it made at its start, and answers each line with the line,
// a counter kept in its memory, and the digest.
const liveProgram = `import hashlib, os, signal, socket, time
signal.signal(signal.SIGUSR1, lambda *_: None)
data = os.urandom(16 << 20)
digest = hashlib.sha256(data).hexdigest()[:16]
n = 0
while True:
    try:
        s = socket.socket(socket.AF_UNIX)
        s.connect("/sock/s")
    except OSError:
        time.sleep(0.05)
        continue
    try:
        s.sendall(("hello %d %s\n" % (os.getpid(), digest)).encode())
        for line in s.makefile("r"):
            n += 1
            s.sendall(("%s %d %s\n" % (line.strip(), n, hashlib.sha256(data).hexdigest()[:16])).encode())
    except OSError:
        pass
    s.close()
`

// host is the host's end of a live sandbox's socket: it accepts its
// program's connections, one after the other.
type host struct {
	t     *testing.T
	ln    *net.UnixListener
	conns chan net.Conn
}

func listenHost(t *testing.T, dir string) *host {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: filepath.Join(dir, "s"), Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(filepath.Join(dir, "s"), 0o666)
	h := &host{t: t, ln: ln, conns: make(chan net.Conn, 8)}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { c.Close() })
			h.conns <- c
		}
	}()
	return h
}

// next is the program's next connection and its hello's fields.
func (h *host) next() (*bufio.Reader, net.Conn, []string) {
	h.t.Helper()
	select {
	case c := <-h.conns:
		c.SetDeadline(time.Now().Add(30 * time.Second))
		rd := bufio.NewReader(c)
		line, err := rd.ReadString('\n')
		if err != nil {
			h.t.Fatalf("hello: %v", err)
		}
		return rd, c, strings.Fields(line)
	case <-time.After(60 * time.Second):
		h.t.Fatal("the program did not connect")
	}
	return nil, nil, nil
}

func ask(t *testing.T, rd *bufio.Reader, c net.Conn, line string) []string {
	t.Helper()
	if _, err := c.Write([]byte(line + "\n")); err != nil {
		t.Fatal(err)
	}
	reply, err := rd.ReadString('\n')
	if err != nil {
		t.Fatalf("%s: %v", line, err)
	}
	return strings.Fields(reply)
}

func liveSpec(sock string) *sandbox.Spec {
	s := spec("/usr/bin/python3", "-u", "-c", liveProgram)
	s.Mounts = append(append([]sandbox.Mount{}, s.Mounts...), sandbox.Mount{Source: sock, Target: "/sock", Late: true})
	s.Home = "/home/user"
	return s
}

// TestLive: a live sandbox under gVisor outlives its runner (another
// runner on the same directory takes it over by its record), pauses and
// resumes, has its files copied out and in, and is written out whole and
// restored with its memory (a counter, 16 MiB) and files into two
// sandboxes of their own, each
// speaking on its own socket, the original going on by itself; a kill
// removes everything it held.
func TestLive(t *testing.T) {
	g := testRunner(t)
	sock := filepath.Join(t.TempDir(), "sock")
	h := listenHost(t, sock)
	lv, err := g.StartLive(context.Background(), liveSpec(sock))
	if err != nil {
		t.Fatal(err)
	}
	defer lv.Kill()
	rd, c, hello := h.next()
	if len(hello) != 3 || hello[0] != "hello" {
		t.Fatalf("hello: %q", hello)
	}
	digest := hello[2]
	if got := ask(t, rd, c, "one"); len(got) != 3 || got[1] != "1" || got[2] != digest {
		t.Fatalf("the program: %q", got)
	}
	if err := os.WriteFile(filepath.Join(lv.Record().Dir, "work", "note"), []byte("before"), 0o644); err != nil {
		t.Fatal(err)
	}

	// Taken over by another runner on the same directory.
	g2, err := New(Config{Dir: g.cfg.Dir})
	if err != nil {
		t.Fatal(err)
	}
	defer g2.Close()
	lv.Detach()
	if err := lv.Wait(); err != nil {
		t.Fatal(err)
	}
	lv2, err := g2.AdoptLive(lv.Record())
	if err != nil {
		t.Fatal(err)
	}
	defer lv2.Kill()
	if _, err := g2.AdoptLive(LiveRecord{ID: "srl-0", Dir: "/etc"}); err == nil {
		t.Error("a record of another directory was taken over")
	}
	st, err := lv2.Stats()
	if err != nil || st.Memory < 16<<20 || st.DiskTotal < 2*sandbox.DefaultLimits.WorkSize/2 || st.Disk <= 0 {
		t.Errorf("stats: %+v, %v", st, err)
	}

	// Paused: no answer until resumed.
	if err := lv2.Pause(context.Background()); err != nil {
		t.Fatal(err)
	}
	c.Write([]byte("paused\n"))
	c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	if _, err := rd.ReadString('\n'); err == nil {
		t.Error("a paused sandbox answered")
	}
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	if err := lv2.Resume(); err != nil {
		t.Fatal(err)
	}
	if got, err := rd.ReadString('\n'); err != nil || !strings.HasPrefix(got, "paused 2 ") {
		t.Fatalf("after resume: %q, %v", got, err)
	}

	// Clones, each on its own socket.
	var specs []*sandbox.Spec
	var hosts []*host
	for i := range 2 {
		dir := filepath.Join(t.TempDir(), "sock", string(rune('a'+i)))
		hosts = append(hosts, listenHost(t, dir))
		specs = append(specs, liveSpec(dir))
	}
	t0 := time.Now()
	image := t.TempDir()
	if n, err := lv2.Checkpoint(context.Background(), image, -1); err != nil || n < 16<<20 {
		t.Fatalf("checkpoint: %d bytes, %v", n, err)
	}
	var clones []*Live
	for i, s := range specs {
		cl, err := g2.RestoreLive(context.Background(), s, image)
		if err != nil {
			t.Fatalf("clone %d: %v", i, err)
		}
		defer cl.Kill()
		clones = append(clones, cl)
	}
	t.Logf("2 clones in %v", time.Since(t0))
	for i, cl := range clones {
		crd, cc, chello := hosts[i].next()
		if len(chello) != 3 || chello[2] != digest {
			t.Errorf("clone %d's hello: %q (its memory is not the original's: %s)", i, chello, digest)
		}
		if got := ask(t, crd, cc, "clone"); len(got) != 3 || got[1] != "3" || got[2] != digest {
			t.Errorf("clone %d: %q, want its counter at 3", i, got)
		}
		if got := ask(t, crd, cc, "again"); len(got) != 3 || got[1] != "4" {
			t.Errorf("clone %d again: %q", i, got)
		}
		if b, err := os.ReadFile(filepath.Join(cl.Record().Dir, "work", "note")); string(b) != "before" {
			t.Errorf("clone %d's /work/note: %q, %v", i, b, err)
		}
		if cl.Record().Dir == lv2.Record().Dir {
			t.Error("a clone shares the original's directory")
		}
		// Its files copy-on-write: the checkpoint's, linked (not copied)
		// under an overlay whose writes go to its own tmpfs.
		a, _ := os.Stat(filepath.Join(image, "files", "work", "note"))
		b, _ := os.Stat(filepath.Join(cl.Record().Dir, ".lower", "work", "note"))
		if a == nil || b == nil || !os.SameFile(a, b) {
			t.Errorf("clone %d's note is not the checkpoint's file, linked", i)
		}
		if mi, _ := os.ReadFile("/proc/self/mountinfo"); !strings.Contains(string(mi), " "+filepath.Join(cl.Record().Dir, "work")+" ") ||
			!strings.Contains(string(mi), "lowerdir="+filepath.Join(cl.Record().Dir, ".lower", "work")) {
			t.Errorf("clone %d's /work is not an overlay of its files", i)
		}
	}
	// The original lost its connection at the checkpoint and connected
	// again; it goes on from its own state.
	rd, c, hello = h.next()
	if hello[2] != digest {
		t.Errorf("the original's hello after the clone: %q", hello)
	}
	if got := ask(t, rd, c, "original"); len(got) != 3 || got[1] != "3" {
		t.Errorf("the original after the clone: %q", got)
	}

	// Files copied out and into a clone.
	saved := t.TempDir()
	if n, err := lv2.SaveFiles(context.Background(), saved, 1<<20); err != nil || n != int64(len("before")) {
		t.Fatalf("SaveFiles: %d, %v", n, err)
	}
	os.WriteFile(filepath.Join(saved, "work", "note"), []byte("loaded"), 0o644)
	if err := clones[0].LoadFiles(saved); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(clones[0].Record().Dir, "work", "note")); string(b) != "loaded" {
		t.Errorf("after LoadFiles: %q", b)
	}
	for _, p := range []string{filepath.Join(clones[1].Record().Dir, "work", "note"), filepath.Join(image, "files", "work", "note"),
		filepath.Join(clones[0].Record().Dir, ".lower", "work", "note")} {
		if b, _ := os.ReadFile(p); string(b) != "before" {
			t.Errorf("a clone's write reached %s: %q", p, b)
		}
	}

	// A kill ends it and removes its directory, mounts and cgroup.
	dir := clones[1].Record().Dir
	clones[1].Kill()
	select {
	case <-clones[1].Done():
	case <-time.After(30 * time.Second):
		t.Fatal("a killed clone did not end")
	}
	if _, err := os.Stat(dir); err == nil {
		t.Errorf("%s is left", dir)
	}
	mounts, _ := os.ReadFile("/proc/self/mountinfo")
	if strings.Contains(string(mounts), dir) {
		t.Errorf("%s is still mounted", dir)
	}
	for _, cg := range g.cg.allDirs(g.cg.path(clones[1].Record().ID)) {
		if _, err := os.Stat(cg); err == nil {
			t.Errorf("cgroup %s is left", cg)
		}
	}
}

// BenchmarkCloneStall: a live sandbox holding a 100 MB heap and 100 MB of
// files in /work is cloned: its stall (frozen while its memory is written
// out and its files copied: ms/stall), one clone end to end (ms/clone), and
// the checkpoint's size (MB/image).
func BenchmarkCloneStall(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("runs runsc: needs root")
	}
	if _, err := Find(""); err != nil {
		b.Skip(err)
	}
	g, err := New(Config{Dir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	defer g.Close()
	s := spec("/usr/bin/python3", "-c", `import os, signal, time
signal.signal(signal.SIGUSR1, lambda *_: None)
heap = bytearray(os.urandom(1 << 20)) * 100
with open("/work/data", "wb") as f:
    for _ in range(100):
        f.write(os.urandom(1 << 20))
open("/work/ready", "w").close()
while True:
    time.sleep(1)
`)
	s.Limits.Memory, s.Limits.WorkSize, s.Limits.FileSize = 1<<30, 256<<20, 256<<20
	lv, err := g.StartLive(context.Background(), s)
	if err != nil {
		b.Fatal(err)
	}
	defer lv.Kill()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		if _, err := os.Stat(filepath.Join(lv.Record().Dir, "work", "ready")); err == nil {
			break
		}
		if time.Now().After(deadline) {
			st, _ := lv.state()
			ls, _ := os.ReadDir(filepath.Join(lv.Record().Dir, "work"))
			b.Fatalf("the program did not get ready (%s, /work has %d entries)", st, len(ls))
		}
	}
	var stall, clone time.Duration
	var size int64
	for b.Loop() {
		dir := b.TempDir()
		t0 := time.Now()
		if err := lv.checkpoint(context.Background(), filepath.Join(dir, "image"), filepath.Join(dir, "files"), -1); err != nil {
			b.Fatal(err)
		}
		stall += time.Since(t0)
		filepath.Walk(filepath.Join(dir, "image"), func(_ string, fi os.FileInfo, _ error) error {
			if fi != nil && !fi.IsDir() {
				size += fi.Size()
			}
			return nil
		})
		t0 = time.Now()
		c, err := g.restore(context.Background(), s, filepath.Join(dir, "image"), filepath.Join(dir, "files"))
		if err != nil {
			b.Fatal(err)
		}
		clone += time.Since(t0)
		c.Kill()
	}
	b.ReportMetric(float64(stall.Microseconds())/1000/float64(b.N), "ms/stall")
	b.ReportMetric(float64(clone.Microseconds())/1000/float64(b.N), "ms/clone")
	b.ReportMetric(float64(size)/(1<<20)/float64(b.N), "MB/image")
}
