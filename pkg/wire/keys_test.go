package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// strictDecode is how the server decodes: no unknown fields (matched
// case-insensitively by encoding/json), then CheckKeys.
func strictDecode(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	return CheckKeys(data, v)
}

func TestCheckKeysExact(t *testing.T) {
	for _, body := range []string{
		`{"language":"python","code":"print(1)"}`,
		` { "language" : "python" , "code" : "x" , "timeout_seconds" : "auto" } `,
		`{"language":"python","code":{"file_id":"file_1"},"files":{"a":"x","b":{"content":"eA==","encoding":"base64"},"c":{"file_id":"file_2"}}}`,
		`{"language":"python","code":"x","network":{"allow":["pypi.org"]},"test_cases":[{"input_data":"1","expected_output":"1","args":["a"]}]}`,
		`{"language":"python","code":"x","entrypoint":{"function":"f","params":{"Any":{"Key":[{"At":"all"}]}}}}`,
		`{"language":"python","code":"x","entrypoint":{"class_name":"C","method_name":"m","method_params":{"X":1}}}`,
		// Maps take any key, also one that is a field's name in other cases.
		`{"language":"python","code":"x","env":{"Timeout_Seconds":"1","LANGUAGE":"x"},"files":{"Code":"x","FILE_ID":{"content":"x"}}}`,
		// Escapes are undone before keys are compared.
		`{"\u006Canguage":"python","c\u006fde":"x"}`,
		`{"language":"python","code":"x\"}\\","input_data":"\\\\\"","args":["{\"Code\":1}"]}`,
		`{"language":null,"code":null,"files":null,"network":null,"test_cases":null,"entrypoint":null}`,
	} {
		var req ExecuteRequest
		if err := strictDecode([]byte(body), &req); err != nil {
			t.Errorf("%s: %v", body, err)
		}
	}
}

func TestCheckKeysCaseFolded(t *testing.T) {
	for _, tc := range []struct {
		body, want string
	}{
		{`{"language":"python","code":"print(1)","Timeout_Seconds":1}`, `unknown field "Timeout_Seconds" (did you mean "timeout_seconds"?)`},
		{`{"LANGUAGE":"python","code":"x"}`, `unknown field "LANGUAGE" (did you mean "language"?)`},
		{`{"language":"python","Code":{"file_id":"f"}}`, `unknown field "Code" (did you mean "code"?)`},
		{`{"language":"python","code":"x","Files":{"a":"x"}}`, `unknown field "Files" (did you mean "files"?)`},
		{`{"\u004Canguage":"python","code":"x"}`, `unknown field "Language" (did you mean "language"?)`},
		// Keys of the same letters in Unicode's other cases: encoding/json
		// folds them too (U+017F is a long s, U+212A the Kelvin sign).
		{`{"language":"python","code":"x","ſession_id":"s"}`, `unknown field "ſession_id" (did you mean "session_id"?)`},
		// Nested objects.
		{`{"language":"python","code":"x","network":{"Allow":["pypi.org"]}}`, `unknown field "Allow" in network (did you mean "allow"?)`},
		{`{"language":"python","code":"x","files":{"a.txt":{"Content":"x"}}}`, `unknown field "Content" in files["a.txt"] (did you mean "content"?)`},
		{`{"language":"python","code":"x","files":{"a.txt":{"content":"eA==","ENCODING":"base64"}}}`, `unknown field "ENCODING" in files["a.txt"] (did you mean "encoding"?)`},
		{`{"language":"python","code":"x","files":{"a.txt":{"File_Id":"f"}}}`, `unknown field "File_Id" in files["a.txt"] (did you mean "file_id"?)`},
		{`{"language":"python","code":{"FILE_ID":"f"}}`, `unknown field "FILE_ID" in code (did you mean "file_id"?)`},
		{`{"language":"python","code":"x","test_cases":[{"input_data":"1"},{"Expected_Output":"2"}]}`, `unknown field "Expected_Output" in test_cases[1] (did you mean "expected_output"?)`},
		{`{"language":"python","code":"x","entrypoint":{"Function":"f"}}`, `unknown field "Function" in entrypoint (did you mean "function"?)`},
		{`{"language":"python","code":"x","entrypoint":{"function":"f","PARAMS":{}}}`, `unknown field "PARAMS" in entrypoint (did you mean "params"?)`},
	} {
		var req ExecuteRequest
		err := strictDecode([]byte(tc.body), &req)
		var uf *UnknownFieldError
		if !errors.As(err, &uf) || err.Error() != tc.want {
			t.Errorf("%s: %v, want %s", tc.body, err, tc.want)
		}
	}
}

