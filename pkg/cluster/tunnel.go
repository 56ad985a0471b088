package cluster

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
)

// Tunnels are byte streams between an API node and one worker, over NATS
// alone: the API node speaks to a server that runs on the worker (plain
// HTTP/1.1, streamed responses, upgraded connections) as over TCP. A
// worker listens for them (ListenTunnels, a net.Listener); an API node
// opens one (DialTunnel, a net.Conn).
//
// The open is a request to sandbox-run.w.<worker>.tunnel.open (five
// tokens: a worker's sandbox-run.w.<worker>.* does not see it, so a worker
// that does not listen is "no responders"): the tunnel's random id, the
// worker it is for, the API node's receive window and opaque metadata,
// sealed as a kindTunnel bound to the id. The worker answers with its
// first frame: accept (with its window) or refuse (with why). Then each
// side publishes frames to the other, the API node on
// sandbox-run.w.<worker>.t.<id>.w and the worker on ….t.<id>.a (under
// sandbox-run.w.>, which both roles' NATS permissions allow). A frame is
//
//	<type, 1 byte><sequence, 8 bytes><argument, 8 bytes><data>
//
// sealed as the sender's kind (kindTunnelAPI, kindTunnelWorker) bound to
// "<id>.<direction>.<sequence>": the open and the answer are sequence 0
// of their direction and the frames count from 1, every frame, so a frame
// cannot be replayed, reordered or moved to another tunnel or direction.
// A frame that fails to open (counted in Drops) or comes out of sequence
// (a gap: NATS lost one) ends the tunnel with an error, on both sides: a
// tampered stream never goes on.
//
// Frames: data (at most tunnelChunk bytes), ack (the receiver's total of
// bytes read: flow control), ping (sent when a side has sent nothing for
// a while), fin (CloseWrite: the other side reads io.EOF, the other
// direction goes on) and close (Close; with a reason, an error). A sender
// has at most the receiver's window of unacknowledged data out, so a
// reader that does not read holds its writer back (Write blocks) and
// nothing piles up in between; a receiver acknowledges once it has read a
// quarter of its window. A side that hears nothing from the other for
// tunnelIdle (a live side pings every tunnelPing) ends the tunnel with an
// error, and so does the close of its Conn.

// Subjects and sizes of tunnels.
const (
	tunnelOpenSuffix = ".tunnel.open" // workerPrefix + worker + this
	tunnelInfix      = ".t."          // workerPrefix + worker + this + id + "." + direction

	dirWorker = "w" // frames to the worker
	dirAPI    = "a" // frames to the API node

	// tunnelChunk is the most a data frame carries; tunnelWindow is a
	// side's receive window: the most it buffers of what it did not read.
	tunnelChunk  = 64 << 10
	tunnelWindow = 1 << 20
	// tunnelBacklog is how many opened tunnels wait for Accept.
	tunnelBacklog = 128
	// tunnelOpenTTL is how long a signed open may be taken after it was
	// made (a replay after that is refused).
	tunnelOpenTTL = 5 * time.Minute
)

// Timing of tunnels (variables: the tests shorten them). A tunnel takes
// them when it is made.
var (
	// tunnelPing: a side that has sent nothing for about this long pings.
	tunnelPing = 5 * time.Second
	// tunnelIdle: a side that heard nothing for this long ends the tunnel.
	tunnelIdle = 15 * time.Second
	// tunnelOpenWait bounds the wait for a worker's answer to an open;
	// tunnelNoResponders is how long an open is asked again while no
	// worker listens.
	tunnelOpenWait     = 15 * time.Second
	tunnelNoResponders = time.Second
)

// Frame types.
const (
	frameAccept byte = 'k'
	frameRefuse byte = 'r'
	frameData   byte = 'd'
	frameAck    byte = 'a'
	framePing   byte = 'p'
	frameFin    byte = 'f'
	frameClose  byte = 'c'
)

const frameHeader = 1 + 8 + 8

// frame is a tunnel's frame, decoded.
type frame struct {
	typ  byte
	seq  uint64
	arg  uint64
	data []byte
}

