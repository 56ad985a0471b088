package api

import (
	"archive/zip"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sandbox-run/sandbox-run/internal/testkit/leakcheck"
)

// Hostile and malformed requests: every one is refused with the right 4xx
// and a message that says what is wrong, nothing lands outside the
// server's data directory, and the server stays healthy. A case states
// the right answer: a server that answers otherwise fails it (a known
// bug is a failing case, never a skipped one).

type hostileCase struct {
	name        string
	method      string // default POST
	path        string // default /api/sandbox/execute
	body        []byte
	contentType string // as request.contentType
	header      http.Header
	status      int
	msg         []string
}

// hostileMarker is in the name of every file a hostile request tries to
// create outside /work, so that a stray one is recognised.
const hostileMarker = "hostile-9f3c"

// pyBody is a valid execution request with extra members appended.
func pyBody(extra string) []byte {
	return []byte(`{"language":"python","code":"print(1)"` + extra + `}`)
}

// nested is n arrays deep.
func nested(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }

// nestedObjects is n objects deep.
func nestedObjects(n int) string { return strings.Repeat(`{"a":`, n) + "1" + strings.Repeat("}", n) }

// jsonList is n copies of item as a JSON array.
func jsonList(n int, item func(i int) string) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = item(i)
	}
	return "[" + strings.Join(parts, ",") + "]"
}

// jsonMap is n members as a JSON object.
func jsonMap(n int, member func(i int) string) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = member(i)
	}
	return "{" + strings.Join(parts, ",") + "}"
}

// zipBomb is a zip archive of one file of size zero bytes.
func zipBomb(t testing.TB, size int) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	w, err := zw.Create("zeros.bin")
	if err != nil {
		t.Fatal(err)
	}
	chunk := make([]byte, 1<<20)
	for n := size; n > 0; n -= len(chunk) {
		if _, err := w.Write(chunk[:min(n, len(chunk))]); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func gzipped(t testing.TB, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Write(b)
	zw.Close()
	return buf.Bytes()
}

// hostSnapshot is what the test watches outside the data directory.
type hostSnapshot struct {
	// tmp: the entries of the server's TMPDIR (the test's own: all of
	// them count) and those of the host's /tmp that a sandboxed program
	// that reached it could have made (leakcheck.HostTemp).
	tmp      map[string]string
	siblings []string // entries next to the data dir
	passwd   [32]byte
}

func snapshotHost(t testing.TB, dataDir string) hostSnapshot {
	t.Helper()
	s := hostSnapshot{tmp: leakcheck.HostTemp(sandboxUIDBase, sandboxUIDBase+sandboxUIDCount)}
	if os.TempDir() == leakcheck.HostTempDir {
		t.Fatal("the hostile requests want a TMPDIR of their own")
	}
	for name, why := range leakcheck.Entries(os.TempDir()) {
		s.tmp[filepath.Join(os.TempDir(), name)] = why
	}
	entries, err := os.ReadDir(filepath.Dir(dataDir))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Name() != filepath.Base(dataDir) {
			s.siblings = append(s.siblings, e.Name())
		}
	}
	passwd, _ := os.ReadFile("/etc/passwd")
	s.passwd = sha256.Sum256(passwd)
	return s
}

// wantNothingOutside compares the host with the snapshot taken before:
// no entry next to the data dir, no new entry in the server's TMPDIR nor
// one in the host's /tmp owned by a sandbox uid, /etc/passwd unchanged,
// and nothing with the marker's name in the filesystem's obvious targets.
func wantNothingOutside(t testing.TB, before hostSnapshot, dataDir string) {
	t.Helper()
	after := snapshotHost(t, dataDir)
	if !slices.Equal(before.siblings, after.siblings) {
		t.Errorf("entries next to the data dir: before %v, after %v", before.siblings, after.siblings)
	}
	for _, left := range leakcheck.NewIn(before.tmp, after.tmp) {
		t.Errorf("new during the hostile requests: %s", left)
	}
	if after.passwd != before.passwd {
		t.Error("/etc/passwd changed")
	}
	for _, dir := range []string{"/", "/etc", "/tmp", filepath.Dir(filepath.Dir(dataDir)), filepath.Dir(dataDir)} {
		matches, _ := filepath.Glob(filepath.Join(dir, "*"+hostileMarker+"*"))
		for _, m := range matches {
			t.Errorf("a hostile request wrote %s", m)
		}
	}
	// Inside the data dir only the server's own stores.
	entries, _ := os.ReadDir(dataDir)
	for _, e := range entries {
		if !slices.Contains([]string{"files", "jobs.db", "api-sessions", "sessions", "secrets.key", "secrets"}, e.Name()) {
			t.Errorf("unexpected %s in the data dir", e.Name())
		}
	}
	filepath.WalkDir(dataDir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && strings.Contains(d.Name(), hostileMarker) {
			t.Errorf("a hostile file name became a path in the data dir: %s", p)
		}
		return nil
	})
}

func (ts *testServer) wantHealthy(t testing.TB) {
	t.Helper()
	resp, data := ts.get(t, "/healthz", "")
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(data), "ok") {
		t.Errorf("healthz: %d %s", resp.StatusCode, data)
	}
	if res := ts.run(t, py("print('still here')")); res.Stdout != "still here\n" {
		t.Errorf("a run after the hostile requests: %q %q", res.Stdout, res.Stderr)
	}
}

