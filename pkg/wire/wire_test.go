package wire

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestExecuteRequestJSON: a request built in Go travels as the server
// reads it: stored-file references, "auto" timeouts and file contents in
// both encodings round-trip; what is not a request is refused.
func TestExecuteRequestJSON(t *testing.T) {
	in := ExecuteRequest{Language: "python", CodeFileID: "file_1", FileIDs: map[string]string{"data.csv": "file_2"},
		Files: map[string]FileData{"a.txt": FileData("text"), "b.bin": FileData{0, 1, 2, 0xff}}, TimeoutAuto: true}
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	var out ExecuteRequest
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	if out.CodeFileID != "file_1" || out.FileIDs["data.csv"] != "file_2" || string(out.Files["a.txt"]) != "text" ||
		string(out.Files["b.bin"]) != "\x00\x01\x02\xff" || !out.TimeoutAuto || out.Code != "" {
		t.Fatalf("round trip of %s: %+v", b, out)
	}
	in = ExecuteRequest{Language: "bash", Code: "echo", Limits: Limits{TimeoutSeconds: 2.5}}
	b, _ = json.Marshal(in)
	if err := json.Unmarshal(b, &out); err != nil || out.TimeoutSeconds != 2.5 || out.Code != "echo" || out.TimeoutAuto {
		t.Fatalf("round trip of %s: %+v %v", b, out, err)
	}
	for _, bad := range []string{
		`{"language":"bash","code":"x","nope":1}`,
		`{"language":"bash","code":"x","timeout_seconds":"soon"}`,
		`{"language":"bash","code":7}`,
		`{"language":"bash","code":"x","files":{"a":{"content":"x","encoding":"rot13"}}}`,
		`{"language":"bash","code":"x","files":{"a":{"content":"%%%","encoding":"base64"}}}`,
		`{"language":"bash","code":"x","files":{"a":{"data":"x"}}}`,
	} {
		if err := json.Unmarshal([]byte(bad), &out); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
}

// TestFileDataForms: text stays text, binary goes base64, and both
// object forms decode.
func TestFileDataForms(t *testing.T) {
	for in, want := range map[string]string{"hello": `"hello"`, "\x00\x01": `{"content":"AAE=","encoding":"base64"}`} {
		b, err := json.Marshal(FileData(in))
		if err != nil || string(b) != want {
			t.Errorf("%q: %s %v, want %s", in, b, err, want)
		}
	}
	var d FileData
	for in, want := range map[string]string{`"x"`: "x", `{"content":"eA==","encoding":"base64"}`: "x", `{"content":"y","encoding":"utf-8"}`: "y", `{"content":"z"}`: "z"} {
		if err := json.Unmarshal([]byte(in), &d); err != nil || string(d) != want {
			t.Errorf("%s: %q %v, want %q", in, d, err, want)
		}
	}
}

func TestEventBytes(t *testing.T) {
	if got := (Event{Data: "AAE=", Encoding: "base64"}).Bytes(); string(got) != "\x00\x01" {
		t.Errorf("base64 event: %q", got)
	}
	if got := (Event{Data: "plain"}).Bytes(); string(got) != "plain" {
		t.Errorf("text event: %q", got)
	}
}

// TestWriteDir: files land under the directory, in their subdirectories;
// a name that would leave it is refused and nothing is written outside.
func TestWriteDir(t *testing.T) {
	dir := t.TempDir()
	if err := (OutputFiles{"a.txt": FileData("A"), "sub/b.txt": FileData("B")}).WriteDir(filepath.Join(dir, "out")); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "out", "sub", "b.txt")); string(b) != "B" {
		t.Fatalf("sub/b.txt: %q", b)
	}
	err := (OutputFiles{"../escape.txt": FileData("x")}).WriteDir(filepath.Join(dir, "out"))
	if err == nil || !strings.Contains(err.Error(), "escape") {
		t.Errorf("a name leaving the directory: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "escape.txt")); err == nil {
		t.Error("a file was written outside the directory")
	}
}