func appendFrame(typ byte, seq, arg uint64, data []byte) []byte {
	b := make([]byte, frameHeader, frameHeader+len(data))
	b[0] = typ
	binary.BigEndian.PutUint64(b[1:], seq)
	binary.BigEndian.PutUint64(b[9:], arg)
	return append(b, data...)
}

func parseFrame(b []byte) (frame, bool) {
	if len(b) < frameHeader {
		return frame{}, false
	}
	return frame{typ: b[0], seq: binary.BigEndian.Uint64(b[1:]), arg: binary.BigEndian.Uint64(b[9:]), data: b[frameHeader:]}, true
}

// tunnelBind is what frame seq of tunnel id in direction dir is bound to.
func tunnelBind(id, dir string, seq uint64) string {
	return id + "." + dir + "." + strconv.FormatUint(seq, 10)
}

func tunnelSubject(worker, id, dir string) string {
	return workerPrefix + worker + tunnelInfix + id + "." + dir
}

// tunnelOpen is what an API node sends to open a tunnel.
type tunnelOpen struct {
	ID     string    `json:"id"`
	Worker string    `json:"worker"`
	From   string    `json:"from,omitempty"` // the API node's name
	Window uint64    `json:"window"`
	Issued time.Time `json:"issued"`
	Meta   []byte    `json:"meta,omitempty"`
}

// validTunnelID says whether id is one DialTunnel makes: 32 hex digits.
func validTunnelID(id string) bool {
	_, err := hex.DecodeString(id)
	return len(id) == 32 && err == nil
}

// validToken says whether s can be a subject token.
func validToken(s string) bool { return s != "" && !strings.ContainsAny(s, ".*> \t\r\n") }

// Errors of tunnels.
var (
	errTunnelIdle       = errors.New("cluster: tunnel: no word from its other end")
	errTunnelConnClosed = errors.New("cluster: tunnel: the connection to NATS closed")
	errTunnelPeerClosed = errors.New("cluster: tunnel: closed by its other end")
	errTunnelWriteShut  = errors.New("cluster: tunnel: write after CloseWrite")
)

// tunnelAddr is either end of a tunnel: the node and the tunnel's id.
type tunnelAddr struct{ node, id string }

func (a tunnelAddr) Network() string { return "sandbox-run-tunnel" }

func (a tunnelAddr) String() string {
	if a.id == "" {
		return a.node
	}
	return a.node + "/" + a.id
}

// Tunnel is one end of a tunnel between an API node and a worker: a
// net.Conn (with CloseWrite, and deadlines) whose bytes travel as sealed
// frames over NATS. It is safe for concurrent use.
type Tunnel struct {
	c                  *Conn
	id                 string
	meta               []byte
	out, in            string // the subjects it publishes to and receives from
	outDir, inDir      string
	sendKind, recvKind string
	local, remote      tunnelAddr
	window             uint64 // its receive window
	ping, idle         time.Duration
	onClose            func()

	recvSeq  uint64        // the next frame's: the subscription's goroutine only
	wsem     chan struct{} // one Write at a time
	rdl, wdl deadline
	stop     chan struct{} // closed when the keepalive should stop
	stopOnce sync.Once
	smu      sync.Mutex // frames are published in sequence order

	mu                 sync.Mutex
	sub                *nats.Subscription
	wake               chan struct{} // closed and made anew at every change
	rbuf               [][]byte
	rlen               uint64
	consumed, acked    uint64 // bytes read; the total last acknowledged
	sent, peerConsumed uint64 // bytes sent; the total the other end acknowledged
	peerWindow         uint64
	sendSeq            uint64
	lastSend, lastRecv time.Time
	rEOF               bool  // the other end will send no more data
	wShut              bool  // this end will send no more data
	peerClosed         bool  // the other end closed (reads end at EOF, writes fail)
	closed             bool  // Close was called
	err                error // why the tunnel ended (nil while it goes on)
}

