package jobs

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/sandbox-run/sandbox-run/pkg/config"
)

// Stored async results are capped (max_result_bytes, and what is left of
// the key's and the server's result quotas). A result above its cap is not
// dropped: it is cut down to fit, and says so with "result_truncated": true
// and "result_truncated_reason" (the sizes, the limit that applied and what
// was cut). What goes first: output_files (the map is left empty), then
// test_cases (the summary stays), then stdout and stderr are cut to
// prefixes (flagged stdout_truncated / stderr_truncated; base64 streams
// are cut at whole groups, text at whole characters), then the compile
// step's output, return_value, exception and skipped_files. The status,
// exit code, limits, times and the error stay, so a cut result still says
// how the run ended. Only if even that does not fit (a cap below a few
// hundred bytes, which Validate does not allow) is the result larger than
// its cap.

// minResultBytes is the least max_result_bytes may be: room for a cut
// result's fixed fields and its reason.
const minResultBytes = config.MinResultBytes

// reasonSlack is room kept for the result_truncated fields themselves.
const reasonSlack = 512

// capResult returns result if it fits in limit bytes, else result cut down
// to fit, with why (the start of result_truncated_reason).
func capResult(result json.RawMessage, limit int64, why string) json.RawMessage {
	if int64(len(result)) <= limit {
		return result
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(result, &m); err != nil || m == nil {
		m = map[string]json.RawMessage{"output_files": json.RawMessage("{}"), "stdout": json.RawMessage(`""`),
			"stderr": json.RawMessage(`""`), "stdout_truncated": json.RawMessage("true"), "stderr_truncated": json.RawMessage("true")}
	}
	var notes []string
	target := limit - int64(len(why)) - reasonSlack
	size := func() int64 {
		b, _ := json.Marshal(m)
		return int64(len(b))
	}
	fits := func() bool { return size() <= target }

	if raw, ok := m["output_files"]; ok && !fits() {
		var files map[string]json.RawMessage
		if json.Unmarshal(raw, &files) == nil && len(files) > 0 {
			m["output_files"] = json.RawMessage("{}")
			notes = append(notes, fmt.Sprintf("output_files dropped (%d files)", len(files)))
		}
	}
	if raw, ok := m["test_cases"]; ok && !fits() {
		var cases []json.RawMessage
		json.Unmarshal(raw, &cases)
		delete(m, "test_cases")
		notes = append(notes, fmt.Sprintf("test_cases dropped (%d cases; the summary is kept)", len(cases)))
	}
	if !fits() {
		notes = append(notes, cutStreams(m, "", target, size)...)
	}
	if raw, ok := m["compile"]; ok && !fits() {
		var step map[string]json.RawMessage
		if json.Unmarshal(raw, &step) == nil && step != nil {
			cutStreams(step, "compile ", 0, func() int64 { return 0 })
			b, _ := json.Marshal(step)
			m["compile"] = b
			notes = append(notes, "the compile step's output dropped")
		}
	}
	for _, field := range []string{"return_value", "exception", "skipped_files"} {
		if _, ok := m[field]; ok && !fits() {
			delete(m, field)
			notes = append(notes, field+" dropped")
		}
	}
	reason := why
	if len(notes) > 0 {
		reason += ": " + strings.Join(notes, "; ")
	}
	m["result_truncated"] = json.RawMessage("true")
	r, _ := json.Marshal(reason)
	m["result_truncated_reason"] = r
	out, err := json.Marshal(m)
	if err != nil {
		return result
	}
	return out
}

// cutStreams cuts m's stdout and stderr (prefixed with what in notes) so
// that size() is at most target, stderr first to at most half of the
// room; a target of 0 empties both. It returns notes on what it cut.
func cutStreams(m map[string]json.RawMessage, what string, target int64, size func() int64) []string {
	type stream struct {
		name, value string
		base64      bool
	}
	var streams []stream
	for _, name := range []string{"stdout", "stderr"} {
		var v string
		if json.Unmarshal(m[name], &v) != nil || v == "" {
			continue
		}
		var enc string
		json.Unmarshal(m[name+"_encoding"], &enc)
		streams = append(streams, stream{name, v, enc == "base64"})
		m[name] = json.RawMessage(`""`)
	}
	if len(streams) == 0 {
		return nil
	}
	room := max(target-size(), 0)
	var notes []string
	// stderr is usually the smaller: it gets what it needs up to half the
	// room, stdout the rest.
	for i := len(streams) - 1; i >= 0; i-- {
		st := streams[i]
		share := room
		if i > 0 {
			share = room / 2
		}
		cut := prefixWithin(st.value, st.base64, share)
		enc, _ := json.Marshal(cut)
		m[st.name] = enc
		room -= int64(len(enc)) - 2
		if len(cut) < len(st.value) {
			m[st.name+"_truncated"] = json.RawMessage("true")
			unit := "bytes"
			if st.base64 {
				unit = "base64 characters"
			}
			notes = append(notes, fmt.Sprintf("%s%s cut to %d of %d %s", what, st.name, len(cut), len(st.value), unit))
		}
	}
	return notes
}

// prefixWithin is the longest prefix of s whose JSON string encoding, less
// its quotes, takes at most n bytes: whole base64 groups of 4, or whole
// UTF-8 characters.
func prefixWithin(s string, base64 bool, n int64) string {
	if n <= 0 {
		return ""
	}
	if base64 {
		return s[:min(int64(len(s)), n/4*4)]
	}
	cost := func(k int) int64 {
		b, _ := json.Marshal(s[:k])
		return int64(len(b)) - 2
	}
	lo, hi := 0, min(len(s), int(n)) // a byte costs at least one
	for lo < hi {
		mid := (lo + hi + 1) / 2
		if cost(mid) <= n {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	for lo > 0 && lo < len(s) && !utf8.RuneStart(s[lo]) {
		lo--
	}
	return s[:lo]
}
