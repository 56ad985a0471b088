package intercept

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Limits of the HTTP path.
const (
	maxHeaderBytes = 1 << 20 // request or response header
	maxRequests    = 10000   // per connection
	maxInterim     = 100     // 1xx responses per request
)

// next is what follows an exchange.
type next int

const (
	nextRequest next = iota
	nextClose
	nextRelay
)

// serveHTTP serves HTTP/1.x requests from prog to up until either side
// closes. tlsName is the name the upstream was verified for ("" over plain
// HTTP).
func (s *session) serveHTTP(scheme, tlsName string, prog, up *side) {
	for i := range maxRequests {
		if i > 0 && !s.awaitRequest(prog, up) {
			return
		}
		prog.lim.n = maxHeaderBytes + int64(prog.r.Size())
		req, err := http.ReadRequest(prog.r)
		prog.lim.n = -1
		if err != nil {
			var ne net.Error
			switch {
			case prog.lim.hit:
				s.p.record(Request{Scheme: scheme, Status: 431, Error: "request header too large"})
				s.refuse(prog, 431, "request header too large")
			case errors.Is(err, io.EOF) || errors.As(err, &ne) || errors.Is(err, net.ErrClosed):
			default:
				s.p.record(Request{Scheme: scheme, Status: 400, Error: "malformed request: " + err.Error()})
				s.refuse(prog, 400, "malformed request")
			}
			return
		}
		e, nx := s.exchange(scheme, tlsName, prog, up, req)
		s.p.record(e)
		switch {
		case nx == nextRelay:
			s.relay(prog, up)
			return
		case nx == nextClose || i == maxRequests-1:
			return
		}
	}
}

// awaitRequest waits for the program's next request, or for the upstream
// closing (or speaking out of turn) first: then it returns false, and the
// program sees its idle connection closed as it would have directly.
func (s *session) awaitRequest(prog, up *side) bool {
	if up.r.Buffered() > 0 {
		return false // bytes after a complete response
	}
	if prog.r.Buffered() > 0 {
		return true
	}
	upReady := up.pend.arm(s)
	got := make(chan struct{})
	s.spawn(func() {
		defer close(got)
		prog.r.Peek(1)
	})
	select {
	case <-got:
		return true // ReadRequest reports what Peek met
	case <-upReady:
		prog.c.SetReadDeadline(aLongTimeAgo)
		<-got
		return false
	}
}

