package wire

// A result's JSON form, bounded and streamed.
//
// Output travels in JSON as text when it is valid UTF-8 and escaping does
// not make it more than twice as large, and base64 otherwise (NUL and
// other control bytes cost six bytes each as \u0000), so an output of n
// bytes never takes more than 2n bytes of response (4n/3 as base64).
//
// Request.MaxResponseBytes (the response budget) bounds a whole result:
// the runs of one request (compile, run, every test case) draw their
// captured output and output files from one sandbox.Budget of that many
// bytes, and once the result is assembled FitBudget cuts what its JSON
// form would still take beyond the budget. Whatever is cut is flagged
// (the *_truncated fields, skipped_files, response_truncated): nothing is
// dropped silently.
//
// WriteJSON writes a result without building its JSON in one buffer: the
// large strings go out in chunks, straight from the result.

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"
)

// DefaultMaxResponseBytes is the response budget when neither the request
// nor the executor's configuration sets one.
const DefaultMaxResponseBytes = 64 << 20

// ReasonResponseBudget is the reason of an output file skipped because
// the response budget ran out.
const ReasonResponseBudget = "output exceeds the response budget"

// EncodeOutput returns output as JSON should carry it: as text (encoding
// "") when it is UTF-8 that escaping does not make more than twice as
// large, or else base64 (encoding "base64").
func EncodeOutput(b []byte) (data, encoding string) { return textOrBase64(b) }

// textOrBase64 returns b as JSON should carry it: as itself when it is
// UTF-8 text that escaping does not make larger than base64, or base64.
func textOrBase64(b []byte) (string, string) {
	if asText(b) {
		return string(b), ""
	}
	return encodeBase64(b), "base64"
}

// asText reports whether b travels as a JSON string rather than base64:
// when it is UTF-8 that escaping does not make more than twice as large
// (lines of one character are 1.5 times; a NUL is six bytes, \u0000).
func asText(b []byte) bool {
	return utf8.Valid(b) && jsonStringLen(b) <= 2*len(b)+2
}

// jsonStringLen is the length of b as a JSON string, quotes included, as
// encoding/json writes it without HTML escaping (b is valid UTF-8).
func jsonStringLen[T ~string | ~[]byte](b T) int {
	n := 2
	for i := 0; i < len(b); i++ {
		c := b[i]
		switch {
		case c == '"' || c == '\\' || c == '\n' || c == '\r' || c == '\t' || c == '\b' || c == '\f':
			n += 2
		case c < 0x20:
			n += 6
		case c == 0xe2 && i+2 < len(b) && b[i+1] == 0x80 && (b[i+2] == 0xa8 || b[i+2] == 0xa9):
			n += 6 // U+2028, U+2029 are written \u2028, \u2029
			i += 2
		default:
			n++
		}
	}
	return n
}

// encodedLen is what a string field costs in JSON.
func encodedLen(s string) int64 { return int64(jsonStringLen(s)) }

// fileEncodedLen is what an output file's value costs in JSON.
func fileEncodedLen(d FileData) int64 {
	if asText(d) {
		return int64(jsonStringLen(d))
	}
	return int64(base64.StdEncoding.EncodedLen(len(d))) + int64(len(`{"content":"","encoding":"base64"}`))
}

// FitBudget makes the outputs of res take at most n bytes of JSON
// together: the compile step's output first, then stdout and stderr, the
// test cases in order and the output files by name. A stream that does not
// fit whole is cut (its *_truncated flag set); a file that does not fit is
// skipped with ReasonResponseBudget. It reports whether it cut anything.
func FitBudget(res *Result, n int64) bool {
	left := n
	cut := false
	take := func(s *string, enc string) bool {
		size := encodedLen(*s)
		if size <= left {
			left -= size
			return false
		}
		*s = cutEncoded(*s, enc, max(left, 0))
		left -= encodedLen(*s)
		cut = true
		return true
	}
	if c := res.Compile; c != nil {
		take(&c.Stdout, c.StdoutEncoding)
		take(&c.Stderr, c.StderrEncoding)
	}
	if take(&res.Stdout, res.StdoutEncoding) {
		res.StdoutTruncated = true
	}
	if take(&res.Stderr, res.StderrEncoding) {
		res.StderrTruncated = true
	}
	if e := res.Exception; e != nil {
		take(&e.Traceback, "")
		take(&e.Message, "")
	}
	left -= int64(len(res.ReturnValue))
	for i := range res.TestCases {
		c := &res.TestCases[i]
		if take(&c.Stdout, c.StdoutEncoding) {
			c.StdoutTruncated = true
		}
		if take(&c.Stderr, c.StderrEncoding) {
			c.StderrTruncated = true
		}
	}
	names := make([]string, 0, len(res.OutputFiles))
	for name := range res.OutputFiles {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		size := fileEncodedLen(res.OutputFiles[name])
		if size <= left {
			left -= size
			continue
		}
		delete(res.OutputFiles, name)
		res.SkippedFiles = append(res.SkippedFiles, Skipped{Path: name, Reason: ReasonResponseBudget})
		cut = true
	}
	return cut
}