func (tc hostileCase) request() request {
	r := request{method: tc.method, path: tc.path, body: tc.body, contentType: tc.contentType, header: tc.header}
	if r.method == "" {
		r.method = http.MethodPost
	}
	if r.path == "" {
		r.path = "/api/sandbox/execute"
	}
	return r
}

func (tc hostileCase) check(t *testing.T, ts *testServer) {
	t.Helper()
	resp, data := ts.call(t, tc.request())
	e := wantError(t, resp, data, tc.status, tc.msg...)
	if len(e.Error) > 4096 {
		t.Errorf("a %d-byte error message: %.200s...", len(e.Error), e.Error)
	}
}

func hostileExecuteCases(t testing.TB) []hostileCase {
	long := strings.Repeat("n", 256)
	deep17 := strings.Repeat("d/", 17) + hostileMarker
	files10k := jsonMap(10000, func(i int) string { return fmt.Sprintf(`"f%d":""`, i) })
	args257 := jsonList(257, func(int) string { return `"a"` })
	bigArgs := jsonList(2, func(int) string { return `"` + strings.Repeat("x", 40<<10) + `"` })
	env129 := jsonMap(129, func(i int) string { return fmt.Sprintf(`"V%d":"x"`, i) })
	cases101 := jsonList(101, func(int) string { return `{"input_data":"1"}` })
	multi, multiType := multipartBody(t, [3]string{"request", "", string(pyBody(""))})
	gz := http.Header{"Content-Encoding": {"gzip"}}
	return []hostileCase{
		// Wrong types for every field.
		{name: "language_number", body: []byte(`{"language":1,"code":"x"}`), status: 400, msg: []string{"malformed JSON", "language"}},
		{name: "code_array", body: []byte(`{"language":"python","code":[]}`), status: 400, msg: []string{`code must be a string or {"file_id"`}},
		{name: "code_number", body: []byte(`{"language":"python","code":42}`), status: 400, msg: []string{`code must be a string`}},
		{name: "files_string", body: pyBody(`,"files":"x"`), status: 400, msg: []string{"malformed JSON", "files"}},
		{name: "files_array", body: pyBody(`,"files":["a"]`), status: 400, msg: []string{"malformed JSON", "files"}},
		{name: "file_content_number", body: pyBody(`,"files":{"a":5}`), status: 400, msg: []string{`files["a"]`, "a file is a string or"}},
		{name: "args_object", body: pyBody(`,"args":{}`), status: 400, msg: []string{"malformed JSON", "args"}},
		{name: "args_numbers", body: pyBody(`,"args":[1,2]`), status: 400, msg: []string{"malformed JSON", "args"}},
		{name: "env_array", body: pyBody(`,"env":[1]`), status: 400, msg: []string{"malformed JSON", "env"}},
		{name: "env_value_number", body: pyBody(`,"env":{"A":1}`), status: 400, msg: []string{"malformed JSON", "env"}},
		{name: "timeout_string", body: pyBody(`,"timeout_seconds":"5"`), status: 400, msg: []string{"malformed JSON", "timeout_seconds"}},
		{name: "timeout_bool", body: pyBody(`,"timeout_seconds":true`), status: 400, msg: []string{"malformed JSON", "timeout_seconds"}},
		{name: "memory_fraction", body: pyBody(`,"max_memory_mb":1.5`), status: 400, msg: []string{"malformed JSON", "max_memory_mb"}},
		{name: "output_bytes_exponent", body: pyBody(`,"max_output_bytes":1e3`), status: 400, msg: []string{"malformed JSON", "max_output_bytes"}},
		{name: "test_cases_object", body: pyBody(`,"test_cases":{}`), status: 400, msg: []string{"malformed JSON", "test_cases"}},
		{name: "async_string", body: pyBody(`,"async":"yes"`), status: 400, msg: []string{"malformed JSON", "async"}},
		{name: "output_files_string", body: pyBody(`,"output_files":"*"`), status: 400, msg: []string{"malformed JSON", "output_files"}},
		// Numbers at and past the edges.
		{name: "timeout_1e308", body: pyBody(`,"timeout_seconds":1e308`), status: 400, msg: []string{"timeout_seconds 1e+308 is above the maximum of 300s"}},
		{name: "timeout_1e400", body: pyBody(`,"timeout_seconds":1e400`), status: 400, msg: []string{"malformed JSON", "timeout_seconds"}},
		{name: "memory_2pow63", body: pyBody(`,"max_memory_mb":9223372036854775808`), status: 400, msg: []string{"malformed JSON", "max_memory_mb"}},
		{name: "memory_2pow63_minus1", body: pyBody(`,"max_memory_mb":9223372036854775807`), status: 400, msg: []string{"max_memory_mb", "above the maximum"}},
		{name: "processes_huge", body: pyBody(`,"max_processes":1e18`), status: 400, msg: []string{"malformed JSON", "max_processes"}},
		{name: "timeout_nan_string", body: pyBody(`,"timeout_seconds":"NaN"`), status: 400, msg: []string{"malformed JSON", "timeout_seconds"}},
		{name: "timeout_nan_literal", body: pyBody(`,"timeout_seconds":NaN`), status: 400, msg: []string{"malformed JSON", "invalid character"}},
		{name: "timeout_infinity", body: pyBody(`,"timeout_seconds":Infinity`), status: 400, msg: []string{"malformed JSON"}},
		{name: "leading_zero", body: pyBody(`,"timeout_seconds":05`), status: 400, msg: []string{"malformed JSON"}},
		{name: "negative_processes", body: pyBody(`,"max_processes":-1`), status: 400, msg: []string{"max_processes must not be negative"}},
		{name: "negative_cpu", body: pyBody(`,"cpu_time_seconds":-0.5`), status: 400, msg: []string{"cpu_time_seconds must not be negative"}},
		{name: "negative_compile_timeout", body: pyBody(`,"compile_timeout_seconds":-1e308`), status: 400, msg: []string{"compile_timeout_seconds must not be negative"}},
		{name: "negative_file_size", body: pyBody(`,"max_file_size_bytes":-9223372036854775808`), status: 400, msg: []string{"max_file_size_bytes must not be negative"}},
		{name: "negative_float_tolerance", body: pyBody(`,"test_cases":[{"input_data":"1"}],"float_tolerance":-1`), status: 400, msg: []string{"float_tolerance"}},
		// Deep nesting (Go's decoder stops at 10000 levels).
		{name: "deep_arrays_100k", body: pyBody(`,"args":` + nested(100000)), status: 400, msg: []string{"malformed JSON", "exceeded max depth"}},
		{name: "deep_objects_100k", body: pyBody(`,"files":{"a":` + nestedObjects(100000) + `}`), status: 400, msg: []string{"malformed JSON", "exceeded max depth"}},
		{name: "deep_unknown_field", body: pyBody(`,"zzz":` + nested(20000)), status: 400, msg: []string{"malformed JSON", "exceeded max depth"}},
		// Encodings.
		{name: "invalid_utf8_code", body: []byte("{\"language\":\"python\",\"code\":\"print('\xff\xfe')\"}"), status: 400, msg: []string{"UTF-8"}},
		{name: "invalid_utf8_file_name", body: pyBody(",\"files\":{\"a\xc0\":\"x\"}"), status: 400, msg: []string{"UTF-8"}},
		{name: "invalid_utf8_input", body: pyBody(",\"input_data\":\"\xe9t\xe9\""), status: 400, msg: []string{"UTF-8"}},
		{name: "utf8_bom", body: append([]byte("\xef\xbb\xbf"), pyBody("")...), status: 400, msg: []string{"malformed JSON"}},
		{name: "utf16_body", body: []byte("\xff\xfe{\x00}\x00"), status: 400, msg: []string{"malformed JSON"}},
		// NUL bytes.
		{name: "nul_arg", body: pyBody(`,"args":["a\u0000b"]`), status: 400, msg: []string{"argument contains a NUL byte"}},
		{name: "nul_env_value", body: pyBody(`,"env":{"A":"x\u0000y"}`), status: 400, msg: []string{"invalid environment variable"}},
		{name: "nul_env_key", body: pyBody(`,"env":{"A\u0000B":"x"}`), status: 400, msg: []string{"invalid environment variable"}},
		{name: "nul_file_name", body: pyBody(`,"files":{"a\u0000` + hostileMarker + `":"x"}`), status: 400, msg: []string{"invalid file name", "NUL"}},
		// Hostile file names.
		{name: "file_dotdot", body: pyBody(`,"files":{"../` + hostileMarker + `":"x"}`), status: 400, msg: []string{"invalid file name", "leaves /work"}},
		{name: "file_etc_passwd", body: pyBody(`,"files":{"/etc/passwd":"root::0:0::/:/bin/sh"}`), status: 400, msg: []string{"invalid file name", "absolute"}},
		{name: "file_abs_tmp", body: pyBody(`,"files":{"/tmp/` + hostileMarker + `":"x"}`), status: 400, msg: []string{"invalid file name", "absolute"}},
		{name: "file_inner_dotdot", body: pyBody(`,"files":{"a/../../` + hostileMarker + `":"x"}`), status: 400, msg: []string{"invalid file name", "leaves /work"}},
		{name: "file_deep_dotdot", body: pyBody(`,"files":{"a/b/../../../../../../tmp/` + hostileMarker + `":"x"}`), status: 400, msg: []string{"invalid file name", "leaves /work"}},
		{name: "file_dot", body: pyBody(`,"files":{".":"x"}`), status: 400, msg: []string{"invalid file name"}},
		{name: "file_empty_name", body: pyBody(`,"files":{"":"x"}`), status: 400, msg: []string{"invalid file name", "empty"}},
		{name: "file_bidi_override", body: pyBody(`,"files":{"x\u202etxt.exe":"x"}`), status: 400, msg: []string{"invalid file name", "bidirectional"}},
		{name: "file_control_char", body: pyBody(`,"files":{"x\u001b[31m":"x"}`), status: 400, msg: []string{"invalid file name", "control"}},
		{name: "file_long_name", body: pyBody(`,"files":{"` + long + `":"x"}`), status: 400, msg: []string{"invalid file name", "longer than 255 bytes"}},
		{name: "file_17_deep", body: pyBody(`,"files":{"` + deep17 + `":"x"}`), status: 400, msg: []string{"invalid file name", "deeper than 16"}},
		{name: "file_is_directory", body: pyBody(`,"files":{"a":"x","a/b":"y"}`), status: 400, msg: []string{"file a is also used as the directory of a/b"}},
		{name: "file_is_code_directory", body: pyBody(`,"files":{"main.py/x":"y"}`), status: 400, msg: []string{"also used as the directory"}},
		{name: "files_10k", body: pyBody(`,"files":` + files10k), status: 400, msg: []string{"too many files: 10000 (at most 1000)"}},
		{name: "file_bad_base64", body: pyBody(`,"files":{"a":{"content":"not base64!","encoding":"base64"}}`), status: 400, msg: []string{`files["a"]`, "invalid base64"}},
		{name: "file_unknown_encoding", body: pyBody(`,"files":{"a":{"content":"x","encoding":"rot13"}}`), status: 400, msg: []string{`unknown file encoding "rot13"`}},
		{name: "file_gzip_encoding", body: pyBody(`,"files":{"a":{"content":"x","encoding":"gzip"}}`), status: 400, msg: []string{`unknown file encoding "gzip"`}},
		{name: "file_extra_member", body: pyBody(`,"files":{"a":{"content":"x","mode":"4755"}}`), status: 400, msg: []string{`files["a"]`}},
		{name: "file_no_content", body: pyBody(`,"files":{"a":{"encoding":"base64"}}`), status: 400, msg: []string{`files["a"]`}},
		{name: "file_id_number", body: pyBody(`,"files":{"a":{"file_id":5}}`), status: 400, msg: []string{`files["a"]`}},
		{name: "file_id_traversal", body: pyBody(`,"files":{"a":{"file_id":"../../etc/passwd"}}`), status: 400, msg: []string{`unknown file id "../../etc/passwd"`}},
		{name: "file_id_unknown", body: pyBody(`,"files":{"a":{"file_id":"file_000000000000000000000000"}}`), status: 400, msg: []string{"unknown file id"}},
		{name: "code_file_id_number", body: []byte(`{"language":"python","code":{"file_id":5}}`), status: 400, msg: []string{`code must be a string or {"file_id"`}},
		{name: "code_file_id_traversal", body: []byte(`{"language":"python","code":{"file_id":"/etc/passwd"}}`), status: 400, msg: []string{`unknown file id "/etc/passwd"`}},
		// Body shapes.
		{name: "duplicate_language", body: []byte(`{"language":"python","language":"cobol-2099","code":"x"}`), status: 400, msg: []string{"Unsupported language: 'cobol-2099'"}},
		{name: "duplicate_timeout", body: pyBody(`,"timeout_seconds":5,"timeout_seconds":-1`), status: 400, msg: []string{"timeout_seconds must not be negative"}},
		{name: "trailing_garbage", body: append(pyBody(""), "garbage"...), status: 400, msg: []string{"malformed JSON"}},
		{name: "trailing_comma", body: []byte(`{"language":"python","code":"print(1)",}`), status: 400, msg: []string{"malformed JSON"}},
		{name: "comment", body: append([]byte("// hi\n"), pyBody("")...), status: 400, msg: []string{"malformed JSON"}},
		{name: "single_quotes", body: []byte(`{'language':'python','code':'print(1)'}`), status: 400, msg: []string{"malformed JSON"}},
		{name: "empty_body", body: []byte{}, status: 400, msg: []string{"malformed JSON"}},
		{name: "whitespace_body", body: []byte(" \n\t "), status: 400, msg: []string{"malformed JSON"}},
		{name: "null_body", body: []byte("null"), status: 400, msg: []string{"language is required"}},
		{name: "array_body", body: []byte(`[` + string(pyBody("")) + `]`), status: 400, msg: []string{"malformed JSON"}},
		{name: "string_body", body: []byte(`"print(1)"`), status: 400, msg: []string{"malformed JSON"}},
		{name: "number_body", body: []byte(`42`), status: 400, msg: []string{"malformed JSON"}},
		{name: "array_body_message", body: []byte(`[]`), status: 400, msg: []string{"JSON object"}},
		{name: "wrong_type_message", body: pyBody(`,"timeout_seconds":"5"`), status: 400, msg: []string{"timeout_seconds", "number"}},
		{name: "unknown_proto_field", body: pyBody(`,"__proto__":{"admin":true}`), status: 400, msg: []string{`unknown field "__proto__"`}},
		{name: "case_folded_key", body: []byte(`{"language":"python","code":"print(1)","Timeout_Seconds":1}`), status: 400, msg: []string{`unknown field "Timeout_Seconds"`}},
		{name: "case_folded_key_suggestion", body: pyBody(`,"Timeout_Seconds":1`), status: 400, msg: []string{`malformed JSON: unknown field "Timeout_Seconds" (did you mean "timeout_seconds"?)`}},
		{name: "case_folded_nested_key", body: pyBody(`,"network":{"ALLOW":["pypi.org"]}`), status: 400, msg: []string{`unknown field "ALLOW" in network`, `"allow"`}},
		{name: "case_folded_file_object", body: pyBody(`,"files":{"a":{"Content":"x"}}`), status: 400, msg: []string{`unknown field "Content" in files["a"]`, `"content"`}},
		{name: "case_folded_file_id", body: pyBody(`,"files":{"a":{"File_ID":"file_000000000000000000000000"}}`), status: 400, msg: []string{`unknown field "File_ID"`, `"file_id"`}},
		{name: "case_folded_test_case", body: pyBody(`,"test_cases":[{"input_data":"1"},{"Input_Data":"2"}]`), status: 400, msg: []string{`unknown field "Input_Data" in test_cases[1]`}},
		{name: "case_folded_entrypoint", body: pyBody(`,"entrypoint":{"Function":"f"}`), status: 400, msg: []string{`unknown field "Function" in entrypoint`}},
		// Bounds.
		{name: "args_257", body: pyBody(`,"args":` + args257), status: 400, msg: []string{"too many args: 257 (at most 256)"}},
		{name: "args_80k", body: pyBody(`,"args":` + bigArgs), status: 400, msg: []string{"arguments total 81920 bytes (at most 65536)"}},
		{name: "env_129", body: pyBody(`,"env":` + env129), status: 400, msg: []string{"too many env entries: 129 (at most 128)"}},
		{name: "env_key_equals", body: pyBody(`,"env":{"A=B":"c"}`), status: 400, msg: []string{`invalid environment variable "A=B"`}},
		{name: "env_key_empty", body: pyBody(`,"env":{"":"c"}`), status: 400, msg: []string{`invalid environment variable ""`}},
		{name: "output_pattern_absolute", body: pyBody(`,"output_files":["/etc/*"]`), status: 400, msg: []string{"invalid output file pattern"}},
		{name: "output_pattern_bad_glob", body: pyBody(`,"output_files":["["]`), status: 400, msg: []string{"invalid output file pattern"}},
		{name: "language_path", body: []byte(`{"language":"../../bin/sh","code":"id"}`), status: 400, msg: []string{"Unsupported language: '../../bin/sh'"}},
		{name: "language_huge", body: []byte(`{"language":"` + strings.Repeat("L", 1<<20) + `","code":"x"}`), status: 400, msg: []string{"Unsupported language"}},
		{name: "version_path", body: pyBody(`,"version":"../../../usr"`), status: 400, msg: []string{"not installed"}},
		// Callbacks: refused at submission, never contacted.
		{name: "callback_file", body: pyBody(`,"async":true,"callback_url":"file:///etc/passwd"`), status: 400, msg: []string{`callback_url scheme "file": use http or https`}},
		{name: "callback_gopher", body: pyBody(`,"async":true,"callback_url":"gopher://127.0.0.1:70/"`), status: 400, msg: []string{`callback_url scheme "gopher"`}},
		{name: "callback_metadata", body: pyBody(`,"async":true,"callback_url":"http://169.254.169.254/latest/meta-data/"`), status: 400, msg: []string{"callback_url refused", "169.254.169.254 is a link-local address"}},
		{name: "callback_metadata_v4mapped", body: pyBody(`,"async":true,"callback_url":"http://[::ffff:169.254.169.254]/"`), status: 400, msg: []string{"callback_url refused", "link-local"}},
		{name: "callback_metadata_nat64", body: pyBody(`,"async":true,"callback_url":"http://[64:ff9b::a9fe:a9fe]/"`), status: 400, msg: []string{"callback_url refused", "NAT64"}},
		{name: "callback_loopback", body: pyBody(`,"async":true,"callback_url":"http://127.0.0.1:1/"`), status: 400, msg: []string{"callback_url refused", "loopback"}},
		{name: "callback_unspecified", body: pyBody(`,"async":true,"callback_url":"http://0.0.0.0/"`), status: 400, msg: []string{"callback_url refused"}},
		{name: "callback_credentials", body: pyBody(`,"async":true,"callback_url":"http://user:pw@192.0.2.1/"`), status: 400, msg: []string{"callback_url must not contain credentials"}},
		{name: "callback_relative", body: pyBody(`,"async":true,"callback_url":"/x"`), status: 400, msg: []string{"not an absolute http or https URL"}},
		{name: "callback_without_async", body: pyBody(`,"callback_url":"file:///etc/passwd"`), status: 400, msg: []string{"callback_url"}},
		// Test cases.
		{name: "test_cases_101", body: pyBody(`,"test_cases":` + cases101), status: 400, msg: []string{"too many test cases: 101 (at most 100)"}},
		{name: "compare_regex", body: pyBody(`,"test_cases":[{"input_data":"1","expected_output":"1"}],"compare":"regex"`), status: 400, msg: []string{`invalid compare "regex": use exact, lines or float`}},
		{name: "test_cases_with_input", body: pyBody(`,"test_cases":[{"input_data":"1"}],"input_data":"2"`), status: 400, msg: []string{"input_data and test cases cannot be combined"}},
		{name: "test_case_extra_member", body: pyBody(`,"test_cases":[{"stdin":"1"}]`), status: 400, msg: []string{"malformed JSON", "stdin"}},
		{name: "async_test_cases_101", body: pyBody(`,"async":true,"test_cases":` + cases101), status: 400, msg: []string{"too many test cases"}},
		{name: "async_compare_regex", body: pyBody(`,"async":true,"test_cases":[{"input_data":"1"}],"compare":"regex"`), status: 400, msg: []string{`invalid compare "regex"`}},
		{name: "async_env_equals", body: pyBody(`,"async":true,"env":{"A=B":"c"}`), status: 400, msg: []string{"invalid environment variable"}},
		// Sessions and stdin.
		{name: "session_traversal", body: pyBody(`,"session_id":"../../etc"`), status: 400, msg: []string{`unknown session "../../etc"`}},
		{name: "session_traversal_async", body: pyBody(`,"async":true,"session_id":"../../etc"`), status: 400, msg: []string{`unknown session "../../etc"`}},
		{name: "session_unknown", body: pyBody(`,"session_id":"sess_000000000000000000000000"`), status: 400, msg: []string{"unknown session"}},
		{name: "input_encoding_unknown", body: pyBody(`,"input_data":"x","input_data_encoding":"rot13"`), status: 400, msg: []string{`input_data_encoding "rot13": use utf-8 or base64`}},
		{name: "input_not_base64", body: pyBody(`,"input_data":"not base64!","input_data_encoding":"base64"`), status: 400, msg: []string{"input_data is not valid base64"}},
		// Media types and encodings of the body.
		{name: "content_type_xml", body: []byte(`<execute><language>python</language></execute>`), contentType: "application/xml", status: 415, msg: []string{`Content-Type "application/xml": send application/json`}},
		{name: "content_type_multipart", body: multi, contentType: multiType, status: 415, msg: []string{"multipart/form-data", "send application/json"}},
		{name: "content_type_form", body: []byte("language=python&code=print(1)"), contentType: "application/x-www-form-urlencoded", status: 415, msg: []string{"send application/json"}},
		{name: "content_encoding_gzip", body: gzipped(t, pyBody("")), header: gz, status: 415, msg: []string{"Content-Encoding", "gzip"}},
		{name: "content_encoding_gzip_bomb", body: gzipped(t, make([]byte, 10<<20)), header: gz, status: 415, msg: []string{"Content-Encoding"}},
	}
}