// exchange forwards one request and relays its response.
func (s *session) exchange(scheme, tlsName string, prog, up *side, req *http.Request) (e Request, nx next) {
	e = Request{Scheme: scheme, Host: req.Host, Method: req.Method, Path: req.RequestURI}
	fail := func(code int, msg string) (Request, next) {
		e.Status, e.Error = code, msg
		e.BytesIn += s.refuse(prog, code, msg)
		return e, nextClose
	}
	if req.Method == http.MethodConnect {
		return fail(http.StatusMethodNotAllowed, "CONNECT refused: the egress is not a proxy")
	}
	uri, ok := originForm(req)
	if req.ProtoMajor != 1 || !ok {
		return fail(http.StatusBadRequest, "malformed request: unsupported protocol or request-URI")
	}

	authority := hostOf(req.Host)
	sub := &substituter{}
	if authority != "" && s.names[authority] && (tlsName == "" || authority == tlsName) && req.Method != http.MethodTrace {
		sub.secrets = s.p.match(authority, s.dest.Port)
		sub.used = make([]bool, len(sub.secrets))
	}
	uri = sub.uri(uri)
	for k, vs := range req.Header {
		if k != "Host" {
			for i, v := range vs {
				vs[i] = sub.replace(v, encRaw)
			}
		}
	}
	for i, sec := range sub.secrets {
		if sec.Header != nil {
			v := sec.Value
			if sec.Header.Format != "" {
				v = strings.ReplaceAll(sec.Header.Format, "{value}", sec.Value)
			}
			req.Header.Set(sec.Header.Name, v)
			sub.used[i] = true
		}
	}

	if req.Body != http.NoBody && req.ProtoAtLeast(1, 1) && strings.EqualFold(req.Header.Get("Expect"), "100-continue") {
		n, err := io.WriteString(prog.c, "HTTP/1.1 100 Continue\r\n\r\n")
		e.BytesIn += int64(n)
		if err != nil {
			e.Error = "writing 100 Continue: " + err.Error()
			return e, nextClose
		}
		req.Header.Del("Expect")
	}
	if len(sub.secrets) > 0 && s.p.maxBody > 0 && req.Body != http.NoBody && req.ContentLength <= s.p.maxBody {
		if enc, ok := bodyEncoding(req.Header); ok {
			if err := s.substituteBody(req, sub, enc); err != nil {
				return fail(http.StatusBadRequest, "reading the request body: "+err.Error())
			}
		}
	}
	e.Secrets = sub.names()

	if _, ok := req.Header["User-Agent"]; !ok {
		req.Header["User-Agent"] = []string{""} // or Write adds Go's
	}
	req.URL = &url.URL{Path: "/"} // the request line is written by lineWriter
	out := &countWriter{w: up.c}
	proto := "HTTP/1.1"
	if req.ProtoMinor == 0 {
		proto = "HTTP/1.0"
	}
	err := req.Write(&lineWriter{w: out, line: req.Method + " " + uri + " " + proto + "\r\n"})
	e.BytesOut = out.n
	if err != nil {
		// As the upstream closing would look to the program directly.
		e.Error = "forwarding the request: " + err.Error()
		return e, nextClose
	}

	for range maxInterim {
		up.lim.n = maxHeaderBytes + int64(up.r.Size())
		before := up.lim.total - int64(up.r.Buffered())
		resp, err := http.ReadResponse(up.r, req)
		up.lim.n = -1
		if err != nil {
			e.Error = "reading the response: " + err.Error()
			switch {
			case up.lim.hit:
				e.Error = "reading the response: header too large"
			case up.lim.total-int64(up.r.Buffered()) == before:
				// Nothing came: close, as the upstream did.
				return e, nextClose
			}
			e.Status = http.StatusBadGateway
			e.BytesIn += s.refuse(prog, http.StatusBadGateway, "no valid response from the upstream")
			return e, nextClose
		}
		if resp.StatusCode >= 200 || resp.StatusCode == http.StatusSwitchingProtocols {
			e.Status = resp.StatusCode
		}
		if resp.StatusCode < 200 {
			n, err := writeHead(prog.c, resp)
			e.BytesIn += n
			switch {
			case err != nil:
				e.Error = "relaying the response: " + err.Error()
				return e, nextClose
			case resp.StatusCode == http.StatusSwitchingProtocols:
				return e, nextRelay
			}
			continue
		}
		n, err := writeResponse(prog.c, resp)
		e.BytesIn += n
		if err != nil {
			e.Error = "relaying the response: " + err.Error()
			return e, nextClose
		}
		if req.Close || resp.Close {
			return e, nextClose
		}
		return e, nextRequest
	}
	e.Error = "too many informational responses"
	return e, nextClose
}

// substituteBody replaces placeholders in a body of at most maxBody bytes
// and makes it a Content-Length body; a larger one is left as it is.
func (s *session) substituteBody(req *http.Request, sub *substituter, enc encoding) error {
	data, err := io.ReadAll(io.LimitReader(req.Body, s.p.maxBody+1))
	if err != nil {
		return err
	}
	if int64(len(data)) > s.p.maxBody {
		req.Body = struct {
			io.Reader
			io.Closer
		}{io.MultiReader(bytes.NewReader(data), req.Body), req.Body}
		return nil
	}
	data = []byte(sub.replace(string(data), enc))
	req.ContentLength = int64(len(data))
	req.Body = io.NopCloser(bytes.NewReader(data))
	switch {
	case len(req.Trailer) > 0: // stays chunked, to keep its trailers
		req.ContentLength = -1
	case len(data) == 0:
		req.Body = http.NoBody
		fallthrough
	default:
		req.TransferEncoding = nil
	}
	return nil
}