// TestCheckKeysOnlyAPINames: what is refused names the API's members,
// never the Go types that decode them; every documented member, and
// only those, is known.
func TestCheckKeysOnlyAPINames(t *testing.T) {
	var want []string
	rt := reflect.TypeFor[ExecuteRequest]()
	for _, f := range reflect.VisibleFields(rt) { // with the embedded Limits' fields
		if f.Anonymous {
			continue
		}
		if name, _, _ := strings.Cut(f.Tag.Get("json"), ","); name != "-" {
			want = append(want, name)
		}
	}
	slices.Sort(want)
	if got := infoOf(rt).names; !slices.Equal(got, want) {
		t.Errorf("known keys %q, want %q", got, want)
	}
	for _, body := range []string{`{"plain":{}}`, `{"Plain":{}}`, `{"CodeFileID":"f"}`, `{"FileIDs":{}}`, `{"TimeoutAuto":true}`, `{"Interpreter":true}`, `{"-":1}`} {
		err := CheckKeys([]byte(body), &ExecuteRequest{})
		var uf *UnknownFieldError
		if !errors.As(err, &uf) || uf.Suggestion != "" || uf.Path != "" {
			t.Errorf("%s: %v", body, err)
		}
	}
}

// Embedded structs' fields are promoted, as encoding/json promotes them.
type keysInner struct {
	Depth  int    `json:"depth"`
	Shadow string `json:"shadow"`
}

type keysPtrInner struct {
	Far     bool `json:"far,omitempty"`
	Untaged string
}

type keysClashA struct {
	Clash int // untagged: go vet refuses two equal tags
}

type keysClashB struct {
	Clash int
}

type keysSelf struct {
	Name string `json:"name"`
}

func (s *keysSelf) UnmarshalJSON(b []byte) error { return nil }

type keysOuter struct {
	keysInner
	*keysPtrInner
	keysClashA
	keysClashB
	Shadow     string               `json:"shadow"`
	Hidden     string               `json:"-"`
	Dash       string               `json:"-,"`
	Self       keysSelf             `json:"self"`
	Any        any                  `json:"any"`
	Tree       map[int][]*keysOuter `json:"tree"`
	Time       time.Time            `json:"time"`
	Raw        json.RawMessage      `json:"raw"`
	Array      [2]keysInner         `json:"array"`
	unexported int
}

