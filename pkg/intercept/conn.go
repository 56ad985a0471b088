package intercept

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"sync"
	"time"
)

// Timeouts; variables so that tests can shorten them.
var (
	firstByteTimeout = 30 * time.Second // for the program's first bytes
	handshakeTimeout = 30 * time.Second // for both TLS handshakes together
)

// aLongTimeAgo is a deadline in the past, to interrupt a blocked Read.
var aLongTimeAgo = time.Unix(1, 0)

type kind int

const (
	kindClose kind = iota // nothing came: close
	kindRaw
	kindTLS
	kindHTTP
)

// methods are the request-line prefixes served as HTTP.
var methods = []string{"GET ", "HEAD ", "POST ", "PUT ", "DELETE ", "OPTIONS ", "PATCH ", "TRACE ", "CONNECT "}

// classify tells what b, the first bytes of a connection, start; more is
// true when it needs more bytes to tell.
func classify(b []byte) (k kind, more bool) {
	if len(b) == 0 {
		return kindClose, true
	}
	if b[0] == 0x16 { // TLS handshake record: version 3.x, ClientHello
		if len(b) < 6 {
			return kindRaw, len(b) < 2 || b[1] == 3
		}
		if b[1] == 3 && b[5] == 1 {
			return kindTLS, false
		}
		return kindRaw, false
	}
	for _, m := range methods {
		if len(b) >= len(m) {
			if string(b[:len(m)]) == m {
				return kindHTTP, false
			}
		} else if m[:len(b)] == string(b) {
			more = true
		}
	}
	return kindRaw, more
}

// session is one connection being served.
type session struct {
	p     *Proxy
	ctx   context.Context
	dest  Dest
	names map[string]bool // dest.Names, normalized
	sb    net.Conn        // the program's connection
	up    net.Conn        // the upstream connection

	once sync.Once
	wg   sync.WaitGroup
}

func (s *session) close() {
	s.once.Do(func() {
		s.sb.Close()
		s.up.Close()
	})
}

// spawn runs f in a goroutine that Serve waits for.
func (s *session) spawn(f func()) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer s.recover()
		f()
	}()
}

// recover logs a panic, redacted, and closes the connection.
func (s *session) recover() {
	if v := recover(); v != nil {
		s.p.record(Request{Error: fmt.Sprint("intercept: internal error: ", v)})
		s.close()
	}
}

// side is one end of a connection being served: c to write to, r (over
// lim over c) to read from. An upstream's c is pend.
type side struct {
	c    net.Conn
	lim  *limitReader
	r    *bufio.Reader
	pend *pendingConn // upstreams only
}

func newSide(c net.Conn) *side {
	l := &limitReader{r: c, n: -1}
	return &side{c: c, lim: l, r: bufio.NewReaderSize(l, 16<<10)}
}

// upSide is newSide for an upstream, whose first Read starts at once so
// that its speaking first is noticed.
func (s *session) upSide(c net.Conn) *side {
	pc := &pendingConn{Conn: c}
	pc.arm(s)
	sd := newSide(pc)
	sd.pend = pc
	return sd
}

func (s *session) serve() {
	prog := newSide(s.sb)
	up := s.upSide(s.up)
	switch k := s.sniff(prog, up); {
	case k == kindTLS && s.p.ca != nil:
		s.serveTLS(prog, up)
	case k == kindHTTP:
		s.serveHTTP("http", "", prog, up)
	case k != kindClose:
		s.relay(prog, up)
	}
}

// sniff waits for the program's first bytes and classifies them, or for the
// upstream speaking first (then the connection is raw).
func (s *session) sniff(prog, up *side) kind {
	upReady := up.pend.arm(s)
	prog.c.SetReadDeadline(time.Now().Add(firstByteTimeout))
	res := make(chan kind, 1)
	s.spawn(func() {
		k := kindClose
		defer func() { res <- k }()
		k = peekKind(prog.r)
	})
	select {
	case k := <-res:
		prog.c.SetReadDeadline(time.Time{})
		return k
	case <-upReady:
		prog.c.SetReadDeadline(aLongTimeAgo)
		<-res
		prog.c.SetReadDeadline(time.Time{})
		return kindRaw
	}
}

func peekKind(r *bufio.Reader) kind {
	for n := 1; ; {
		b, err := r.Peek(n)
		if r.Buffered() > len(b) {
			b, _ = r.Peek(r.Buffered())
		}
		k, more := classify(b)
		switch {
		case !more:
			return k
		case err == nil:
			n = len(b) + 1
		case len(b) == 0 && !errors.Is(err, io.EOF):
			return kindClose
		default: // the program closed or paused mid-way: copy
			return kindRaw
		}
	}
}

// relay copies a to b and b to a until both are done, half-closing each
// side at the end of what it gets.
func (s *session) relay(a, b *side) {
	a.lim.n, b.lim.n = -1, -1
	done := make(chan struct{})
	s.spawn(func() {
		defer close(done)
		s.pipe(b.c, a.r)
	})
	s.pipe(a.c, b.r)
	<-done
}

func (s *session) pipe(dst net.Conn, src io.Reader) {
	if _, err := io.Copy(dst, src); err != nil || closeWrite(dst) != nil {
		s.close()
	}
}

type closeWriter interface{ CloseWrite() error }

// closeWrite half-closes c, failing if c cannot.
func closeWrite(c net.Conn) error {
	if cw, ok := c.(closeWriter); ok {
		return cw.CloseWrite()
	}
	return errors.ErrUnsupported
}

