package jobs

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

// capResult on results of every shape: the cut result fits, is valid
// JSON, says what was cut, and keeps prefixes of the streams.
func TestCapResult(t *testing.T) {
	t.Parallel()
	text := strings.Repeat("héllo \x01 wörld ", 4000)
	bin := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{0xff, 0, 0x80}, 30000))
	res := map[string]any{
		"execution_id": "exec_01", "status": "completed", "exit_code": 0, "stdout": text, "stderr": text,
		"stdout_truncated": false, "stderr_truncated": false, "duration_ms": 1.5,
		"output_files": map[string]string{"a.bin": bin},
		"test_cases":   []map[string]any{{"stdout": text}},
		"summary":      map[string]int{"total": 1},
	}
	raw := mustJSON(t, res)
	for _, limit := range []int64{minResultBytes, 20 << 10, 200 << 10} {
		out := capResult(raw, limit, "why")
		var m map[string]any
		if err := json.Unmarshal(out, &m); err != nil {
			t.Fatalf("limit %d: %v", limit, err)
		}
		if int64(len(out)) > limit {
			t.Errorf("limit %d: %d bytes", limit, len(out))
		}
		stdout, _ := m["stdout"].(string)
		reason, _ := m["result_truncated_reason"].(string)
		if m["result_truncated"] != true || !strings.HasPrefix(reason, "why: output_files dropped (1 files); test_cases dropped") ||
			m["summary"] == nil || m["test_cases"] != nil || len(m["output_files"].(map[string]any)) != 0 ||
			!strings.HasPrefix(text, stdout) || !utf8.ValidString(stdout) || (m["stdout_truncated"] == true) != (len(stdout) < len(text)) || m["status"] != "completed" {
			t.Errorf("limit %d: %s", limit, truncate(out))
		}
		if limit == 200<<10 && len(stdout) < 50<<10 {
			t.Errorf("limit %d: only %d bytes of stdout kept", limit, len(stdout))
		}
	}
	// base64 streams are cut at whole groups.
	raw = mustJSON(t, map[string]any{"status": "completed", "stdout": bin, "stdout_encoding": "base64", "output_files": map[string]string{}})
	out := capResult(raw, 8<<10, "why")
	var m struct {
		Stdout string `json:"stdout"`
	}
	json.Unmarshal(out, &m)
	if len(out) > 8<<10 || len(m.Stdout)%4 != 0 || !strings.HasPrefix(bin, m.Stdout) || len(m.Stdout) < 4<<10 {
		t.Errorf("base64: %d bytes, stdout %d", len(out), len(m.Stdout))
	}
	if _, err := base64.StdEncoding.DecodeString(m.Stdout); err != nil {
		t.Errorf("base64 stdout no longer decodes: %v", err)
	}
	// What fits is returned as it is.
	if small := mustJSON(t, map[string]any{"stdout": "x"}); !bytes.Equal(capResult(small, minResultBytes, "why"), small) {
		t.Error("a small result was changed")
	}
}

func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func truncate(b []byte) string {
	if len(b) > 2000 {
		return string(b[:2000]) + "..."
	}
	return string(b)
}