// newTunnel makes tunnel id's end on this node (api: the API node's).
func newTunnel(c *Conn, id, worker string, api bool) *Tunnel {
	t := &Tunnel{c: c, id: id, window: tunnelWindow, ping: tunnelPing, idle: tunnelIdle, recvSeq: 1, sendSeq: 1,
		wsem: make(chan struct{}, 1), rdl: makeDeadline(), wdl: makeDeadline(), stop: make(chan struct{}),
		wake: make(chan struct{}), lastSend: time.Now(), lastRecv: time.Now()}
	if api {
		t.outDir, t.inDir, t.sendKind, t.recvKind = dirWorker, dirAPI, kindTunnelAPI, kindTunnelWorker
		t.local, t.remote = tunnelAddr{c.name, id}, tunnelAddr{worker, id}
	} else {
		t.outDir, t.inDir, t.sendKind, t.recvKind = dirAPI, dirWorker, kindTunnelWorker, kindTunnelAPI
		t.local, t.remote = tunnelAddr{worker, id}, tunnelAddr{"", id}
	}
	t.out, t.in = tunnelSubject(worker, id, t.outDir), tunnelSubject(worker, id, t.inDir)
	return t
}

// subscribe subscribes to the frames from the other end.
func (t *Tunnel) subscribe() error {
	sub, err := t.c.nc.Subscribe(t.in, t.handle)
	if err != nil {
		return err
	}
	sub.SetClosedHandler(func(string) { t.shutdown(errTunnelConnClosed, "", false) })
	t.mu.Lock()
	t.sub = sub
	ended := t.err != nil
	t.mu.Unlock()
	if ended || t.c.nc.IsClosed() {
		t.shutdown(errTunnelConnClosed, "", false)
		_ = sub.Unsubscribe()
	}
	return nil
}

// start starts the keepalive: the tunnel is open.
func (t *Tunnel) start() {
	t.mu.Lock()
	t.lastRecv = time.Now()
	t.mu.Unlock()
	go t.keepalive()
}

// keepalive pings when this end has been quiet, and ends the tunnel when
// the other end has been silent too long.
func (t *Tunnel) keepalive() {
	tick := time.NewTicker(t.ping)
	defer tick.Stop()
	for {
		select {
		case <-t.stop:
			return
		case now := <-tick.C:
			t.mu.Lock()
			silent, quiet := now.Sub(t.lastRecv), now.Sub(t.lastSend)
			t.mu.Unlock()
			if silent >= t.idle {
				t.shutdown(fmt.Errorf("%w for %s", errTunnelIdle, silent.Round(time.Millisecond)), "no word from you", true)
				return
			}
			if quiet >= t.ping/2 {
				_ = t.send(framePing, 0, nil)
			}
		}
	}
}

// broadcast wakes whoever waits for a change; t.mu is held.
func (t *Tunnel) broadcast() {
	close(t.wake)
	t.wake = make(chan struct{})
}

// handle takes one frame from the other end.
func (t *Tunnel) handle(m *nats.Msg) {
	seq := t.recvSeq
	payload, ok := t.c.open(t.recvKind, tunnelBind(t.id, t.inDir, seq), m.Data)
	if !ok {
		t.shutdown(fmt.Errorf("cluster: tunnel %s: frame %d dropped: not sealed for it by its other end", t.id, seq),
			"a frame was dropped", true)
		return
	}
	f, ok := parseFrame(payload)
	if !ok || f.seq != seq {
		t.shutdown(fmt.Errorf("cluster: tunnel %s: frame %d is missing", t.id, seq), "a frame is missing", true)
		return
	}
	t.recvSeq++
	var bad string
	t.mu.Lock()
	if t.err != nil {
		t.mu.Unlock()
		return
	}
	t.lastRecv = time.Now()
	switch f.typ {
	case frameData:
		switch {
		case t.rEOF:
			bad = "data after the end"
		case t.rlen+uint64(len(f.data)) > t.window:
			bad = "data past the window"
		default:
			t.rbuf = append(t.rbuf, f.data)
			t.rlen += uint64(len(f.data))
		}
	case frameAck:
		if f.arg > t.sent {
			bad = "an ack of more than was sent"
		} else {
			t.peerConsumed = max(t.peerConsumed, f.arg)
		}
	case framePing:
	case frameFin:
		t.rEOF = true
	case frameClose:
		if len(f.data) > 0 {
			t.mu.Unlock()
			t.shutdown(fmt.Errorf("cluster: tunnel %s: ended by its other end: %s", t.id, f.data), "", false)
			return
		}
		t.rEOF, t.peerClosed = true, true
		t.stopOnce.Do(func() { close(t.stop) })
	default:
		bad = fmt.Sprintf("a frame of unknown type %q", f.typ)
	}
	t.broadcast()
	t.mu.Unlock()
	if bad != "" {
		t.shutdown(fmt.Errorf("cluster: tunnel %s: %s", t.id, bad), bad, true)
	}
}

