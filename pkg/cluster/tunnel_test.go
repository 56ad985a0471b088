package cluster

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// connKeys connects a node named name with keys (nil: a node without
// keys, which signs and checks nothing); closed at cleanup.
func (e *env) connKeys(name string, keys *Keys) *Conn {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), bounded)
	defer cancel()
	c, err := Connect(ctx, Options{URLs: e.nc.URLList(), Name: name, AckWait: testAckWait, Insecure: true, Keys: keys})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(c.Close)
	return c
}

// listen has c listen for worker's tunnels; closed at cleanup.
func listen(t *testing.T, c *Conn, worker string) *TunnelListener {
	t.Helper()
	l, err := c.ListenTunnels(worker)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// dialAccept opens a tunnel from api to worker (which l listens for) and
// returns both ends, with deadlines that end a test that hangs.
func dialAccept(t *testing.T, api *Conn, l *TunnelListener, worker string, meta []byte) (*Tunnel, *Tunnel) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), bounded)
	defer cancel()
	c, err := api.DialTunnel(ctx, worker, meta)
	if err != nil {
		t.Fatal(err)
	}
	type accepted struct {
		c   net.Conn
		err error
	}
	ch := make(chan accepted, 1)
	go func() {
		s, err := l.Accept()
		ch <- accepted{s, err}
	}()
	a := wait(t, ch, "the tunnel accepted")
	if a.err != nil {
		t.Fatal(a.err)
	}
	client, server := c.(*Tunnel), a.c.(*Tunnel)
	if client.id != server.id {
		t.Fatalf("dialled tunnel %s, accepted %s", client.id, server.id)
	}
	for _, end := range []*Tunnel{client, server} {
		_ = end.SetDeadline(time.Now().Add(3 * bounded))
		t.Cleanup(func() { _ = end.Close() })
	}
	return client, server
}

// serveEcho accepts l's tunnels and echoes each until its EOF; it returns
// once l is closed and every echo has ended.
func serveEcho(l *TunnelListener) (done chan struct{}) {
	done = make(chan struct{})
	go func() {
		defer close(done)
		var wg sync.WaitGroup
		defer wg.Wait()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(3 * bounded))
				if _, err := io.Copy(c, c); err == nil {
					_ = c.(*Tunnel).CloseWrite()
				}
			})
		}
	}()
	return done
}

// tunnelData is n pseudo-random bytes of seed.
func tunnelData(seed byte, n int) []byte {
	b := make([]byte, n)
	_, _ = rand.NewChaCha8([32]byte{seed}).Read(b)
	return b
}

// echo writes data through c (echoed at the other end) and reads it back.
func echo(c net.Conn, data []byte) error {
	errc := make(chan error, 1)
	go func() {
		_, err := c.Write(data)
		errc <- err
	}()
	got := make([]byte, len(data))
	if _, err := io.ReadFull(c, got); err != nil {
		return fmt.Errorf("read back %w", err)
	}
	if err := <-errc; err != nil {
		return fmt.Errorf("write: %w", err)
	}
	if !bytes.Equal(got, data) {
		return errors.New("read back other bytes")
	}
	return nil
}

// forgerAt is a forger on the server c uses: what it subscribes to is
// known there once it has flushed.
func (e *env) forgerAt(c *Conn) *nats.Conn {
	nc, err := nats.Connect(c.ConnectedURL())
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(nc.Close)
	return nc
}

// isTimeout says whether err is a deadline's, as net/http checks it.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, os.ErrDeadlineExceeded) && errors.As(err, &ne) && ne.Timeout()
}

// tunnelsGone waits until no goroutine of tunnel.go is left, and the
// nodes hold no more subscriptions (nor their goroutines) than before.
func tunnelsGone(t *testing.T, subs map[*Conn]int, waiters int) {
	t.Helper()
	eventually(t, "every tunnel gone", func() (bool, string) {
		var left []string
		for c, n := range subs {
			if got := c.nc.NumSubscriptions(); got > n {
				left = append(left, fmt.Sprintf("%s holds %d subscriptions, %d before", c.name, got, n))
			}
		}
		stacks := allStacks()
		for _, g := range strings.Split(stacks, "\n\n") {
			if strings.Contains(g, "cluster.(*Tunnel") || strings.Contains(g, "/tunnel.go:") {
				left = append(left, "a goroutine: "+g)
			}
		}
		if n := strings.Count(stacks, "nats.(*Conn).waitForMsgs"); n > waiters {
			left = append(left, fmt.Sprintf("%d subscription goroutines, %d before", n, waiters))
		}
		return len(left) == 0, strings.Join(left, "; ")
	})
}

