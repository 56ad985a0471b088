package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math"
	"net/http"
	"strings"
	"testing"

	"github.com/sandbox-run/sandbox-run/pkg/sandbox"
)

// FuzzDecodeExecuteRequest feeds arbitrary bodies to the request decoder.
// It must never panic; what it accepts must satisfy the documented bounds
// (and survive a round trip); what it refuses is a 400, or a 413 only when
// the body is over the size limit.
func FuzzDecodeExecuteRequest(f *testing.F) {
	for _, seed := range []string{
		`{"language":"python","code":"print(input())","input_data":"Hello Sandbox!","files":{"data.txt":"This is some data for the script."},"timeout_seconds":5,"max_memory_mb":256}`,
		`{"language":"c","code":"int main(){}","files":{"in/a.bin":{"content":"AAEC/w==","encoding":"base64"},"b.txt":{"content":"x"}},"output_files":["*.txt"],"args":["-v"],"env":{"A":"1"}}`,
		`{"language":"python","code":"x","timeout_seconds":0.5,"cpu_time_seconds":1e-9,"max_processes":4,"max_output_bytes":100,"compile_timeout_seconds":300,"version":"3"}`,
		`{"language":"python","code":"x","files":{"../x":"y"}}`,
		`{"language":"python","code":"x","files":{"a/./b//c":"y","./d":"e"}}`,
		`{"language":"python","code":"x","files":{"a\u0000b":"y","\u001f":"z"}}`,
		`{"language":"python","code":"x","timeout_seconds":-0}`,
		`{"language":"python","code":"x","timeout_seconds":-1e-300}`,
		`{"language":"python","code":"x","timeout_seconds":1e400}`,
		`{"language":"python","code":"x","max_memory_mb":9223372036854775807}`,
		`{"language":"python","code":"x","max_memory_mb":-9223372036854775808}`,
		`{"language":" ","code":"x"}`,
		`{"language":"python","code":""}`,
		`{"language":"python","code":"x","Language":"go"}`,
		`{"language":"python","code":"x"} {}`,
		`{"language":"python","code":"x"}    `,
		`{"language":"python","code":"\ud800"}`,
		"{\"language\":\"python\",\"code\":\"\xff\xfe\"}",
		"\ufeff{}",
		`{"files":{"a":{"content":"x","encoding":"BASE64"}}}`,
		`{"files":{"a":{"content":null}}}`,
		`{"files":null,"args":null,"env":null}`,
		`[]`, `null`, `""`, `0`, `{`, `}`, ``, `{"language":{}}`,
	} {
		f.Add([]byte(seed))
	}
	cfg := DefaultConfig()
	const limit = 4096
	f.Fuzz(func(t *testing.T, data []byte) {
		req, err := DecodeExecuteRequest(http.MaxBytesReader(nil, io.NopCloser(bytes.NewReader(data)), limit), &cfg)
		if err != nil {
			var re *requestError
			switch {
			case !errors.As(err, &re):
				t.Fatalf("error %T %v is not a requestError", err, err)
			case re.status == http.StatusRequestEntityTooLarge && len(data) <= limit:
				t.Fatalf("413 for %d bytes (limit %d)", len(data), limit)
			case re.status != http.StatusBadRequest && re.status != http.StatusRequestEntityTooLarge:
				t.Fatalf("status %d for an invalid body", re.status)
			}
			return
		}
		checkBounds(t, req, &cfg)
		// What was accepted encodes to a body that is accepted again, and
		// means the same.
		b1, err := json.Marshal(req)
		if err != nil {
			t.Fatalf("marshal: %v", err)
		}
		again, err := DecodeExecuteRequest(bytes.NewReader(b1), &cfg)
		if err != nil {
			t.Fatalf("re-encoded request %s refused: %v", b1, err)
		}
		b2, _ := json.Marshal(again)
		if !bytes.Equal(b1, b2) {
			t.Fatalf("round trip changed the request:\n%s\n%s", b1, b2)
		}
	})
}

// checkBounds asserts what the API promises of a decoded request.
func checkBounds(t *testing.T, req *ExecuteRequest, cfg *Config) {
	t.Helper()
	if strings.TrimSpace(req.Language) == "" || req.Code == "" {
		t.Fatalf("accepted without language or code: %+v", req)
	}
	if len(req.Files) > cfg.MaxFiles || len(req.Args) > cfg.MaxArgs || len(req.Env) > cfg.MaxEnv {
		t.Fatalf("accepted %d files, %d args, %d env", len(req.Files), len(req.Args), len(req.Env))
	}
	for name := range req.Files {
		if _, err := sandbox.ValidatePath(name); err != nil {
			t.Fatalf("accepted file name %q: %v", name, err)
		}
	}
	m := cfg.Maximums
	for _, l := range []struct {
		name       string
		value, max float64
	}{
		{"timeout_seconds", req.TimeoutSeconds, m.TimeoutSeconds},
		{"cpu_time_seconds", req.CPUTimeSeconds, m.CPUTimeSeconds},
		{"max_memory_mb", float64(req.MaxMemoryMB), float64(m.MemoryMB)},
		{"max_processes", float64(req.MaxProcesses), float64(m.Processes)},
		{"max_output_bytes", float64(req.MaxOutputBytes), float64(m.OutputBytes)},
		{"compile_timeout_seconds", req.CompileTimeoutSeconds, m.CompileTimeoutSeconds},
	} {
		if l.value < 0 || math.IsNaN(l.value) || math.IsInf(l.value, 0) || l.value > l.max {
			t.Fatalf("accepted %s %v (maximum %v)", l.name, l.value, l.max)
		}
	}
	// The executor request built from it has no negative limit either.
	x := toExecutor(req)
	if l := x.Limits; l.WallTime < 0 || l.CPUTime < 0 || l.MemoryBytes < 0 || l.Processes < 0 || l.OutputBytes < 0 || x.CompileLimits.WallTime < 0 {
		t.Fatalf("executor limits %+v", l)
	}
	if len(x.Files) != len(req.Files) {
		t.Fatalf("%d files became %d", len(req.Files), len(x.Files))
	}
}