// cutEncoded shortens s (text, or base64 when enc says so) to at most n
// bytes of JSON, whole characters and whole base64 quanta only.
func cutEncoded(s, enc string, n int64) string {
	if n <= 2 {
		return ""
	}
	if enc == "base64" {
		keep := (n - 2) / 4 * 4
		return s[:min(int64(len(s)), keep)]
	}
	size := int64(2)
	for i, r := range s {
		w := int64(jsonStringLen(string(r)) - 2)
		if size+w > n {
			return s[:i]
		}
		size += w
	}
	return s
}

// blobPrefix marks, in the skeleton WriteJSON marshals, the strings it
// writes itself; random, so no output can forge one.
var blobPrefix = func() string {
	var b [16]byte
	rand.Read(b[:])
	return "sr-blob-" + hex.EncodeToString(b[:]) + "-"
}()

// streamThreshold is the size above which WriteJSON streams a string.
const streamThreshold = 32 << 10

// blob is a large value WriteJSON writes in chunks: a string written as a
// JSON string (escaped), or bytes written base64.
type blob struct {
	s   string
	b   []byte
	b64 bool
}

// blobs collects the large values of one result being written.
type blobs []blob

// str returns s, or a placeholder for it when it is large.
func (bs *blobs) str(s string) string {
	if len(s) < streamThreshold {
		return s
	}
	*bs = append(*bs, blob{s: s})
	return blobPrefix + strconv.Itoa(len(*bs)-1)
}

// file returns d, or a placeholder FileData for it when it is large.
func (bs *blobs) file(d FileData) FileData {
	if len(d) < streamThreshold {
		return d
	}
	text := asText(d)
	*bs = append(*bs, blob{b: d, b64: !text})
	kind := "t"
	if !text {
		kind = "b"
	}
	return FileData(blobPrefix + kind + strconv.Itoa(len(*bs)-1))
}

// placeholderFile reports whether d is a placeholder of blobs.file, and
// whether it stands for base64 content.
func placeholderFile(d FileData) (ok, b64 bool) {
	if len(d) > len(blobPrefix)+1 && string(d[:len(blobPrefix)]) == blobPrefix {
		return true, d[len(blobPrefix)] == 'b'
	}
	return false, false
}