// send publishes a frame. A data frame fails once the tunnel is shut for
// writing.
func (t *Tunnel) send(typ byte, arg uint64, data []byte) error {
	t.smu.Lock()
	t.mu.Lock()
	switch typ {
	case frameData:
		if err := t.writeErr(); err != nil {
			t.mu.Unlock()
			t.smu.Unlock()
			return err
		}
		t.sent += uint64(len(data))
	case frameFin:
		t.wShut = true
	}
	seq := t.sendSeq
	t.sendSeq++
	t.lastSend = time.Now()
	t.mu.Unlock()
	err := t.c.nc.Publish(t.out, t.c.seal(t.sendKind, tunnelBind(t.id, t.outDir, seq), appendFrame(typ, seq, arg, data)))
	t.smu.Unlock()
	if err != nil {
		err = fmt.Errorf("cluster: tunnel %s: %w", t.id, err)
		t.shutdown(err, "", false)
	}
	return err
}

// writeErr is why no more can be written, if so; t.mu is held.
func (t *Tunnel) writeErr() error {
	switch {
	case t.closed:
		return net.ErrClosed
	case t.wShut:
		return errTunnelWriteShut
	case t.err != nil:
		return t.err
	case t.peerClosed:
		return errTunnelPeerClosed
	}
	return nil
}

// shutdown ends the tunnel with err (what Read and Write return from now
// on), telling the other end (with reason: an error) when tell is set. It
// does nothing when the tunnel had ended already.
func (t *Tunnel) shutdown(err error, reason string, tell bool) {
	t.mu.Lock()
	if t.err != nil {
		t.mu.Unlock()
		return
	}
	t.err = err
	tell = tell && !t.peerClosed
	sub := t.sub
	t.broadcast()
	t.mu.Unlock()
	t.stopOnce.Do(func() { close(t.stop) })
	if tell {
		_ = t.send(frameClose, 0, []byte(reason))
	}
	if sub != nil {
		_ = sub.Unsubscribe()
	}
	if t.onClose != nil {
		t.onClose()
	}
}

// Meta is the metadata the API node opened the tunnel with (on a
// signing worker, sealed by an API node's key).
func (t *Tunnel) Meta() []byte { return t.meta }

// Read reads what the other end wrote: io.EOF once it called CloseWrite
// or Close and all was read, an error when the tunnel failed.
func (t *Tunnel) Read(p []byte) (int, error) {
	for {
		t.mu.Lock()
		switch {
		case t.closed:
			t.mu.Unlock()
			return 0, net.ErrClosed
		case expired(&t.rdl):
			t.mu.Unlock()
			return 0, os.ErrDeadlineExceeded
		case t.rlen > 0:
			n := 0
			for n < len(p) && len(t.rbuf) > 0 {
				k := copy(p[n:], t.rbuf[0])
				n += k
				if t.rbuf[0] = t.rbuf[0][k:]; len(t.rbuf[0]) == 0 {
					t.rbuf[0] = nil
					t.rbuf = t.rbuf[1:]
				}
			}
			t.rlen -= uint64(n)
			t.consumed += uint64(n)
			var ack uint64
			if t.consumed-t.acked >= t.window/4 && !t.peerClosed && t.err == nil {
				t.acked, ack = t.consumed, t.consumed
			}
			t.mu.Unlock()
			if ack > 0 {
				_ = t.send(frameAck, ack, nil)
			}
			return n, nil
		case t.rEOF:
			t.mu.Unlock()
			return 0, io.EOF
		case t.err != nil:
			err := t.err
			t.mu.Unlock()
			return 0, err
		}
		wake := t.wake
		t.mu.Unlock()
		select {
		case <-wake:
		case <-t.rdl.wait():
		}
	}
}