func allStacks() string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return string(buf[:n])
		}
		buf = make([]byte, 2*len(buf))
	}
}

// TestTunnel: tunnels between a signing API node and a signing worker
// carry bytes both ways, half-close, honour deadlines and flow control,
// carry HTTP (streamed, uploaded, upgraded), many at once, and leave
// nothing behind once closed.
func TestTunnel(t *testing.T) {
	e := newEnv(t)
	api, wk := e.conn("api"), e.conn("worker")
	subs := map[*Conn]int{api: api.nc.NumSubscriptions(), wk: wk.nc.NumSubscriptions()}
	waiters := strings.Count(allStacks(), "nats.(*Conn).waitForMsgs")

	t.Run("echo", func(t *testing.T) {
		l := listen(t, wk, "worker-echo")
		c, s := dialAccept(t, api, l, "worker-echo", []byte("sandbox sb-1"))
		if string(s.Meta()) != "sandbox sb-1" || string(c.Meta()) != "sandbox sb-1" {
			t.Fatalf("meta %q %q", s.Meta(), c.Meta())
		}
		if c.RemoteAddr().String() != "worker-echo/"+c.id || s.RemoteAddr().String() != "api/"+c.id ||
			c.LocalAddr().String() != s.RemoteAddr().String() || s.LocalAddr().Network() != "sandbox-run-tunnel" ||
			l.Addr().String() != "worker-echo" {
			t.Fatalf("addresses %v %v %v %v %v", c.LocalAddr(), c.RemoteAddr(), s.LocalAddr(), s.RemoteAddr(), l.Addr())
		}
		// Each end echoes what the other writes.
		for _, dir := range []struct {
			name         string
			write, serve *Tunnel
		}{{"from the API node", c, s}, {"from the worker", s, c}} {
			done := make(chan error, 1)
			go func() {
				buf := make([]byte, 100)
				n, err := dir.serve.Read(buf)
				if err == nil {
					_, err = dir.serve.Write(bytes.ToUpper(buf[:n]))
				}
				done <- err
			}()
			if _, err := dir.write.Write([]byte("hello")); err != nil {
				t.Fatal(err)
			}
			buf := make([]byte, 100)
			n, err := dir.write.Read(buf)
			if err != nil || string(buf[:n]) != "HELLO" {
				t.Fatalf("%s: %q, %v", dir.name, buf[:n], err)
			}
			if err := wait(t, done, "the echo"); err != nil {
				t.Fatal(err)
			}
		}
		if n, err := c.Write(nil); n != 0 || err != nil {
			t.Fatalf("empty write: %d, %v", n, err)
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		if err := c.Close(); !errors.Is(err, net.ErrClosed) {
			t.Fatalf("second close: %v", err)
		}
		if _, err := c.Read(make([]byte, 1)); !errors.Is(err, net.ErrClosed) {
			t.Fatalf("read after close: %v", err)
		}
		if _, err := c.Write([]byte("x")); !errors.Is(err, net.ErrClosed) {
			t.Fatalf("write after close: %v", err)
		}
		// The worker's end reads EOF, and can write no more.
		if n, err := s.Read(make([]byte, 1)); n != 0 || err != io.EOF {
			t.Fatalf("the worker's end after the API node closed: %d, %v", n, err)
		}
		if _, err := s.Write([]byte("x")); !errors.Is(err, errTunnelPeerClosed) {
			t.Fatalf("writing to a closed tunnel: %v", err)
		}
	})

	t.Run("64 MiB both ways", func(t *testing.T) {
		l := listen(t, wk, "worker-bulk")
		c, s := dialAccept(t, api, l, "worker-bulk", nil)
		const size = 64 << 20
		type sums struct{ wrote, read string }
		run := func(end *Tunnel, seed byte) chan sums {
			ch := make(chan sums, 1)
			go func() {
				var out sums
				var wg sync.WaitGroup
				wg.Go(func() {
					h, r := sha256.New(), rand.NewChaCha8([32]byte{seed})
					buf := make([]byte, 1<<20)
					for n := 0; n < size; n += len(buf) {
						_, _ = r.Read(buf)
						h.Write(buf)
						if _, err := end.Write(buf); err != nil {
							t.Errorf("write: %v", err)
							return
						}
					}
					if err := end.CloseWrite(); err != nil {
						t.Errorf("close write: %v", err)
					}
					out.wrote = hex.EncodeToString(h.Sum(nil))
				})
				h := sha256.New()
				n, err := io.Copy(h, end)
				if err != nil || n != size {
					t.Errorf("read %d bytes: %v", n, err)
				}
				out.read = hex.EncodeToString(h.Sum(nil))
				wg.Wait()
				ch <- out
			}()
			return ch
		}
		start := time.Now()
		fromAPI, fromWorker := run(c, 1), run(s, 2)
		a, w := <-fromAPI, <-fromWorker
		if a.wrote == "" || a.wrote != w.read || w.wrote == "" || w.wrote != a.read {
			t.Fatalf("the API node wrote %s, the worker read %s; the worker wrote %s, the API node read %s", a.wrote, w.read, w.wrote, a.read)
		}
		t.Logf("64 MiB each way in %s", time.Since(start).Round(time.Millisecond))
	})

	t.Run("half-close", func(t *testing.T) {
		l := listen(t, wk, "worker-half")
		c, s := dialAccept(t, api, l, "worker-half", nil)
		if _, err := c.Write([]byte("request")); err != nil {
			t.Fatal(err)
		}
		if err := c.CloseWrite(); err != nil {
			t.Fatal(err)
		}
		if err := c.CloseWrite(); err != nil {
			t.Fatalf("second CloseWrite: %v", err)
		}
		if _, err := c.Write([]byte("more")); !errors.Is(err, errTunnelWriteShut) {
			t.Fatalf("write after CloseWrite: %v", err)
		}
		got, err := io.ReadAll(s)
		if err != nil || string(got) != "request" {
			t.Fatalf("the worker read %q, %v", got, err)
		}
		// The other direction goes on.
		if _, err := s.Write([]byte("response")); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 100)
		if n, err := c.Read(buf); err != nil || string(buf[:n]) != "response" {
			t.Fatalf("the API node read %q, %v", buf[:n], err)
		}
		_ = s.Close()
		if _, err := c.Read(buf); err != io.EOF {
			t.Fatalf("after the worker closed: %v", err)
		}
	})

	t.Run("deadlines", func(t *testing.T) {
		l := listen(t, wk, "worker-deadlines")
		c, s := dialAccept(t, api, l, "worker-deadlines", nil)
		buf := make([]byte, 10)
		// A deadline in the past fails at once, even with data to read.
		if _, err := s.Write([]byte("waiting")); err != nil {
			t.Fatal(err)
		}
		eventually(t, "the bytes arrived", func() (bool, string) {
			c.mu.Lock()
			defer c.mu.Unlock()
			return c.rlen == 7, ""
		})
		_ = c.SetReadDeadline(time.Now().Add(-time.Second))
		if _, err := c.Read(buf); !isTimeout(err) {
			t.Fatalf("read past its deadline: %v", err)
		}
		// A deadline ahead ends a read that waits.
		_ = c.SetReadDeadline(time.Time{})
		if n, err := c.Read(buf); err != nil || string(buf[:n]) != "waiting" {
			t.Fatalf("%q, %v", buf[:n], err)
		}
		_ = c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
		if _, err := c.Read(buf); !isTimeout(err) {
			t.Fatalf("a read that waited past its deadline: %v", err)
		}
		// A deadline moved into the past wakes a read that waits (how
		// net/http ends its background read).
		_ = c.SetReadDeadline(time.Time{})
		read := make(chan error, 1)
		go func() {
			_, err := c.Read(buf)
			read <- err
		}()
		time.Sleep(100 * time.Millisecond)
		_ = c.SetReadDeadline(time.Now().Add(-time.Second))
		if err := wait(t, read, "the read woken"); !isTimeout(err) {
			t.Fatalf("a read whose deadline moved into the past: %v", err)
		}
		// Without a deadline, reads go on.
		_ = c.SetDeadline(time.Time{})
		go func() {
			_, err := c.Read(buf)
			read <- err
		}()
		if _, err := s.Write([]byte("x")); err != nil {
			t.Fatal(err)
		}
		if err := wait(t, read, "the read"); err != nil {
			t.Fatal(err)
		}

		// Writes block on a full window, and a write deadline ends them:
		// the worker does not read.
		_ = c.SetWriteDeadline(time.Now().Add(2 * time.Second))
		data := tunnelData(3, 4<<20)
		n, err := c.Write(data)
		if !isTimeout(err) || n != tunnelWindow {
			t.Fatalf("a write past a full window: %d bytes, %v", n, err)
		}
		if _, err := c.Write([]byte("x")); !isTimeout(err) {
			t.Fatalf("a write past its deadline: %v", err)
		}
		got := make([]byte, n)
		if _, err := io.ReadFull(s, got); err != nil || !bytes.Equal(got, data[:n]) {
			t.Fatalf("the worker read %d bytes, other than written, %v", len(got), err)
		}
		// With the deadline lifted, the rest goes through.
		_ = c.SetWriteDeadline(time.Time{})
		go func() {
			_, err := c.Write(data[n:])
			read <- err
		}()
		got = make([]byte, len(data)-n)
		if _, err := io.ReadFull(s, got); err != nil || !bytes.Equal(got, data[n:]) {
			t.Fatalf("the rest: %v", err)
		}
		if err := wait(t, read, "the write"); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("flow control", func(t *testing.T) {
		l := listen(t, wk, "worker-flow")
		c, s := dialAccept(t, api, l, "worker-flow", nil)
		data := tunnelData(4, 8<<20)
		wrote := make(chan error, 1)
		go func() {
			_, err := c.Write(data)
			wrote <- err
		}()
		eventually(t, "the window filled", func() (bool, string) {
			s.mu.Lock()
			defer s.mu.Unlock()
			return s.rlen > tunnelWindow/2, fmt.Sprint(s.rlen, " bytes buffered")
		})
		time.Sleep(2 * time.Second)
		select {
		case err := <-wrote:
			t.Fatalf("the writer wrote 8 MiB that nobody read: %v", err)
		default:
		}
		s.mu.Lock()
		buffered := s.rlen
		s.mu.Unlock()
		c.mu.Lock()
		out := c.sent - c.peerConsumed
		c.mu.Unlock()
		if buffered > tunnelWindow || out > tunnelWindow {
			t.Fatalf("%d bytes buffered by the reader, %d unacknowledged: more than the window", buffered, out)
		}
		got := make([]byte, len(data))
		if _, err := io.ReadFull(s, got); err != nil || !bytes.Equal(got, data) {
			t.Fatalf("read %v", err)
		}
		if err := wait(t, wrote, "the writer done"); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("http", func(t *testing.T) { testTunnelHTTP(t, api, wk) })

	t.Run("50 at once", func(t *testing.T) {
		l := listen(t, wk, "worker-many")
		served := serveEcho(l)
		var wg sync.WaitGroup
		for i := range 50 {
			wg.Go(func() {
				ctx, cancel := context.WithTimeout(context.Background(), bounded)
				defer cancel()
				c, err := api.DialTunnel(ctx, "worker-many", []byte(fmt.Sprint(i)))
				if err != nil {
					t.Errorf("tunnel %d: %v", i, err)
					return
				}
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(3 * bounded))
				if err := echo(c, tunnelData(byte(i), 256<<10)); err != nil {
					t.Errorf("tunnel %d: %v", i, err)
				}
				_ = c.(*Tunnel).CloseWrite()
				if n, err := c.Read(make([]byte, 1)); n != 0 || err != io.EOF {
					t.Errorf("tunnel %d after the echo: %d, %v", i, n, err)
				}
			})
		}
		wg.Wait()
		_ = l.Close()
		wait(t, served, "the echo server done")
	})

	t.Run("not listening", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), bounded)
		defer cancel()
		if _, err := api.DialTunnel(ctx, "worker-nobody", nil); !IsWorkerGone(err) {
			t.Fatalf("a worker that does not listen: %v", err)
		}
		// A worker's own subscription (sandbox-run.w.<worker>.*, serveDirect)
		// does not take opens.
		nc := e.forger()
		if _, err := nc.Subscribe(workerPrefix+"worker-direct.*", func(*nats.Msg) {}); err != nil {
			t.Fatal(err)
		}
		_ = nc.Flush()
		start := time.Now()
		if _, err := api.DialTunnel(ctx, "worker-direct", nil); !IsWorkerGone(err) || time.Since(start) > tunnelOpenWait {
			t.Fatalf("a worker that works but does not listen: %v", err)
		}
		// One that does not answer is gone too, once the wait is over.
		if _, err := nc.Subscribe(workerPrefix+"worker-silent"+tunnelOpenSuffix, func(*nats.Msg) {}); err != nil {
			t.Fatal(err)
		}
		_ = nc.Flush()
		defer func(d time.Duration) { tunnelOpenWait = d }(tunnelOpenWait)
		tunnelOpenWait = time.Second
		if _, err := api.DialTunnel(ctx, "worker-silent", nil); !IsWorkerGone(err) {
			t.Fatalf("a worker that does not answer: %v", err)
		}
		// A caller that gives up gets its own error.
		gone, cancelGone := context.WithCancel(ctx)
		cancelGone()
		if _, err := api.DialTunnel(gone, "worker-silent", nil); !errors.Is(err, context.Canceled) || IsWorkerGone(err) {
			t.Fatalf("a dial whose context ended: %v", err)
		}
		if _, err := api.DialTunnel(ctx, "worker.x", nil); err == nil {
			t.Fatal("a worker id that is no subject token")
		}
		if _, err := api.ListenTunnels("worker>"); err == nil {
			t.Fatal("listening as a worker id that is no subject token")
		}
	})

	t.Run("listener closed", func(t *testing.T) {
		l := listen(t, wk, "worker-closing")
		c, s := dialAccept(t, api, l, "worker-closing", nil)
		// One opened, not accepted yet.
		ctx, cancel := context.WithTimeout(context.Background(), bounded)
		defer cancel()
		waiting, err := api.DialTunnel(ctx, "worker-closing", nil)
		if err != nil {
			t.Fatal(err)
		}
		defer waiting.Close()
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		if err := l.Close(); !errors.Is(err, net.ErrClosed) {
			t.Fatalf("second close: %v", err)
		}
		if _, err := l.Accept(); !errors.Is(err, net.ErrClosed) {
			t.Fatalf("accept after close: %v", err)
		}
		if _, err := s.Read(make([]byte, 1)); !errors.Is(err, net.ErrClosed) {
			t.Fatalf("the worker's end of a closed listener: %v", err)
		}
		for _, end := range []net.Conn{c, waiting} {
			if _, err := io.ReadAll(end); err != nil {
				t.Fatalf("the API node's end: %v", err)
			}
		}
		if _, err := api.DialTunnel(ctx, "worker-closing", nil); !IsWorkerGone(err) {
			t.Fatalf("a dial to a closed listener: %v", err)
		}
	})

	// Everything closed on both ends: nothing is left.
	tunnelsGone(t, subs, waiters)
}