// serveTLS terminates the program's TLS, with the upstream's TLS
// established and verified first for the same name, and serves what is
// inside.
func (s *session) serveTLS(prog, up *side) {
	var (
		name   string
		upTLS  *tls.Conn
		upErr  error
		upConf = &tls.Config{
			RootCAs:    s.p.roots,
			NextProtos: []string{"http/1.1"},
			MinVersion: tls.VersionTLS12,
		}
	)
	conf := &tls.Config{
		NextProtos:             []string{"http/1.1"},
		MinVersion:             tls.VersionTLS12,
		SessionTicketsDisabled: true, // every handshake reaches GetCertificate
		GetCertificate: func(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
			if upTLS != nil {
				return nil, errors.New("a second ClientHello")
			}
			name = s.serverName(hello.ServerName)
			if name == "" {
				upErr = errors.New("no server name to verify the upstream for")
				return nil, upErr
			}
			upConf.ServerName = name
			upTLS = tls.Client(&bufConn{Conn: up.pend, r: up.r}, upConf)
			if upErr = upTLS.HandshakeContext(hello.Context()); upErr != nil {
				return nil, upErr
			}
			return s.p.ca.Leaf(name)
		},
	}
	progTLS := tls.Server(&bufConn{Conn: prog.c, r: prog.r}, conf)
	ctx, cancel := context.WithTimeout(s.ctx, handshakeTimeout)
	err := progTLS.HandshakeContext(ctx)
	cancel()
	if err != nil || upTLS == nil {
		e := Request{Scheme: "https", Host: name, Error: "TLS handshake with the program failed"}
		switch {
		case upErr != nil:
			e.Error = "upstream TLS: " + upErr.Error()
		case err != nil:
			e.Error += ": " + err.Error()
		}
		s.p.record(e)
		return
	}
	iprog := newSide(progTLS)
	iup := s.upSide(upTLS)
	switch s.sniff(iprog, iup) {
	case kindHTTP:
		s.serveHTTP("https", name, iprog, iup)
	case kindClose:
	default:
		s.relay(iprog, iup)
	}
}

// serverName is the name the upstream is verified for and the program's
// certificate issued for: the SNI, else the first destination name, else
// the upstream's IP address.
func (s *session) serverName(sni string) string {
	if sni = normName(sni); sni != "" {
		return sni
	}
	if len(s.dest.Names) > 0 {
		return normName(s.dest.Names[0])
	}
	if a := s.up.RemoteAddr(); a != nil {
		if ap, err := netip.ParseAddrPort(a.String()); err == nil {
			return ap.Addr().Unmap().String()
		}
	}
	return ""
}

// pendingConn is a connection on which a Read can be started in advance
// (armed), to notice the peer speaking or closing while nothing is asked of
// it; the next Read returns that Read's outcome first.
type pendingConn struct {
	net.Conn
	ready chan struct{} // nil when no read is armed; closed when buf and err are set
	mem   []byte
	buf   []byte
	err   error
}

// arm starts a Read unless one is armed, and returns its channel.
func (c *pendingConn) arm(s *session) <-chan struct{} {
	if c.ready != nil {
		return c.ready
	}
	ready := make(chan struct{})
	c.ready = ready
	if c.mem == nil {
		c.mem = make([]byte, 4096)
	}
	s.spawn(func() {
		defer close(ready)
		n, err := c.Conn.Read(c.mem)
		c.buf, c.err = c.mem[:n], err
	})
	return ready
}

func (c *pendingConn) Read(p []byte) (int, error) {
	if c.ready == nil {
		return c.Conn.Read(p)
	}
	<-c.ready
	if len(c.buf) > 0 {
		n := copy(p, c.buf)
		c.buf = c.buf[n:]
		if len(c.buf) == 0 && c.err == nil {
			c.ready = nil
		}
		return n, nil
	}
	err := c.err
	c.err, c.ready = nil, nil
	if err != nil {
		return 0, err
	}
	return c.Conn.Read(p)
}

func (c *pendingConn) CloseWrite() error { return closeWrite(c.Conn) }

// bufConn is a connection read through a buffer holding bytes already
// peeked.
type bufConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *bufConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// limitReader reads from r, at most n more bytes when n >= 0, then
// reports EOF and sets hit. It counts the bytes read in total.
type limitReader struct {
	r     io.Reader
	n     int64
	hit   bool
	total int64
}

func (l *limitReader) Read(p []byte) (int, error) {
	if l.n < 0 {
		n, err := l.r.Read(p)
		l.total += int64(n)
		return n, err
	}
	if l.n == 0 {
		l.hit = true
		return 0, io.EOF
	}
	if int64(len(p)) > l.n {
		p = p[:l.n]
	}
	n, err := l.r.Read(p)
	l.n -= int64(n)
	l.total += int64(n)
	return n, err
}

// countWriter counts what it writes to w.
type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// lineWriter writes line in place of the first line written through it.
type lineWriter struct {
	w    io.Writer
	line string
	done bool
}

func (l *lineWriter) Write(p []byte) (int, error) {
	n := len(p)
	if !l.done {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			return n, nil
		}
		l.done = true
		if _, err := io.WriteString(l.w, l.line); err != nil {
			return 0, err
		}
		p = p[i+1:]
	}
	if _, err := l.w.Write(p); err != nil {
		return 0, err
	}
	return n, nil
}
