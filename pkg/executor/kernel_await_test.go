package executor

import (
	"strings"
	"testing"
	"time"
)

// jsCells returns a function that runs cells in a new JavaScript
// interpreter session (ended with the test).
func jsCells(t *testing.T) func(code string, wall time.Duration) *Result {
	x := testExec
	session := "interp-js-await-" + newID()
	t.Cleanup(func() { x.EndInterpreter(session) })
	return func(code string, wall time.Duration) *Result {
		t.Helper()
		res, err := x.Execute(t.Context(), &Request{Language: "javascript", Code: []byte(code), SessionID: session, Interpreter: true,
			Limits: Limits{WallTime: wall}})
		if err != nil {
			t.Fatalf("%q: %v", code, err)
		}
		return res
	}
}

// Top-level await in JavaScript cells, as in Node's REPL: the cell's value
// is the awaited one, its declarations (let, const, var, function, class,
// destructured) are the session's for the next cells, its output streams,
// a rejection is the cell's error (at the cell's line) and the session
// goes on; a cell without await is run as it always was.
func TestInterpreterJavaScriptAwait(t *testing.T) {
	cell := jsCells(t)
	value := func(code, want string) *Result {
		t.Helper()
		r := cell(code, 0)
		if r.Status != StatusCompleted || r.Value["text/plain"] != want {
			t.Fatalf("%q: %s value %v (want %q) exception %+v stderr %q", code, r.Status, r.Value, want, r.Exception, r.Stderr)
		}
		return r
	}
	value("const r = await Promise.resolve(41); r + 1", "42")
	value(`await new Promise(r => setTimeout(r, 10)); "done"`, "'done'")
	if r := cell("const a = await Promise.resolve(2)", 0); r.Status != StatusCompleted || r.Value != nil {
		t.Fatalf("a declaration that awaits: %s %v %+v", r.Status, r.Value, r.Exception)
	}
	value("a * 21", "42")
	value("function triple(n) { return 3 * n }\nclass K { get v() { return 14 } }\nawait null", "null")
	value("triple(new K().v)", "42")
	value("let b = 1, {c, d: [e = 5], ...f} = await Promise.resolve({c: 2, d: [], g: 6})\n"+
		"for (var i = 0; i < 2; i++) { var last = await Promise.resolve(i) }", "")
	value("[b, c, e, f.g, i, last]", "[ 1, 2, 5, 6, 2, 1 ]")
	// What looks like code in strings, comments, templates and regular
	// expressions is not rewritten.
	value("const s = \"let x = await 1; // not code\" /* let y = 2 */, re = /\\/\\/ \"[a-z]+\"/\n"+
		"const t = `${await Promise.resolve('b')} ${'}'} // ${`${1 + 1}`}`;\n[s.length, re.test('// \"ab\"'), t]", "[ 28, true, 'b } // 2' ]")
	value("[typeof x, typeof y, s.length]", "[ 'undefined', 'undefined', 28 ]")

	r := value("console.log('before'); await new Promise(r => setTimeout(r, 10)); console.log('after'); 7", "7")
	if r.Stdout != "before\nafter\n" {
		t.Errorf("an awaiting cell's output: %q", r.Stdout)
	}

	r = cell("await Promise.reject(new RangeError('nope'))", 0)
	if r.Status != StatusRuntimeError || r.Exception == nil || r.Exception.Type != "RangeError" || r.Exception.Message != "nope" {
		t.Errorf("a rejected await: %s %+v", r.Status, r.Exception)
	}
	value("a", "2")
	r = cell("await null\n\nnull.x", 0)
	if r.Status != StatusRuntimeError || r.Exception == nil || r.Exception.Type != "TypeError" || !strings.Contains(r.Exception.Traceback, "<cell>:3:") {
		t.Errorf("an error after an await: %s %+v", r.Status, r.Exception)
	}
	r = cell("const z = await 1\nfoo(]", 0)
	if r.Status != StatusRuntimeError || r.Exception == nil || r.Exception.Type != "SyntaxError" || !strings.Contains(r.Exception.Traceback, "<cell>:2") {
		t.Errorf("a syntax error in an awaiting cell: %s %+v", r.Status, r.Exception)
	}

	// Cells without await, as before: a promise's value, declarations, an
	// await where it is not allowed.
	value("Promise.resolve(a + 3)", "5")
	value("let plain = 40; plain + a", "42")
	r = cell("function g() { await 1 }", 0)
	if r.Status != StatusRuntimeError || r.Exception == nil || r.Exception.Type != "SyntaxError" {
		t.Errorf("await in a function: %s %+v", r.Status, r.Exception)
	}
	value("plain", "40")
}

// A cell that awaits past its wall time is interrupted, as a running one
// is, and the session keeps its state; so is one whose value is a promise
// that never settles (it was killed, its state lost).
func TestInterpreterJavaScriptAwaitInterrupt(t *testing.T) {
	cell := jsCells(t)
	if r := cell("const kept = await Promise.resolve(42)", 0); r.Status != StatusCompleted {
		t.Fatalf("kept: %s %+v", r.Status, r.Exception)
	}
	for _, code := range []string{"await new Promise(() => {})", "new Promise(() => {})"} {
		r := cell(code, time.Second)
		if r.Status != StatusTimeout || r.Restarted || r.Exception == nil || !strings.Contains(r.Exception.Message, "interrupted") {
			t.Errorf("%q: %s restarted=%v %+v", code, r.Status, r.Restarted, r.Exception)
		}
		if r := cell("kept", 0); r.Value["text/plain"] != "42" || r.Restarted {
			t.Errorf("after %q: restarted=%v %v %+v", code, r.Restarted, r.Value, r.Exception)
		}
	}
}