// testTunnelHTTP serves HTTP on a worker's tunnels and calls it from the
// API node: a plain request, a streamed response, a large upload and an
// upgraded connection.
func testTunnelHTTP(t *testing.T, api, wk *Conn) {
	l := listen(t, wk, "worker-http")
	next := make(chan struct{})
	mux := http.NewServeMux()
	type metaKey struct{}
	mux.HandleFunc("/hello", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hello %s from %s", r.Context().Value(metaKey{}), r.RemoteAddr)
	})
	mux.HandleFunc("/stream", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for i := range 3 {
			fmt.Fprintf(w, "data: %d\n\n", i)
			w.(http.Flusher).Flush()
			select {
			case <-next: // the client has it: the flush went through
			case <-time.After(bounded):
				return
			}
		}
	})
	mux.HandleFunc("/upload", func(w http.ResponseWriter, r *http.Request) {
		h := sha256.New()
		n, err := io.Copy(h, r.Body)
		if err != nil {
			http.Error(w, err.Error(), 500)
			return
		}
		fmt.Fprintf(w, "%d %x", n, h.Sum(nil))
	})
	mux.HandleFunc("/upgrade", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Upgrade") != "echo" {
			http.Error(w, "upgrade to echo", 400)
			return
		}
		conn, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		defer conn.Close()
		_, _ = brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n")
		_ = brw.Flush()
		if _, err := io.Copy(conn, brw); err == nil {
			_ = conn.(*Tunnel).CloseWrite()
		}
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: bounded,
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			return context.WithValue(ctx, metaKey{}, string(c.(*Tunnel).Meta()))
		}}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(l) }()
	tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return api.DialTunnel(ctx, "worker-http", []byte("sandbox sb-2"))
	}}
	// (No Client.Timeout: it would hide the upgraded body's Write.)
	ctx, cancel := context.WithTimeout(context.Background(), 3*bounded)
	defer cancel()
	client := &http.Client{Transport: tr}
	get := func(url string) (*http.Response, error) {
		req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
		return client.Do(req)
	}
	defer func() {
		tr.CloseIdleConnections()
		_ = srv.Close()
		if err := wait(t, served, "the server done"); !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("Serve: %v", err)
		}
	}()

	resp, err := get("http://sandbox/hello")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.HasPrefix(string(body), "hello sandbox sb-2 from api/") {
		t.Fatalf("%d %q", resp.StatusCode, body)
	}

	resp, err = get("http://sandbox/stream")
	if err != nil {
		t.Fatal(err)
	}
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if sc.Text() != "" {
				lines <- sc.Text()
			}
		}
	}()
	for i := range 3 {
		if got := wait(t, lines, "an event"); got != fmt.Sprintf("data: %d", i) {
			t.Fatalf("event %d: %q", i, got)
		}
		next <- struct{}{}
	}
	if _, more := <-lines; more {
		t.Fatal("more events")
	}
	resp.Body.Close()

	upload := tunnelData(5, 6<<20)
	req, _ := http.NewRequestWithContext(ctx, "POST", "http://sandbox/upload", bytes.NewReader(upload))
	resp, err = client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if want := fmt.Sprintf("%d %x", len(upload), sha256.Sum256(upload)); string(body) != want {
		t.Fatalf("upload: %q, want %q", body, want)
	}

	req, _ = http.NewRequestWithContext(ctx, "GET", "http://sandbox/upgrade", nil)
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "echo")
	resp, err = client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade: %s", resp.Status)
	}
	rw := resp.Body.(io.ReadWriteCloser)
	data := tunnelData(6, 3<<20)
	go func() {
		_, _ = rw.Write(data)
		// CloseWrite is the tunnel's; the upgraded body closes whole.
	}()
	got := make([]byte, len(data))
	if _, err := io.ReadFull(rw, got); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("upgraded: %v", err)
	}
	rw.Close()
}