// Write writes p to the other end, in frames, each once the other end's
// window has room for it: it blocks while the other end does not read.
func (t *Tunnel) Write(p []byte) (int, error) {
	select {
	case t.wsem <- struct{}{}:
	case <-t.wdl.wait():
		return 0, os.ErrDeadlineExceeded
	}
	defer func() { <-t.wsem }()
	n := 0
	for {
		t.mu.Lock()
		size := uint64(min(len(p)-n, tunnelChunk))
		size = min(size, t.peerWindow)
		err := t.writeErr()
		switch {
		case n == len(p) && n > 0:
			t.mu.Unlock()
			return n, nil
		case err == nil && expired(&t.wdl):
			err = os.ErrDeadlineExceeded
		case err == nil && n == len(p):
			t.mu.Unlock()
			return 0, nil
		case err == nil && t.sent-t.peerConsumed+size <= t.peerWindow:
			t.mu.Unlock()
			if err := t.send(frameData, 0, p[n:n+int(size)]); err != nil {
				return n, err
			}
			n += int(size)
			continue
		}
		wake := t.wake
		t.mu.Unlock()
		if err != nil {
			return n, err
		}
		select {
		case <-wake:
		case <-t.wdl.wait():
		}
	}
}

// CloseWrite ends what this end writes: the other end reads io.EOF once
// it has read the rest, and may go on writing.
func (t *Tunnel) CloseWrite() error {
	t.mu.Lock()
	err := t.writeErr()
	t.mu.Unlock()
	if errors.Is(err, errTunnelWriteShut) {
		return nil
	}
	if err != nil {
		return err
	}
	return t.send(frameFin, 0, nil)
}

// Close ends the tunnel: the other end reads the rest of what was written
// and then io.EOF, and can write no more.
func (t *Tunnel) Close() error {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return net.ErrClosed
	}
	t.closed = true
	t.rbuf, t.rlen = nil, 0
	t.mu.Unlock()
	t.shutdown(net.ErrClosed, "", true)
	return nil
}

// LocalAddr is this end: its node's name and the tunnel's id.
func (t *Tunnel) LocalAddr() net.Addr { return t.local }

// RemoteAddr is the other end: its node's name and the tunnel's id.
func (t *Tunnel) RemoteAddr() net.Addr { return t.remote }

// SetDeadline sets the read and write deadlines.
func (t *Tunnel) SetDeadline(d time.Time) error {
	t.rdl.set(d)
	t.wdl.set(d)
	return nil
}

// SetReadDeadline sets the time after which Read fails with
// os.ErrDeadlineExceeded (zero: none).
func (t *Tunnel) SetReadDeadline(d time.Time) error {
	t.rdl.set(d)
	return nil
}

// SetWriteDeadline sets the time after which Write fails with
// os.ErrDeadlineExceeded (zero: none); a Write that times out may have
// written part of its bytes.
func (t *Tunnel) SetWriteDeadline(d time.Time) error {
	t.wdl.set(d)
	return nil
}

// deadline is a deadline that waiters can select on (net.Pipe's).
type deadline struct {
	mu     sync.Mutex
	timer  *time.Timer
	cancel chan struct{} // closed when the deadline passes
}

func makeDeadline() deadline { return deadline{cancel: make(chan struct{})} }

// set sets the deadline to d (zero: none).
func (d *deadline) set(at time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.timer != nil && !d.timer.Stop() {
		<-d.cancel // the timer fired: it closes cancel
	}
	d.timer = nil
	closed := isClosed(d.cancel)
	if at.IsZero() {
		if closed {
			d.cancel = make(chan struct{})
		}
		return
	}
	if dur := time.Until(at); dur > 0 {
		if closed {
			d.cancel = make(chan struct{})
		}
		cancel := d.cancel
		d.timer = time.AfterFunc(dur, func() { close(cancel) })
		return
	}
	if !closed {
		close(d.cancel)
	}
}

// wait is a channel closed once the deadline passes.
func (d *deadline) wait() chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.cancel
}

func expired(d *deadline) bool { return isClosed(d.wait()) }