// bodyEncoding tells whether a body with header h is searched for
// placeholders, and how values are encoded in it.
func bodyEncoding(h http.Header) (encoding, bool) {
	if ce := h.Get("Content-Encoding"); ce != "" && !strings.EqualFold(ce, "identity") {
		return 0, false
	}
	mt, _, err := mime.ParseMediaType(h.Get("Content-Type"))
	if err != nil {
		return 0, false
	}
	switch {
	case mt == "application/x-www-form-urlencoded":
		return encQuery, true
	case mt == "application/json" || mt == "application/x-ndjson" || strings.HasSuffix(mt, "+json"):
		return encJSON, true
	case mt == "application/xml" || mt == "text/xml" || strings.HasSuffix(mt, "+xml"):
		return encXML, true
	case strings.HasPrefix(mt, "text/") || mt == "multipart/form-data":
		return encRaw, true
	}
	return 0, false
}

// originForm returns the request-URI in origin form ("/path?query" or
// "*"), cut raw from an absolute-form one.
func originForm(req *http.Request) (string, bool) {
	u := req.RequestURI
	if strings.HasPrefix(u, "/") || u == "*" {
		return u, true
	}
	if req.URL.Opaque != "" || req.URL.Host == "" {
		return "", false
	}
	_, rest, ok := strings.Cut(u, "://")
	if !ok {
		return "", false
	}
	i := strings.IndexAny(rest, "/?")
	switch {
	case i < 0:
		return "/", true
	case rest[i] == '?':
		return "/" + rest[i:], true
	}
	return rest[i:], true
}

// refuse answers the program with code and msg, closes the writing side
// and waits briefly for the program's remaining bytes so that the answer is
// not lost to a reset. It returns the bytes written.
func (s *session) refuse(prog *side, code int, msg string) int64 {
	body := "sandbox-run egress: " + msg + "\n"
	n, _ := fmt.Fprintf(prog.c, "HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
		code, http.StatusText(code), len(body), body)
	if closeWrite(prog.c) == nil {
		prog.c.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
		io.Copy(io.Discard, io.LimitReader(prog.r, 256<<10))
	}
	return int64(n)
}

// writeHead writes an informational response (1xx), which has no body.
func writeHead(w io.Writer, resp *http.Response) (int64, error) {
	var b bytes.Buffer
	status := resp.Status
	if !strings.Contains(status, " ") {
		status += " "
	}
	fmt.Fprintf(&b, "HTTP/%d.%d %s\r\n", resp.ProtoMajor, resp.ProtoMinor, status)
	resp.Header.Write(&b)
	b.WriteString("\r\n")
	n, err := w.Write(b.Bytes())
	return int64(n), err
}

// writeResponse writes resp to w, buffered but flushed whenever the body
// has to wait for more, so that streamed responses stream.
func writeResponse(w io.Writer, resp *http.Response) (int64, error) {
	cw := &countWriter{w: w}
	bw := bufio.NewWriterSize(cw, 32<<10)
	if resp.Body != nil && resp.Body != http.NoBody {
		resp.Body = struct {
			io.Reader
			io.Closer
		}{&flushReader{r: resp.Body, w: bw}, resp.Body}
	}
	err := resp.Write(struct{ io.Writer }{bw}) // hides bw's ReadFrom
	if ferr := bw.Flush(); err == nil {
		err = ferr
	}
	return cw.n, err
}

// flushReader flushes w before each Read of r.
type flushReader struct {
	r io.Reader
	w *bufio.Writer
}

func (f *flushReader) Read(p []byte) (int, error) {
	if err := f.w.Flush(); err != nil {
		return 0, err
	}
	return f.r.Read(p)
}