// TestTunnelUnsigned: between nodes without keys tunnels work, nothing
// is checked but the sequence; a signing API node takes no unsigned
// answer.
func TestTunnelUnsigned(t *testing.T) {
	e := newEnv(t)
	api, wk := e.connKeys("api", nil), e.connKeys("worker", nil)
	l := listen(t, wk, "worker-plain")
	c, s := dialAccept(t, api, l, "worker-plain", []byte("m"))
	if string(s.Meta()) != "m" {
		t.Fatalf("meta %q", s.Meta())
	}
	go func() { _, _ = io.Copy(s, s) }()
	if err := echo(c, tunnelData(7, 3<<20)); err != nil {
		t.Fatal(err)
	}
	// Opens the worker does not take: no open at all (dropped), one for
	// another worker, with no window to speak of, for a tunnel open
	// already (refused).
	nc := e.forger()
	subject := workerPrefix + "worker-plain" + tunnelOpenSuffix
	// Sent again until it is counted: the forger's server may not know of
	// the worker's subscription yet (interest crosses the cluster's routes
	// on its own time), and a message nobody's interest reaches is gone.
	eventually(t, "the malformed open counted", func() (bool, string) {
		if dropped(wk, kindTunnel, DropForged) >= 1 {
			return true, ""
		}
		_ = nc.Publish(subject, []byte("not an open"))
		_ = nc.Flush()
		return false, ""
	})
	for _, tc := range []struct {
		open tunnelOpen
		want string
	}{
		{tunnelOpen{ID: strings.Repeat("ab", 16), Worker: "worker-other", Window: tunnelWindow}, "for worker worker-other"},
		{tunnelOpen{ID: strings.Repeat("cd", 16), Worker: "worker-plain", Window: 100}, "window"},
		{tunnelOpen{ID: c.id, Worker: "worker-plain", Window: tunnelWindow}, "a tunnel of that id is open"},
	} {
		data, _ := json.Marshal(tc.open)
		m, err := nc.Request(subject, data, bounded)
		if err != nil || !strings.Contains(string(m.Data), tc.want) {
			t.Fatalf("%+v was answered %v, %v", tc.open, m, err)
		}
	}

	// A frame out of sequence (a gap, or one injected) ends the tunnel.
	_ = nc.Publish(tunnelSubject("worker-plain", c.id, dirWorker), appendFrame(frameData, 1000, 0, []byte("INJECTED")))
	_ = nc.Flush()
	if _, err := c.Read(make([]byte, 10)); err == nil || err == io.EOF || !strings.Contains(err.Error(), "missing") {
		t.Fatalf("the API node's end after a gap: %v", err)
	}

	// A signing API node drops the answer of a worker without keys.
	signing := e.connKeys("api-signing", testKeys(t, "api"))
	ctx, cancel := context.WithTimeout(context.Background(), bounded)
	defer cancel()
	if _, err := signing.DialTunnel(ctx, "worker-plain", nil); err == nil || IsWorkerGone(err) {
		t.Fatalf("an unsigned answer: %v", err)
	}
	if dropped(signing, kindTunnelWorker, DropForged) != 1 {
		t.Fatalf("drops %v", signing.Drops())
	}
}