func isClosed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// DialTunnel opens a tunnel to worker, which must listen (ListenTunnels),
// with meta for it. A worker that does not listen, or does not answer in
// time, is an error for which IsWorkerGone holds; a worker that refuses
// it (it was not sealed by an API node's key, say) another error.
func (c *Conn) DialTunnel(ctx context.Context, worker string, meta []byte) (net.Conn, error) {
	if !validToken(worker) {
		return nil, fmt.Errorf("cluster: tunnel: worker id %q is not a NATS subject token", worker)
	}
	var b [16]byte
	_, _ = rand.Read(b[:])
	id := hex.EncodeToString(b[:])
	t := newTunnel(c, id, worker, true)
	t.meta = meta
	fail := func(err error) (net.Conn, error) {
		err = fmt.Errorf("cluster: tunnel to worker %s: %w", worker, err)
		t.shutdown(err, "the API node gave up", true)
		return nil, err
	}
	if err := t.subscribe(); err != nil {
		return nil, fmt.Errorf("cluster: tunnel to worker %s: %w", worker, err)
	}
	data, _ := json.Marshal(tunnelOpen{ID: id, Worker: worker, From: c.name, Window: t.window, Issued: time.Now().UTC(), Meta: meta})
	open := c.seal(kindTunnel, id, data)
	rctx, cancel := context.WithTimeout(ctx, tunnelOpenWait)
	defer cancel()
	// No responders: nobody got it, and it may be asked again; a worker
	// that has just begun to listen may not be known to every server yet.
	var msg *nats.Msg
	var err error
	for start, pause := time.Now(), 25*time.Millisecond; ; pause *= 2 {
		msg, err = c.nc.RequestWithContext(rctx, workerPrefix+worker+tunnelOpenSuffix, open)
		if !errors.Is(err, nats.ErrNoResponders) || time.Since(start)+pause > tunnelNoResponders {
			break
		}
		sleep(rctx, pause)
	}
	switch {
	case errors.Is(err, nats.ErrNoResponders):
		return fail(errWorkerGone)
	case err != nil && ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded):
		return fail(fmt.Errorf("no answer in %s: %w", tunnelOpenWait, errWorkerGone))
	case err != nil:
		return fail(err)
	}
	payload, ok := c.open(kindTunnelWorker, tunnelBind(id, dirAPI, 0), msg.Data)
	if !ok {
		return fail(errors.New("its answer was not sealed by a worker of this cluster"))
	}
	f, ok := parseFrame(payload)
	switch {
	case ok && f.seq == 0 && f.typ == frameAccept && f.arg >= tunnelChunk:
		t.mu.Lock()
		t.peerWindow = min(f.arg, 1<<30)
		t.mu.Unlock()
		t.start()
		return t, nil
	case ok && f.seq == 0 && f.typ == frameRefuse:
		err = fmt.Errorf("cluster: worker %s refused the tunnel: %s", worker, f.data)
		t.shutdown(err, "", false)
		return nil, err
	}
	return fail(errors.New("a malformed answer"))
}

// TunnelListener is a worker's listener of the tunnels API nodes open to
// it: a net.Listener whose connections are *Tunnel. Close stops it and
// ends its tunnels; so does the close of its Conn.
type TunnelListener struct {
	c       *Conn
	worker  string
	backlog chan *Tunnel
	done    chan struct{}

	mu      sync.Mutex
	sub     *nats.Subscription
	closed  bool
	tunnels map[string]*Tunnel // not closed yet, accepted or not
}

// ListenTunnels listens for the tunnels API nodes open to worker (this
// node's worker id; one listener per worker). On a node with keys, an
// open not sealed by an API node's key (or sealed before) is refused and
// counted in Drops.
func (c *Conn) ListenTunnels(worker string) (*TunnelListener, error) {
	if !validToken(worker) {
		return nil, fmt.Errorf("cluster: tunnels: worker id %q is not a NATS subject token", worker)
	}
	l := &TunnelListener{c: c, worker: worker, backlog: make(chan *Tunnel, tunnelBacklog), done: make(chan struct{}),
		tunnels: map[string]*Tunnel{}}
	sub, err := c.nc.Subscribe(workerPrefix+worker+tunnelOpenSuffix, l.open)
	if err == nil {
		err = c.nc.FlushTimeout(sessionCallWait) // listening once it returns
	}
	if err != nil {
		if sub != nil {
			_ = sub.Unsubscribe()
		}
		return nil, fmt.Errorf("cluster: tunnels: %w", err)
	}
	// The connection closed: the tunnels end on their own.
	sub.SetClosedHandler(func(string) { _ = l.close(false) })
	l.mu.Lock()
	l.sub = sub
	l.mu.Unlock()
	if c.nc.IsClosed() {
		_ = l.Close()
	}
	return l, nil
}