// hostileOtherCases are for the files, sessions and executions endpoints.
func hostileOtherCases(t testing.TB) []hostileCase {
	noBoundary := "multipart/form-data"
	fieldOnly, fieldType := multipartBody(t, [3]string{"note", "", "no file here"})
	return []hostileCase{
		// POST /api/sandbox/files
		{name: "files_ttl_negative", path: "/api/sandbox/files?ttl_seconds=-1", body: []byte("x"), contentType: "application/octet-stream", status: 400, msg: []string{`ttl_seconds "-1": give a positive number of seconds`}},
		{name: "files_ttl_nan", path: "/api/sandbox/files?ttl_seconds=NaN", body: []byte("x"), contentType: "application/octet-stream", status: 400, msg: []string{`ttl_seconds "NaN"`}},
		{name: "files_ttl_inf", path: "/api/sandbox/files?ttl_seconds=1e400", body: []byte("x"), contentType: "application/octet-stream", status: 400, msg: []string{`ttl_seconds "1e400"`}},
		{name: "files_name_nul", path: "/api/sandbox/files?name=a%00b", body: []byte("x"), contentType: "application/octet-stream", status: 400, msg: []string{"control or bidirectional-override character"}},
		{name: "files_name_bidi", path: "/api/sandbox/files?name=x%E2%80%AEfdp.exe", body: []byte("x"), contentType: "application/octet-stream", status: 400, msg: []string{"bidirectional-override"}},
		{name: "files_name_invalid_utf8", path: "/api/sandbox/files?name=%ff%fe", body: []byte("x"), contentType: "application/octet-stream", status: 400, msg: []string{"at most 255 bytes of UTF-8"}},
		{name: "files_name_long", path: "/api/sandbox/files?name=" + strings.Repeat("n", 300), body: []byte("x"), contentType: "application/octet-stream", status: 400, msg: []string{"at most 255 bytes of UTF-8"}},
		{name: "files_multipart_no_boundary", path: "/api/sandbox/files", body: []byte("--x\r\n\r\n"), contentType: noBoundary, status: 400, msg: []string{"multipart/form-data without a boundary"}},
		{name: "files_multipart_no_file", path: "/api/sandbox/files", body: fieldOnly, contentType: fieldType, status: 400, msg: []string{"no file in the multipart body"}},
		{name: "files_multipart_garbage", path: "/api/sandbox/files", body: []byte("this is not multipart"), contentType: "multipart/form-data; boundary=zzz", status: 400, msg: []string{"malformed multipart body"}},
		{name: "files_too_large", path: "/api/sandbox/files", body: make([]byte, 1<<20+1), contentType: "application/octet-stream", status: 413, msg: []string{"file larger than 1048576 bytes"}},
		{name: "files_too_large_chunked", path: "/api/sandbox/files", body: make([]byte, 1<<20+1), contentType: "application/octet-stream", header: http.Header{}, status: 413, msg: []string{"file larger than"}},
		{name: "files_get_traversal", method: "GET", path: "/api/sandbox/files/..%2f..%2fetc%2fpasswd", status: 404, msg: []string{"no such file: ../../etc/passwd"}},
		{name: "files_content_traversal", method: "GET", path: "/api/sandbox/files/..%2f..%2fetc%2fpasswd/content", status: 404, msg: []string{"no such file"}},
		{name: "files_delete_traversal", method: "DELETE", path: "/api/sandbox/files/..%2fjobs.db", status: 404, msg: []string{"no such file: ../jobs.db"}},
		// POST /api/sandbox/sessions
		{name: "sessions_language_number", path: "/api/sandbox/sessions", body: []byte(`{"language":1}`), status: 400, msg: []string{"malformed JSON", "language"}},
		{name: "sessions_null", path: "/api/sandbox/sessions", body: []byte(`null`), status: 400, msg: []string{"language is required"}},
		{name: "sessions_array", path: "/api/sandbox/sessions", body: []byte(`[]`), status: 400, msg: []string{"malformed JSON"}},
		{name: "sessions_ttl_negative", path: "/api/sandbox/sessions", body: []byte(`{"language":"python","ttl_seconds":-1}`), status: 400, msg: []string{"ttl_seconds must be positive"}},
		{name: "sessions_ttl_huge", path: "/api/sandbox/sessions", body: []byte(`{"language":"python","ttl_seconds":1e308}`), status: 400, msg: []string{"ttl_seconds 1e+308 is above the maximum"}},
		{name: "sessions_memory_negative", path: "/api/sandbox/sessions", body: []byte(`{"language":"python","max_memory_mb":-1}`), status: 400, msg: []string{"max_memory_mb must not be negative"}},
		{name: "sessions_case_folded_key", path: "/api/sandbox/sessions", body: []byte(`{"language":"python","Max_Memory_MB":1}`), status: 400, msg: []string{`malformed JSON: unknown field "Max_Memory_MB" (did you mean "max_memory_mb"?)`}},
		{name: "sessions_unknown_field", path: "/api/sandbox/sessions", body: []byte(`{"language":"python","id":"../../etc"}`), status: 400, msg: []string{`unknown field "id"`}},
		{name: "sessions_unsupported", path: "/api/sandbox/sessions", body: []byte(`{"language":"../../bin/sh"}`), status: 400, msg: []string{"Unsupported language"}},
		{name: "sessions_deep", path: "/api/sandbox/sessions", body: []byte(`{"language":"python","x":` + nested(20000) + `}`), status: 400, msg: []string{"malformed JSON"}},
		{name: "sessions_trailing", path: "/api/sandbox/sessions", body: []byte(`{"language":"python"}{}`), status: 400, msg: []string{"more than one value"}},
		{name: "sessions_xml", path: "/api/sandbox/sessions", body: []byte(`<language/>`), contentType: "application/xml", status: 415, msg: []string{"send application/json"}},
		{name: "sessions_too_large", path: "/api/sandbox/sessions", body: []byte(`{"language":"python","x":"` + strings.Repeat("x", 70<<10) + `"}`), status: 413, msg: []string{"larger than 65536 bytes"}},
		{name: "sessions_get_traversal", method: "GET", path: "/api/sandbox/sessions/..%2f..%2fetc", status: 404, msg: []string{"no such session: ../../etc"}},
		{name: "sessions_file_traversal", method: "GET", path: "/api/sandbox/sessions/..%2f..%2fetc/file?path=passwd", status: 404, msg: []string{"no such session"}},
		// /api/sandbox/executions
		{name: "executions_bad_body", path: "/api/sandbox/executions", body: []byte(`{"language":1}`), status: 400, msg: []string{"malformed JSON"}},
		{name: "executions_callback_file", path: "/api/sandbox/executions", body: pyBody(`,"callback_url":"file:///etc/shadow"`), status: 400, msg: []string{`callback_url scheme "file"`}},
		{name: "executions_xml", path: "/api/sandbox/executions", body: []byte(`<x/>`), contentType: "application/xml", status: 415, msg: []string{"send application/json"}},
		{name: "executions_get_traversal", method: "GET", path: "/api/sandbox/executions/..%2fjobs.db", status: 404, msg: []string{"no such execution"}},
		{name: "executions_get_not_hex", method: "GET", path: "/api/sandbox/executions/exec_zz", status: 404, msg: []string{"no such execution: exec_zz"}},
		{name: "executions_get_long", method: "GET", path: "/api/sandbox/executions/exec_" + strings.Repeat("0", 200), status: 404, msg: []string{"no such execution"}},
		{name: "executions_wait_bad", method: "GET", path: "/api/sandbox/executions/exec_00?wait=maybe", status: 400, msg: []string{`wait="maybe": use true or false`}},
		{name: "executions_timeout_negative", method: "GET", path: "/api/sandbox/executions/exec_00?timeout=-1", status: 400, msg: []string{`timeout="-1": give a number of seconds`}},
		{name: "executions_timeout_nan", method: "GET", path: "/api/sandbox/executions/exec_00?timeout=NaN", status: 400, msg: []string{`timeout="NaN"`}},
	}
}