func TestCheckKeysEmbedded(t *testing.T) {
	for _, tc := range []struct{ body, want string }{
		{`{"depth":1,"shadow":"s","far":true,"Untaged":"u","-":"d"}`, ""},
		{`{"self":{"Name":1,"x":[]},"any":{"Whatever":{}},"raw":{"K":1},"time":"2024-01-01T00:00:00Z"}`, ""},
		{`{"tree":{"1":[{"depth":1},null,{"tree":{"2":[{"far":false}]}}]},"array":[{"depth":1},{"shadow":""}]}`, ""},
		{`{"Depth":1}`, `unknown field "Depth" (did you mean "depth"?)`},
		{`{"FAR":true}`, `unknown field "FAR" (did you mean "far"?)`},
		{`{"untaged":"u"}`, `unknown field "untaged" (did you mean "Untaged"?)`},
		{`{"Clash":1}`, `unknown field "Clash"`}, // two at one depth: neither
		{`{"Hidden":"h"}`, `unknown field "Hidden"`},
		{`{"unexported":1}`, `unknown field "unexported"`},
		{`{"keysInner":{}}`, `unknown field "keysInner"`},
		{`{"tree":{"1":[{"depth":1},{"tree":{"2":[{"Far":false}]}}]}}`, `unknown field "Far" in tree["1"][1].tree["2"][0] (did you mean "far"?)`},
		{`{"array":[{"depth":1},{"Shadow":""}]}`, `unknown field "Shadow" in array[1] (did you mean "shadow"?)`},
	} {
		err := CheckKeys([]byte(tc.body), &keysOuter{})
		if got := errString(err); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.body, got, tc.want)
		}
	}
	// A session request's limits are an embedded struct.
	var req SessionRequest
	err := strictDecode([]byte(`{"language":"python","Max_Memory_MB":5}`), &req)
	if want := `unknown field "Max_Memory_MB" (did you mean "max_memory_mb"?)`; errString(err) != want {
		t.Errorf("session request: %v, want %s", err, want)
	}
	if err := strictDecode([]byte(`{"language":"python","max_memory_mb":5,"network":{"allow":[]}}`), &req); err != nil {
		t.Errorf("session request: %v", err)
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func TestCheckKeysLongKey(t *testing.T) {
	key := strings.Repeat("é", 200) // 400 bytes
	err := CheckKeys([]byte(`{"`+key+`":1}`), &ExecuteRequest{})
	var uf *UnknownFieldError
	if !errors.As(err, &uf) || uf.Key != key {
		t.Fatalf("%v", err)
	}
	if msg := err.Error(); len(msg) > 130 || !strings.Contains(msg, "...") || !strings.HasPrefix(msg, `unknown field "éé`) {
		t.Errorf("%d bytes: %s", len(msg), msg)
	}
	err = CheckKeys([]byte(`{"files":{"`+key+`":{"x":1}}}`), &ExecuteRequest{})
	if msg := errString(err); len(msg) > 150 || !strings.Contains(msg, `in files["éé`) {
		t.Errorf("%d bytes: %s", len(msg), msg)
	}
}

func TestCheckKeysOdd(t *testing.T) {
	// Not JSON, or not the type's kind: errors or nil, never a panic.
	for _, body := range []string{``, `{`, `{"language"`, `{"language":`, `{"language":"x"`, `{"language":"x",}`, `[`, `]`, `}`, `"`, `{"a`,
		`{"language":"x"}x`, `{"language":"x"}{}`, `{,}`, `{"code":[1,{"x":[}]}`, `{"code":}`, `:`, `{"files":{"a":{"content":1,}}}`} {
		if err := CheckKeys([]byte(body), &ExecuteRequest{}); err == nil {
			t.Errorf("%q: no error", body)
		}
	}
	for _, body := range []string{`null`, `1`, `"x"`, `[]`, `true`, `{"language":{"Any":1},"code":[{"X":1}],"args":{"Y":2},"network":[{"Z":3}]}`} {
		if err := CheckKeys([]byte(body), &ExecuteRequest{}); err != nil {
			t.Errorf("%q: %v", body, err)
		}
	}
	if err := CheckKeys([]byte(`{"A":1}`), nil); err != nil {
		t.Error(err)
	}
	var m map[string]any
	if err := CheckKeys([]byte(`{"A":{"b":[{"C":1}]}}`), &m); err != nil {
		t.Error(err)
	}
	deep := strings.Repeat(`{"args":`, 10001) + "1" + strings.Repeat("}", 10001)
	if err := CheckKeys([]byte(deep), &m); err == nil || !strings.Contains(err.Error(), "exceeded max depth") {
		t.Errorf("deep: %v", err)
	}
	type list struct {
		Next *list `json:"next"`
	}
	deep = strings.Repeat(`{"next":`, 10001) + "null" + strings.Repeat("}", 10001)
	if err := CheckKeys([]byte(deep), &list{}); err == nil || !strings.Contains(err.Error(), "exceeded max depth") {
		t.Errorf("deep: %v", err)
	}
}

// fullRequest has every member of a request set.
func fullRequest() ExecuteRequest {
	out := "1\n"
	return ExecuteRequest{
		Language: "python", Code: "print(1)", InputData: "aW4=", InputDataEncoding: "base64",
		Files: map[string]FileData{"text.txt": FileData("text"), "bin.dat": {0, 0xff}}, Version: "3.11", Image: "python:3.12",
		Args: []string{"a"}, Env: map[string]string{"HOME_DIR": "/work"}, OutputFiles: []string{"*.txt"}, MaxResponseBytes: 1 << 20,
		Network: &NetworkRequest{Allow: []string{"pypi.org"}}, Secrets: []string{"TOKEN"}, Isolation: "gvisor",
		SessionID: "sess_1", Async: true, CallbackURL: "https://example.com/cb",
		TestCases: []TestCase{{InputData: "1", ExpectedOutput: &out, Args: []string{"b"}}},
		Compare:   "float", FloatTolerance: 1e-6,
		Entrypoint: &Entrypoint{ClassName: "Solution", MethodName: "solve", MethodParams: json.RawMessage(`{"N1":1}`),
			Function: "main", Params: json.RawMessage(`{"X1":[{"Y2":2}]}`)},
		CodeFileID: "", FileIDs: map[string]string{"ref.csv": "file_2"},
		Limits: Limits{TimeoutSeconds: 2.5, MaxMemoryMB: 128, CPUTimeSeconds: 1, MaxProcesses: 4, MaxOutputBytes: 1 << 20, MaxFileSizeBytes: 1 << 20, CompileTimeoutSeconds: 10},
	}
}

// TestCheckKeysRoundTrip: a request marshalled in Go, with every member
// set, passes; the same with any one of its keys in other letter cases is
// refused (where encoding/json alone takes it), naming the right key.
func TestCheckKeysRoundTrip(t *testing.T) {
	req := fullRequest()
	rv := reflect.ValueOf(req)
	for i := range rv.NumField() {
		if f := rv.Type().Field(i); f.Tag.Get("json") != "-" && rv.Field(i).IsZero() {
			t.Fatalf("fullRequest leaves %s unset", f.Name)
		}
	}
	auto := req
	auto.TimeoutSeconds, auto.TimeoutAuto, auto.Code, auto.CodeFileID = 0, true, "", "file_1"
	for _, req := range []ExecuteRequest{req, auto} {
		body, err := json.Marshal(req)
		if err != nil {
			t.Fatal(err)
		}
		var back ExecuteRequest
		if err := strictDecode(body, &back); err != nil {
			t.Fatalf("%s: %v", body, err)
		}
		// Every key that is a member's name (map keys here have upper
		// case letters, digits or dots), one at a time.
		keys := regexp.MustCompile(`"([a-z_]+)":`).FindAllSubmatchIndex(body, -1)
		if len(keys) < 35 {
			t.Fatalf("only %d keys in %s", len(keys), body)
		}
		for _, k := range keys {
			name := string(body[k[2]:k[3]])
			for _, folded := range []string{strings.ToUpper(name), strings.ToUpper(name[:1]) + name[1:]} {
				mutated := slices.Concat(body[:k[2]], []byte(folded), body[k[3]:])
				var back ExecuteRequest
				if json.Unmarshal(mutated, &back) != nil {
					t.Errorf("encoding/json refuses %s", folded)
				}
				err := CheckKeys(mutated, &back)
				var uf *UnknownFieldError
				if !errors.As(err, &uf) || uf.Key != folded || uf.Suggestion != name {
					t.Errorf("%s at %d: %v", folded, k[2], err)
				}
			}
		}
	}
}

func FuzzCheckKeys(f *testing.F) {
	full, _ := json.Marshal(fullRequest())
	for _, s := range []string{string(full), `{"language":"python","code":"print(1)","Timeout_Seconds":1}`,
		`{"files":{"a":{"Content":"x"}}}`, `[{"a":"\\\"}"}]`, `{"code":{"file_id":"x"}}`, `{"test_cases":[{}]}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var req ExecuteRequest
		err := CheckKeys(data, &req)
		var uf *UnknownFieldError
		if errors.As(err, &uf) && uf.Suggestion != "" && !strings.EqualFold(uf.Key, uf.Suggestion) {
			t.Errorf("%q suggested for %q", uf.Suggestion, uf.Key)
		}
		var v any
		if json.Unmarshal(data, &v) == nil {
			if err := CheckKeys(data, &v); err != nil {
				t.Errorf("any: %v", err)
			}
			// What decodes strictly and passes has only exact names:
			// its keys are the request's own.
			if json.Unmarshal(data, &req) == nil && err == nil {
				if m, ok := v.(map[string]any); ok {
					known := infoOf(reflect.TypeFor[ExecuteRequest]()).fields
					for k := range m {
						if known[k] == nil {
							t.Errorf("%q passed", k)
						}
					}
				}
			}
		}
	})
}

// typicalRequest is a request as clients send them.
var typicalRequest = []byte(`{"language":"python","code":"import sys\nfrom helper import solve\n\ndef main():\n    data = sys.stdin.read().split()\n    n = int(data[0])\n    xs = list(map(int, data[1:1 + n]))\n    print(solve(xs))\n\nif __name__ == \"__main__\":\n    main()\n","input_data":"5\n1 2 3 4 5\n","files":{"helper.py":"def solve(xs):\n    return sum(x * x for x in xs)\n"},"timeout_seconds":5,"max_memory_mb":256,"args":["--fast"],"env":{"PYTHONHASHSEED":"0"}}`)

// BenchmarkDecodeRequest is what the server does with every body:
// compare with BenchmarkCheckKeys.
func BenchmarkDecodeRequest(b *testing.B) {
	b.SetBytes(int64(len(typicalRequest)))
	for b.Loop() {
		var req ExecuteRequest
		if err := json.Unmarshal(typicalRequest, &req); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkCheckKeys(b *testing.B) {
	var req ExecuteRequest
	b.SetBytes(int64(len(typicalRequest)))
	b.ReportAllocs()
	for b.Loop() {
		if err := CheckKeys(typicalRequest, &req); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkCheckKeysFull(b *testing.B) {
	full, _ := json.Marshal(fullRequest())
	var req ExecuteRequest
	b.SetBytes(int64(len(full)))
	b.ReportAllocs()
	for b.Loop() {
		if err := CheckKeys(full, &req); err != nil {
			b.Fatal(err)
		}
	}
}

// TestCheckKeysDeepPath: the path of a deep key shows its ends, and is
// made in linear time.
func TestCheckKeysDeepPath(t *testing.T) {
	type list struct {
		Next []*list `json:"next"`
	}
	body := strings.Repeat(`{"next":[`, 4000) + `{"Next":[]}` + strings.Repeat("]}", 4000)
	start := time.Now()
	err := CheckKeys([]byte(body), &list{})
	if d := time.Since(start); d > time.Second {
		t.Errorf("%v", d)
	}
	want := `unknown field "Next" in next[0].next[0].next[0].next[0]...next[0].next[0].next[0].next[0] (did you mean "next"?)`
	if errString(err) != want {
		t.Errorf("%v, want %s", err, want)
	}
	body = `{"next":[{"next":[]},{"next":[{"Next":[]}]}]}`
	want = `unknown field "Next" in next[1].next[0] (did you mean "next"?)`
	if err := CheckKeys([]byte(body), &list{}); errString(err) != want {
		t.Errorf("%v, want %s", err, want)
	}
}