// WriteJSON writes res as JSON (indented when indent is true) followed by
// a newline, streaming its large strings instead of building the whole
// document in memory.
func (res *Result) WriteJSON(w io.Writer, indent bool) error {
	var bs blobs
	skel := *res
	skel.Stdout, skel.Stderr = bs.str(res.Stdout), bs.str(res.Stderr)
	if res.Compile != nil {
		c := *res.Compile
		c.Stdout, c.Stderr = bs.str(c.Stdout), bs.str(c.Stderr)
		skel.Compile = &c
	}
	if res.Exception != nil {
		e := *res.Exception
		e.Traceback = bs.str(e.Traceback)
		skel.Exception = &e
	}
	if res.TestCases != nil {
		skel.TestCases = make([]CaseResult, len(res.TestCases))
		for i, c := range res.TestCases {
			c.Stdout, c.Stderr = bs.str(c.Stdout), bs.str(c.Stderr)
			skel.TestCases[i] = c
		}
	}
	if res.OutputFiles != nil {
		skel.OutputFiles = make(OutputFiles, len(res.OutputFiles))
		for name, d := range res.OutputFiles {
			skel.OutputFiles[name] = bs.file(d)
		}
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if indent {
		enc.SetIndent("", "  ")
	}
	if err := enc.Encode(&skel); err != nil {
		return err
	}
	return bs.write(w, buf.Bytes())
}

// write writes skel with each quoted placeholder replaced by its blob.
func (bs blobs) write(w io.Writer, skel []byte) error {
	marker := []byte(`"` + blobPrefix)
	for {
		i := bytes.Index(skel, marker)
		if i < 0 {
			_, err := w.Write(skel)
			return err
		}
		if _, err := w.Write(skel[:i]); err != nil {
			return err
		}
		rest := skel[i+len(marker):]
		end := bytes.IndexByte(rest, '"')
		if end < 0 {
			return fmt.Errorf("result JSON: unterminated placeholder")
		}
		idx, err := strconv.Atoi(strings.TrimLeft(string(rest[:end]), "tb"))
		if err != nil || idx < 0 || idx >= len(bs) {
			return fmt.Errorf("result JSON: bad placeholder %q", rest[:end])
		}
		if err := bs[idx].writeTo(w); err != nil {
			return err
		}
		skel = rest[end+1:]
	}
}

// writeTo writes the blob as a JSON string, quotes included.
func (b blob) writeTo(w io.Writer) error {
	if _, err := io.WriteString(w, `"`); err != nil {
		return err
	}
	if b.b64 {
		enc := base64.NewEncoder(base64.StdEncoding, w)
		for data := b.b; len(data) > 0; {
			n := min(len(data), 48<<10)
			if _, err := enc.Write(data[:n]); err != nil {
				return err
			}
			data = data[n:]
		}
		if err := enc.Close(); err != nil {
			return err
		}
	} else if b.b != nil {
		if err := writeEscaped(w, b.b); err != nil {
			return err
		}
	} else if err := writeEscaped(w, b.s); err != nil {
		return err
	}
	_, err := io.WriteString(w, `"`)
	return err
}

// writeEscaped writes text escaped as the inside of a JSON string, as
// encoding/json escapes it without HTML escaping, through a small buffer.
func writeEscaped[T ~string | ~[]byte](w io.Writer, text T) error {
	const hex = "0123456789abcdef"
	buf := make([]byte, 0, 32<<10)
	flush := func() error {
		_, err := w.Write(buf)
		buf = buf[:0]
		return err
	}
	start := 0
	for i := 0; i < len(text); i++ {
		c := text[i]
		var esc string
		switch {
		case c == '"':
			esc = `\"`
		case c == '\\':
			esc = `\\`
		case c == '\n':
			esc = `\n`
		case c == '\r':
			esc = `\r`
		case c == '\t':
			esc = `\t`
		case c == '\b':
			esc = `\b`
		case c == '\f':
			esc = `\f`
		case c < 0x20:
			esc = `\u00` + string(hex[c>>4]) + string(hex[c&0xf])
		case c == 0xe2 && i+2 < len(text) && text[i+1] == 0x80 && (text[i+2] == 0xa8 || text[i+2] == 0xa9):
			esc = `\u202` + string(hex[text[i+2]&0xf])
		default:
			if len(buf)+i-start >= cap(buf)-8 {
				buf = append(buf, text[start:i]...)
				start = i
				if err := flush(); err != nil {
					return err
				}
			}
			continue
		}
		buf = append(buf, text[start:i]...)
		buf = append(buf, esc...)
		if c == 0xe2 {
			i += 2
		}
		start = i + 1
		if len(buf) >= cap(buf)-16 {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	buf = append(buf, text[start:]...)
	return flush()
}

// marshalText is json.Marshal without HTML escaping.
func marshalText(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// MarshalJSON writes the files as a JSON object keyed by path. A path
// that is not valid UTF-8 cannot be a JSON key as it is: its key has each
// invalid byte replaced by U+FFFD (and a "~N" suffix should that collide
// with another key), and its value is the object form with the real path
// in base64: {"content", "encoding", "path", "path_encoding": "base64"}.
// So two files never become one key.
func (f OutputFiles) MarshalJSON() ([]byte, error) {
	names := make([]string, 0, len(f))
	for name := range f {
		names = append(names, name)
	}
	sort.Strings(names)
	used := make(map[string]bool, len(f))
	for _, name := range names {
		if utf8.ValidString(name) {
			used[name] = true
		}
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	buf.WriteByte('{')
	for i, name := range names {
		if i > 0 {
			buf.WriteByte(',')
		}
		d := f[name]
		key := name
		var value any = d
		if !utf8.ValidString(name) {
			key = strings.ToValidUTF8(name, "\uFFFD")
			for n := 2; used[key]; n++ {
				key = fmt.Sprintf("%s~%d", strings.ToValidUTF8(name, "\uFFFD"), n)
			}
			used[key] = true
			obj := fileObject{Path: encodeBase64([]byte(name)), PathEncoding: "base64"}
			if ph, b64 := placeholderFile(d); ph {
				obj.Content, obj.Encoding = string(d), "utf-8"
				if b64 {
					obj.Encoding = "base64"
				}
			} else if asText(d) {
				obj.Content, obj.Encoding = string(d), "utf-8"
			} else {
				obj.Content, obj.Encoding = encodeBase64(d), "base64"
			}
			value = obj
		}
		if err := enc.Encode(key); err != nil {
			return nil, err
		}
		buf.Truncate(buf.Len() - 1)
		buf.WriteByte(':')
		if err := enc.Encode(value); err != nil {
			return nil, err
		}
		buf.Truncate(buf.Len() - 1)
	}
	buf.WriteByte('}')
	return buf.Bytes(), nil
}

// fileObject is an output file in its object form.
type fileObject struct {
	Content      string `json:"content"`
	Encoding     string `json:"encoding"`
	Path         string `json:"path,omitempty"`
	PathEncoding string `json:"path_encoding,omitempty"`
}
