package wire

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"io"
	"runtime"
	"strings"
	"testing"
)

// TestEncodeOutputControlBytes: output heavy in control bytes travels
// base64 (a NUL costs six bytes as \u0000, four thirds in base64), text
// stays text, even with newlines, tabs and HTML.
func TestEncodeOutputControlBytes(t *testing.T) {
	cases := []struct {
		name string
		in   []byte
		b64  bool
	}{
		{"nul", make([]byte, 1<<20), true},
		{"bell", bytes.Repeat([]byte("a\x07"), 1000), true},
		{"text", []byte("hello\nworld\n\ttab\n"), false},
		{"lines", bytes.Repeat([]byte("x\n"), 10000), false},
		{"html", bytes.Repeat([]byte("<p>a & b</p>\n"), 1000), false},
		{"invalid", []byte("a\xffb"), true},
		{"empty", nil, false},
	}
	for _, c := range cases {
		data, enc := EncodeOutput(c.in)
		if (enc == "base64") != c.b64 {
			t.Errorf("%s: encoding %q, want base64=%v", c.name, enc, c.b64)
		}
		b, _ := marshalText(data)
		if max := 2*len(c.in) + 2; len(b) > max {
			t.Errorf("%s: %d bytes of JSON for %d bytes (more than twice)", c.name, len(b), len(c.in))
		}
		if got := jsonStringLen(data); got != len(b) {
			t.Errorf("%s: jsonStringLen %d, encoding/json wrote %d", c.name, got, len(b))
		}
	}
	// jsonStringLen agrees with encoding/json on every byte value.
	var all []byte
	for c := 0; c < 0x80; c++ {
		all = append(all, byte(c))
	}
	all = append(all, "\u2028\u2029é€😀"...)
	b, _ := marshalText(string(all))
	if got := jsonStringLen(all); got != len(b) {
		t.Errorf("jsonStringLen of every ASCII byte: %d, encoding/json wrote %d", got, len(b))
	}
}

// bigResult is a result with large outputs of every kind.
func bigResult() *Result {
	return &Result{
		ExecutionID: "exec_test",
		Outcome:     Outcome{Status: StatusCompleted, Stdout: strings.Repeat("line <&>\n", 100000), Stderr: strings.Repeat("é\x01\"\\\u2028\b\f\r\t", 5000)},
		Compile:     &StepResult{Outcome: Outcome{Status: StatusCompleted, Stderr: strings.Repeat("warning\n", 10000)}},
		TestCases: []CaseResult{
			{Index: 0, Outcome: Outcome{Status: StatusCompleted, Stdout: strings.Repeat("1", 40000)}},
			{Index: 1, Outcome: Outcome{Status: StatusCompleted, Stdout: "small sr-blob-0"}},
		},
		Exception: &Exception{Type: "E", Message: "m", Traceback: strings.Repeat("tb\n", 20000)},
		OutputFiles: OutputFiles{
			"text.txt":  FileData(strings.Repeat("text\n", 100000)),
			"bin.dat":   FileData(bytes.Repeat([]byte{0, 1, 2, 0xff}, 100000)),
			"small":     FileData("x"),
			"dir/a\xff": FileData(bytes.Repeat([]byte{0}, 50000)),
		},
	}
}

// TestWriteJSONMatchesMarshal: the streamed form decodes to exactly what
// encoding/json makes of the same result.
func TestWriteJSONMatchesMarshal(t *testing.T) {
	res := bigResult()
	for _, indent := range []bool{false, true} {
		var streamed bytes.Buffer
		if err := res.WriteJSON(&streamed, indent); err != nil {
			t.Fatal(err)
		}
		plain, err := json.Marshal(res)
		if err != nil {
			t.Fatal(err)
		}
		var a, b any
		if err := json.Unmarshal(streamed.Bytes(), &a); err != nil {
			t.Fatalf("streamed JSON does not parse: %v", err)
		}
		json.Unmarshal(plain, &b)
		aj, _ := json.Marshal(a)
		bj, _ := json.Marshal(b)
		if !bytes.Equal(aj, bj) {
			t.Fatalf("indent=%v: streamed JSON differs from encoding/json's (%d vs %d bytes)", indent, len(aj), len(bj))
		}
		if bytes.Contains(streamed.Bytes(), []byte(blobPrefix)) {
			t.Fatal("a placeholder was left in the output")
		}
	}
}

// TestWriteJSONStreams: writing a result with 48 MiB of output allocates
// a small fraction of it (encoding/json would build the whole document).
func TestWriteJSONStreams(t *testing.T) {
	res := &Result{ExecutionID: "exec_big", Outcome: Outcome{Status: StatusCompleted, Stdout: strings.Repeat("0123456789abcdef", 1<<20)},
		OutputFiles: OutputFiles{"a.bin": FileData(bytes.Repeat([]byte{0, 0xff}, 8<<20)), "b.txt": FileData(strings.Repeat("t", 16<<20))}}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	if err := res.WriteJSON(io.Discard, false); err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 8<<20 {
		t.Fatalf("WriteJSON allocated %d MiB for a 48 MiB result: it must stream", alloc>>20)
	}
}

// TestOutputFileNamesNotUTF8: two files whose names differ only in bytes
// that are not UTF-8 stay two entries, each with its real name.
func TestOutputFileNamesNotUTF8(t *testing.T) {
	files := OutputFiles{"a\xff": FileData("one"), "a\xfe": FileData("two"), "a\uFFFD": FileData("three"), "b": FileData("four")}
	b, err := json.Marshal(files)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]json.RawMessage
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if len(got) != len(files) {
		t.Fatalf("%d entries in %s, want %d", len(got), b, len(files))
	}
	names := map[string]string{}
	for key, v := range got {
		var obj struct {
			Content      string `json:"content"`
			Path         string `json:"path"`
			PathEncoding string `json:"path_encoding"`
		}
		var s string
		if json.Unmarshal(v, &s) == nil {
			names[key] = s
			continue
		}
		if err := json.Unmarshal(v, &obj); err != nil {
			t.Fatal(err)
		}
		raw, _ := base64.StdEncoding.DecodeString(obj.Path)
		if obj.PathEncoding != "base64" || len(raw) == 0 {
			t.Fatalf("entry %q: %s has no base64 path", key, v)
		}
		names[string(raw)] = obj.Content
	}
	for name, data := range files {
		if names[name] != string(data) {
			t.Errorf("file %q: got %q, want %q (all: %q)", name, names[name], data, names)
		}
	}
}