// TestLimits: one check and one defaulting for every shape of limits: a
// negative or non-number limit and one above its maximum are named in the
// API's words; a zero maximum bounds nothing; Or fills only what is zero.
func TestLimits(t *testing.T) {
	max := LimitSet{TimeoutSeconds: 10, MemoryMB: 512, FileSizeBytes: 1 << 20}.Limits()
	if max.MaxMemoryMB != 512 || max.MaxFileSizeBytes != 1<<20 || max.MaxProcesses != 0 {
		t.Fatalf("LimitSet.Limits: %+v", max)
	}
	for want, l := range map[string]Limits{
		"": {TimeoutSeconds: 10, MaxMemoryMB: 512, MaxProcesses: 1 << 20},
		"timeout_seconds 10.5 is above the maximum of 10s":  {TimeoutSeconds: 10.5},
		"max_memory_mb 513 is above the maximum of 512 MiB": {MaxMemoryMB: 513},
		"max_file_size_bytes must not be negative":          {MaxFileSizeBytes: -1},
		"cpu_time_seconds must not be negative":             {CPUTimeSeconds: math.Inf(1)},
	} {
		err := l.Within(max)
		if (want == "") != (err == nil) || (err != nil && err.Error() != want) {
			t.Errorf("%+v: %v, want %q", l, err, want)
		}
	}
	got := Limits{TimeoutSeconds: 1, MaxProcesses: 2}.Or(Limits{TimeoutSeconds: 9, MaxProcesses: 9, MaxMemoryMB: 64, MaxFileSizeBytes: 5, CompileTimeoutSeconds: 3})
	if got != (Limits{TimeoutSeconds: 1, MaxProcesses: 2, MaxMemoryMB: 64, MaxFileSizeBytes: 5, CompileTimeoutSeconds: 3}) {
		t.Fatalf("Or: %+v", got)
	}
}

// TestErrorKinds: one error for every layer: its kind travels by name
// between a cluster's nodes (an unknown name is internal, a worker's old
// "deadline" busy), is found through wrapping, and says whether to retry.
func TestErrorKinds(t *testing.T) {
	for k := KindInvalid; k <= KindUnavailable; k++ {
		b, _ := json.Marshal(&Error{Kind: k, Msg: "m"})
		var back Error
		if err := json.Unmarshal(b, &back); err != nil || back.Kind != k || back.Msg != "m" {
			t.Errorf("%v: %s -> %+v %v", k, b, back, err)
		}
	}
	var e Error
	for name, want := range map[string]ErrorKind{"deadline": KindBusy, "no-such-kind": KindInternal, "rate_limited": KindRateLimited} {
		if err := json.Unmarshal([]byte(`{"kind":"`+name+`"}`), &e); err != nil || e.Kind != want {
			t.Errorf("%s: %v %v", name, e.Kind, err)
		}
	}
	wrapped := fmt.Errorf("submit: %w", &Error{Kind: KindFull, Msg: "full"})
	if KindOf(wrapped) != KindFull || KindOf(errors.New("x")) != 0 {
		t.Fatal("KindOf")
	}
	if !KindQueueFull.Retryable() || !KindBusy.Retryable() || KindInvalid.Retryable() || KindRateLimited.Retryable() {
		t.Fatal("Retryable")
	}
}

// TestHTTPStatus: every kind has the status the HTTP transports answer.
func TestHTTPStatus(t *testing.T) {
	want := map[ErrorKind]int{0: 0, KindInvalid: 400, KindUnauthorized: 401, KindForbidden: 403, KindNotFound: 404, KindExists: 409,
		KindUnsupported: 415, KindRateLimited: 429, KindQueueFull: 503, KindBusy: 503, KindDraining: 503,
		KindUnavailable: 503, KindCanceled: 503, KindFull: 507, KindInternal: 500}
	for k, status := range want {
		if got := k.HTTPStatus(); got != status {
			t.Errorf("%s: %d, want %d", k, got, status)
		}
	}
	for k := KindInvalid; k <= KindExists; k++ {
		if _, ok := want[k]; !ok {
			t.Errorf("kind %s has no expected status here", k)
		}
	}
}