// open answers an open: a new tunnel, accepted, or a refusal.
func (l *TunnelListener) open(m *nats.Msg) {
	c := l.c
	payload := m.Data
	if _, p, sealed := splitSealed(m.Data); sealed {
		payload = p
	}
	var o tunnelOpen
	if json.Unmarshal(payload, &o) != nil || !validTunnelID(o.ID) {
		c.drops.add(kindTunnel, DropForged)
		return
	}
	refuse := func(why string) {
		_ = m.Respond(c.seal(kindTunnelWorker, tunnelBind(o.ID, dirAPI, 0), appendFrame(frameRefuse, 0, 0, []byte(why))))
	}
	if _, ok := c.open(kindTunnel, o.ID, m.Data); !ok {
		refuse("the open was not sealed by an API node of this cluster")
		return
	}
	if c.keys != nil {
		until := o.Issued.Add(tunnelOpenTTL)
		if o.Worker != l.worker || o.Issued.IsZero() || !time.Now().Before(until) || c.replays.check("tunnel "+o.ID, 0, until) {
			c.drops.add(kindTunnel, DropReplayed)
			c.dropLog(kindTunnel, o.ID, errors.New("replayed: a tunnel opened before, too long ago, or to another worker"))
			refuse("the open was replayed")
			return
		}
	}
	switch {
	case o.Worker != l.worker:
		refuse("the open is for worker " + o.Worker)
		return
	case o.Window < tunnelChunk:
		refuse("a receive window smaller than a chunk")
		return
	}
	t := newTunnel(c, o.ID, l.worker, false)
	t.meta, t.remote.node, t.peerWindow = o.Meta, o.From, min(o.Window, 1<<30)
	t.onClose = func() {
		l.mu.Lock()
		delete(l.tunnels, o.ID)
		l.mu.Unlock()
	}
	l.mu.Lock()
	switch {
	case l.closed:
		l.mu.Unlock()
		refuse("the worker no longer listens")
		return
	case l.tunnels[o.ID] != nil:
		l.mu.Unlock()
		refuse("a tunnel of that id is open")
		return
	case len(l.backlog) == cap(l.backlog):
		l.mu.Unlock()
		refuse("too many tunnels wait to be accepted")
		return
	}
	l.tunnels[o.ID] = t
	l.mu.Unlock()
	if err := t.subscribe(); err != nil {
		t.shutdown(err, "", false)
		refuse(err.Error())
		return
	}
	t.start()
	l.backlog <- t // room: this is the one sender, and there was room
	_ = m.Respond(c.seal(kindTunnelWorker, tunnelBind(o.ID, dirAPI, 0), appendFrame(frameAccept, 0, t.window, nil)))
}

// Accept waits for the next tunnel opened to this worker (a *Tunnel).
func (l *TunnelListener) Accept() (net.Conn, error) {
	select {
	case <-l.done:
		return nil, net.ErrClosed
	default:
	}
	select {
	case t := <-l.backlog:
		return t, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

// Close stops listening and closes the listener's tunnels.
func (l *TunnelListener) Close() error { return l.close(true) }

// close stops listening, and closes the listener's tunnels when all is
// set.
func (l *TunnelListener) close(all bool) error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return net.ErrClosed
	}
	l.closed = true
	close(l.done)
	sub := l.sub
	var tunnels []*Tunnel
	for _, t := range l.tunnels {
		if all {
			tunnels = append(tunnels, t)
		}
	}
	l.mu.Unlock()
	if sub != nil {
		_ = sub.Unsubscribe()
	}
	for _, t := range tunnels {
		_ = t.Close()
	}
	return nil
}

// Addr is the worker's address.
func (l *TunnelListener) Addr() net.Addr { return tunnelAddr{node: l.worker} }