func TestHostileRequests(t *testing.T) {
	// Not parallel: the /tmp comparison wants this package's other tests
	// paused.
	parent := t.TempDir()
	// A TMPDIR of the test's own: every entry the server leaves in it
	// counts (the host's /tmp is shared with other test binaries).
	t.Setenv("TMPDIR", t.TempDir())
	cfg := jobsConfig(t)
	cfg.DataDir = filepath.Join(parent, "data")
	cfg.MaxFileBytes, cfg.FileQuotaBytes = 1<<20, 8<<20
	ts := serveServer(t, cfg)
	// The job store is open once an async request can be answered.
	ts.awaitJob(t, ts.submit(t, py("print('warm')"), "").ExecutionID, "")
	before := snapshotHost(t, cfg.DataDir)

	execCases, otherCases := hostileExecuteCases(t), hostileOtherCases(t)
	if n := len(execCases); n < 40 {
		t.Fatalf("only %d execute cases", n)
	}
	t.Logf("%d hostile execute requests, %d for the other endpoints", len(execCases), len(otherCases))
	t.Run("execute", func(t *testing.T) {
		for _, tc := range execCases {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				tc.check(t, ts)
			})
		}
	})
	t.Run("other_endpoints", func(t *testing.T) {
		for _, tc := range otherCases {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				if tc.name == "files_too_large_chunked" {
					r := tc.request()
					r.chunked = true
					resp, data := ts.call(t, r)
					wantError(t, resp, data, tc.status, tc.msg...)
					return
				}
				tc.check(t, ts)
			})
		}
	})

	// Odd but valid requests: answered 200 and harmless.
	t.Run("accepted", func(t *testing.T) {
		t.Run("negative_zero_timeout", func(t *testing.T) {
			t.Parallel()
			if res := ts.run(t, pyBody(`,"timeout_seconds":-0,"max_memory_mb":0`)); res.Status != "completed" || res.Stdout != "1\n" {
				t.Errorf("-0: %s %q %q", res.Status, res.Stdout, res.Stderr)
			}
		})
		t.Run("nul_in_code", func(t *testing.T) {
			// Code is a file's content: a NUL is the program's business
			// (this python stops reading at it; newer ones refuse it).
			t.Parallel()
			res := ts.run(t, []byte(`{"language":"python","code":"print(1)\u0000"}`))
			if res.Status != "completed" && !(res.Status == "error_runtime" && strings.Contains(res.Stderr, "null bytes")) {
				t.Errorf("NUL in code: %s %q %q", res.Status, res.Stdout, res.Stderr)
			}
		})
		t.Run("windows_device_names", func(t *testing.T) {
			// CON, NUL, aux.txt are ordinary names on Linux.
			t.Parallel()
			res := ts.run(t, with(py("import os\nprint(sorted(os.listdir('.')))\nprint(open('CON').read())"),
				"files", map[string]string{"CON": "con", "NUL": "", "aux.txt": "", "a/b/c/d/e/f/g/h/i/j/k/l/m/n/o/p": "15 deep"}))
			if res.Stdout != "['CON', 'NUL', 'a', 'aux.txt', 'main.py']\ncon\n" {
				t.Errorf("stdout %q stderr %q", res.Stdout, res.Stderr)
			}
		})
		t.Run("dotted_but_inside", func(t *testing.T) {
			t.Parallel()
			res := ts.run(t, with(py("print(open('b/x').read())"), "files", map[string]string{"a/../b/./x": "inside"}))
			if res.Stdout != "inside\n" {
				t.Errorf("stdout %q stderr %q", res.Stdout, res.Stderr)
			}
		})
		t.Run("upload_name_is_metadata", func(t *testing.T) {
			// A stored file's name is metadata: it never becomes a path.
			t.Parallel()
			f := ts.stored(t, "", []byte("data"), "?name=..%2F..%2F"+hostileMarker)
			if f.Name != "../../"+hostileMarker {
				t.Errorf("name %q", f.Name)
			}
			resp, body := ts.call(t, request{method: "GET", path: "/api/sandbox/files/" + f.FileID + "/content"})
			if resp.StatusCode != 200 || string(body) != "data" || !strings.HasPrefix(resp.Header.Get("Content-Disposition"), "attachment") {
				t.Errorf("content: %d %q %q", resp.StatusCode, body, resp.Header.Get("Content-Disposition"))
			}
		})
		t.Run("gzip_upload_stored_as_is", func(t *testing.T) {
			t.Parallel()
			body := gzipped(t, make([]byte, 10<<20))
			resp, data := ts.call(t, request{method: "POST", path: "/api/sandbox/files", body: body,
				contentType: "application/octet-stream", header: http.Header{"Content-Encoding": {"gzip"}}})
			if resp.StatusCode != http.StatusCreated {
				t.Fatalf("%d %s", resp.StatusCode, data)
			}
			var f FileInfo
			json.Unmarshal(data, &f)
			if f.Size != int64(len(body)) || f.SHA256 != sha(body) {
				t.Errorf("stored %d bytes (sha %s), sent %d", f.Size, f.SHA256, len(body))
			}
		})
	})

	t.Run("zip_bomb", func(t *testing.T) {
		bomb := zipBomb(t, 10<<20)
		if len(bomb) > 64<<10 {
			t.Fatalf("the bomb is %d bytes", len(bomb))
		}
		// Raw upload: stored byte for byte, not unpacked.
		f := ts.stored(t, "", bomb, "?name=bomb.zip")
		if f.Size != int64(len(bomb)) || f.SHA256 != sha(bomb) {
			t.Errorf("stored %d bytes, sent %d", f.Size, len(bomb))
		}
		resp, body := ts.call(t, request{method: "GET", path: "/api/sandbox/files/" + f.FileID + "/content"})
		if resp.StatusCode != 200 || !bytes.Equal(body, bomb) {
			t.Errorf("content: %d, %d bytes", resp.StatusCode, len(body))
		}
		// Multipart with an archive type: the same.
		mp, mpType := multipartBody(t, [3]string{"file", "bomb.zip", string(bomb)})
		resp, data := ts.call(t, request{method: "POST", path: "/api/sandbox/files", body: mp, contentType: mpType})
		var g FileInfo
		if json.Unmarshal(data, &g); resp.StatusCode != 201 || g.Size != int64(len(bomb)) {
			t.Errorf("multipart: %d %s", resp.StatusCode, data)
		}
		// What it inflates to is over the cap, and refused.
		resp, data = ts.upload(t, "", make([]byte, 10<<20), "?name=zeros.bin")
		wantError(t, resp, data, http.StatusRequestEntityTooLarge, "file larger than 1048576 bytes")
		// Nothing in the store's directory but files and their metadata.
		var total int64
		filepath.WalkDir(filepath.Join(cfg.DataDir, "files"), func(p string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				if !strings.HasSuffix(p, ".bin") && !strings.HasSuffix(p, ".json") {
					t.Errorf("unexpected %s in the file store", p)
				}
				if info, err := d.Info(); err == nil {
					total += info.Size()
				}
			}
			return nil
		})
		if total > 2<<20 {
			t.Errorf("the file store holds %d bytes: something was unpacked", total)
		}
		// In an execution it is a file in /work like any other.
		res := ts.run(t, with(py("import os\nprint(sorted(os.listdir('.')), os.path.getsize('bomb.zip'))"),
			"files", map[string]any{"bomb.zip": map[string]string{"content": base64.StdEncoding.EncodeToString(bomb), "encoding": "base64"}}))
		if want := fmt.Sprintf("['bomb.zip', 'main.py'] %d\n", len(bomb)); res.Stdout != want {
			t.Errorf("stdout %q, want %q (stderr %q)", res.Stdout, want, res.Stderr)
		}
	})

	ts.wantHealthy(t)
	wantNoSandbox(t)
	wantNothingOutside(t, before, cfg.DataDir)
}