// TestTunnelTrust: a signing worker refuses tunnels not opened by an API
// node's key, or opened before; a frame forged, replayed or moved to
// another tunnel is dropped, counted, and ends the tunnel on both sides.
func TestTunnelTrust(t *testing.T) {
	e := newEnv(t)
	api, wk := e.conn("api"), e.conn("worker")
	l := listen(t, wk, "worker-trust")
	served := serveEcho(l)
	defer func() { _ = l.Close(); wait(t, served, "the echo server done") }()
	ctx, cancel := context.WithTimeout(context.Background(), bounded)
	defer cancel()

	// Opened by a worker's key, and by a node without keys.
	for i, c := range []*Conn{e.connKeys("worker-rogue", testKeys(t, "worker")), e.connKeys("api-nokeys", nil)} {
		_, err := c.DialTunnel(ctx, "worker-trust", nil)
		if err == nil || IsWorkerGone(err) || !strings.Contains(err.Error(), "refused") {
			t.Fatalf("%s: %v", c.name, err)
		}
		if n := dropped(wk, kindTunnel, DropForged); n != uint64(i+1) {
			t.Fatalf("%s: %d forged opens counted", c.name, n)
		}
	}

	// An open captured and sent again is refused.
	nc := e.forgerAt(api)
	opens, err := nc.SubscribeSync(workerPrefix + "worker-trust" + tunnelOpenSuffix)
	if err != nil {
		t.Fatal(err)
	}
	_ = nc.Flush()
	c, err := api.DialTunnel(ctx, "worker-trust", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	open, err := opens.NextMsg(bounded)
	if err != nil {
		t.Fatal(err)
	}
	_ = opens.Unsubscribe()
	if m, err := nc.Request(open.Subject, open.Data, bounded); err != nil || !strings.Contains(string(m.Data), "replayed") {
		t.Fatalf("a replayed open was answered %v, %v", m, err)
	}
	if n := dropped(wk, kindTunnel, DropReplayed); n != 1 {
		t.Fatalf("%d replayed opens counted", n)
	}

	// Frames forged, replayed, and moved from another tunnel.
	tunnel := func() *Tunnel {
		c, err := api.DialTunnel(ctx, "worker-trust", nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		_ = c.SetDeadline(time.Now().Add(3 * bounded))
		return c.(*Tunnel)
	}
	capture := func(tn *Tunnel) *nats.Msg {
		sub, err := nc.SubscribeSync(tunnelSubject("worker-trust", tn.id, dirWorker))
		if err != nil {
			t.Fatal(err)
		}
		defer sub.Unsubscribe()
		_ = nc.Flush()
		if err := echo(tn, []byte("genuine")); err != nil {
			t.Fatal(err)
		}
		m, err := sub.NextMsg(bounded)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	other := tunnel()
	moved := capture(other)
	for _, tc := range []struct {
		name   string
		reason string
		frame  func(tn *Tunnel) *nats.Msg
	}{
		{"forged", DropForged, func(tn *Tunnel) *nats.Msg {
			return &nats.Msg{Subject: tunnelSubject("worker-trust", tn.id, dirWorker), Data: appendFrame(frameData, 2, 0, []byte("FORGED"))}
		}},
		{"replayed", DropReplayed, capture},
		{"moved", DropReplayed, func(tn *Tunnel) *nats.Msg {
			_ = capture(tn)
			return &nats.Msg{Subject: tunnelSubject("worker-trust", tn.id, dirWorker), Data: moved.Data}
		}},
	} {
		before := dropped(wk, kindTunnelAPI, tc.reason)
		tn := tunnel()
		m := tc.frame(tn)
		if err := nc.Publish(tunnelSubject("worker-trust", tn.id, dirWorker), m.Data); err != nil {
			t.Fatal(err)
		}
		_ = nc.Flush()
		// The worker's end failed and told the API node's.
		_, err := io.ReadAll(tn)
		if err == nil || !strings.Contains(err.Error(), "a frame was dropped") {
			t.Fatalf("%s: the API node's end: %v", tc.name, err)
		}
		if n := dropped(wk, kindTunnelAPI, tc.reason); n != before+1 {
			t.Fatalf("%s: %d drops, %d before", tc.name, n, before)
		}
	}
	// The tunnel whose frame moved is unharmed.
	if err := echo(other, []byte("still")); err != nil {
		t.Fatal(err)
	}

	// A frame forged to the API node ends its end at once.
	tn := tunnel()
	_ = nc.Publish(tunnelSubject("worker-trust", tn.id, dirAPI), testKeys(t, "api").Seal(kindTunnelAPI, tunnelBind(tn.id, dirAPI, 1), appendFrame(frameData, 1, 0, []byte("FORGED"))))
	if _, err := tn.Read(make([]byte, 10)); err == nil || !strings.Contains(err.Error(), "dropped") {
		t.Fatalf("the API node's end after a forged frame: %v", err)
	}
	if n := dropped(api, kindTunnelWorker, DropForged); n != 1 {
		t.Fatalf("%d drops on the API node", n)
	}
}

// TestTunnelLiveness: a tunnel whose other end's connection closes ends
// within the (shortened) idle time; a quiet tunnel is kept alive by
// pings.
func TestTunnelLiveness(t *testing.T) {
	defer func(p, i time.Duration) { tunnelPing, tunnelIdle = p, i }(tunnelPing, tunnelIdle)
	tunnelPing, tunnelIdle = 300*time.Millisecond, 3*time.Second
	e := newEnv(t)
	api, wk, api2, wk2 := e.conn("api"), e.conn("worker"), e.conn("api-2"), e.conn("worker-2")
	subs := map[*Conn]int{api: api.nc.NumSubscriptions(), wk2: wk2.nc.NumSubscriptions()}
	waiters := strings.Count(allStacks(), "nats.(*Conn).waitForMsgs")

	// Quiet for twice the idle time, a tunnel still works.
	l := listen(t, wk, "worker-live")
	c, s := dialAccept(t, api, l, "worker-live", nil)
	time.Sleep(2 * tunnelIdle)
	go func() { _, _ = io.Copy(s, s) }()
	if err := echo(c, []byte("still here")); err != nil {
		t.Fatal(err)
	}

	// The worker's connection closes: its ends and its listener close at
	// once, the API node's end within the idle time.
	read := make(chan error, 1)
	go func() {
		_, err := io.ReadAll(c)
		read <- err
	}()
	start := time.Now()
	wk.Close()
	if _, err := l.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("accept once the worker's connection closed: %v", err)
	}
	if err := wait(t, read, "the API node's end to fail"); !errors.Is(err, errTunnelIdle) {
		t.Fatalf("the API node's end once the worker's connection closed: %v", err)
	}
	t.Logf("the API node's end failed after %s", time.Since(start).Round(time.Millisecond))
	if _, err := s.Write([]byte("x")); !errors.Is(err, errTunnelConnClosed) && !errors.Is(err, nats.ErrConnectionClosed) {
		t.Fatalf("the worker's end once its connection closed: %v", err)
	}

	// The API node's connection closes: its ends fail at once, the
	// worker's within the idle time.
	l2 := listen(t, wk2, "worker-live-2")
	c2, s2 := dialAccept(t, api2, l2, "worker-live-2", nil)
	go func() {
		_, err := io.ReadAll(s2)
		read <- err
	}()
	api2.Close()
	if _, err := c2.Read(make([]byte, 1)); !errors.Is(err, errTunnelConnClosed) {
		t.Fatalf("the API node's end once its connection closed: %v", err)
	}
	if err := wait(t, read, "the worker's end to fail"); !errors.Is(err, errTunnelIdle) {
		t.Fatalf("the worker's end once the API node's connection closed: %v", err)
	}
	if _, err := api2.DialTunnel(context.Background(), "worker-live-2", nil); err == nil {
		t.Fatal("a dial on a closed connection")
	}
	if _, err := wk.ListenTunnels("worker-late"); err == nil {
		t.Fatal("listening on a closed connection")
	}
	_ = c.Close()
	_ = s2.Close()
	_ = l2.Close()
	tunnelsGone(t, subs, waiters)
}
