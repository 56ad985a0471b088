package executor

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// An interpreter session keeps its state from cell to cell, answers with
// the last expression's value, says what a cell printed and raised, and
// survives an exception and an interrupted cell.
func TestInterpreterCells(t *testing.T) {
	x := testExec
	session := "interp-" + newID()
	defer x.EndInterpreter(session)
	cell := func(code string, wall time.Duration) *Result {
		t.Helper()
		res, err := x.Execute(t.Context(), &Request{Language: "python", Code: []byte(code), SessionID: session, Interpreter: true,
			Limits: Limits{WallTime: wall}})
		if err != nil {
			t.Fatalf("%q: %v", code, err)
		}
		return res
	}
	if r := cell("x = 41", 0); r.Status != StatusCompleted || r.Value != nil {
		t.Fatalf("assignment: %+v", r)
	}
	if r := cell("x + 1", 0); r.Status != StatusCompleted || r.Value["text/plain"] != "42" {
		t.Fatalf("value: %+v", r)
	}
	if r := cell("import math\ndef double(n):\n    return n * 2\nprint('hello'); double(21) + math.floor(0.5)", 0); r.Stdout != "hello\n" || r.Value["text/plain"] != "42" {
		t.Errorf("print and value: stdout %q value %v stderr %q", r.Stdout, r.Value, r.Stderr)
	}
	r := cell("1/0", 0)
	if r.Status != StatusRuntimeError || r.Exception == nil || r.Exception.Type != "ZeroDivisionError" || !strings.Contains(r.Exception.Traceback, "Traceback") {
		t.Errorf("exception: %+v %+v", r, r.Exception)
	}
	if r := cell("x", 0); r.Value["text/plain"] != "41" {
		t.Errorf("after the exception: %+v", r)
	}
	r = cell("import time\nwhile True:\n    time.sleep(0.01)\n", time.Second)
	if r.Status != StatusTimeout || r.Restarted {
		t.Errorf("an interrupted cell: %s restarted=%v %+v", r.Status, r.Restarted, r.Exception)
	}
	if r := cell("x", 0); r.Value["text/plain"] != "41" || r.Restarted {
		t.Errorf("after the interrupt: %+v", r)
	}
	// A cell blocked in one system call (a long sleep) wakes to the
	// interrupt too: interrupt_main() alone would wait for the sleep to end
	// and the kernel would be killed.
	r = cell("import time\ntime.sleep(600)\n", time.Second)
	if r.Status != StatusTimeout || r.Restarted || r.Exception == nil || r.Exception.Type != "KeyboardInterrupt" {
		t.Errorf("an interrupted sleep: %s restarted=%v %+v", r.Status, r.Restarted, r.Exception)
	} else if tb := r.Exception.Traceback; !strings.Contains(tb, `File "<cell>", line 2`) || strings.Contains(tb, "kernel.py") {
		t.Errorf("the interrupted cell's traceback shows the kernel's frames, or not the cell's:\n%s", tb)
	}
	if r := cell("x", 0); r.Value["text/plain"] != "41" || r.Restarted {
		t.Errorf("after the interrupted sleep: %+v", r)
	}
	if r := cell("class H:\n    def _repr_html_(self): return '<b>h</b>'\nH()", 0); r.Value["text/html"] != "<b>h</b>" {
		t.Errorf("rich value: %v", r.Value)
	}
	// A cell that will not stop is killed; the result and the next cell's
	// say the interpreter was started again, and the state is gone.
	r = cell("import time\nwhile True:\n    try:\n        time.sleep(0.01)\n    except KeyboardInterrupt:\n        pass\n", time.Second)
	if r.Status != StatusTimeout || !r.Restarted {
		t.Errorf("a cell that ignores the interrupt: %s restarted=%v", r.Status, r.Restarted)
	}
	if r := cell("x", 0); !r.Restarted || r.Exception == nil || r.Exception.Type != "NameError" {
		t.Errorf("after the kill: restarted=%v %+v", r.Restarted, r.Exception)
	}
	if r := cell("x = 1\nx", 0); r.Restarted || r.Value["text/plain"] != "1" {
		t.Errorf("the new interpreter's next cell: restarted=%v %v", r.Restarted, r.Value)
	}
}

// A JavaScript interpreter session keeps its bindings, returns the last
// value, reports a thrown error, and can be interrupted.
func TestInterpreterJavaScript(t *testing.T) {
	x := testExec
	session := "interp-js-" + newID()
	defer x.EndInterpreter(session)
	cell := func(code string, wall time.Duration) *Result {
		t.Helper()
		res, err := x.Execute(t.Context(), &Request{Language: "javascript", Code: []byte(code), SessionID: session, Interpreter: true,
			Limits: Limits{WallTime: wall}})
		if err != nil {
			t.Fatalf("%q: %v", code, err)
		}
		return res
	}
	if r := cell("let y = 20; function twice(n) { return 2 * n }", 0); r.Status != StatusCompleted {
		t.Fatalf("declarations: %+v", r)
	}
	if r := cell("console.log('hi'); twice(y) + 2", 0); r.Status != StatusCompleted || r.Value["text/plain"] != "42" || r.Stdout != "hi\n" {
		t.Fatalf("value: %+v", r)
	}
	if r := cell("null.x", 0); r.Status != StatusRuntimeError || r.Exception == nil || r.Exception.Type != "TypeError" {
		t.Errorf("error: %+v %+v", r, r.Exception)
	}
	if r := cell("while (true) {}", time.Second); r.Status != StatusTimeout || r.Restarted {
		t.Errorf("an interrupted cell: %s restarted=%v", r.Status, r.Restarted)
	}
	if r := cell("y", 0); r.Value["text/plain"] != "20" {
		t.Errorf("after the interrupt: %+v", r)
	}
	if r := cell("Promise.resolve(5)", 0); r.Value["text/plain"] != "5" {
		t.Errorf("a promise's value: %+v", r)
	}
}

// A matplotlib figure left open by a cell comes back as image/png without
// plt.show(), a pandas DataFrame as text/html and text/plain (Debian's
// python3-matplotlib and python3-pandas: core test packages).
func TestInterpreterRichOutputs(t *testing.T) {
	x := testExec
	session := "interp-rich-" + newID()
	defer x.EndInterpreter(session)
	cell := func(code string) *Result {
		t.Helper()
		res, err := x.Execute(t.Context(), &Request{Language: "python", Code: []byte(code), SessionID: session, Interpreter: true,
			Limits: Limits{WallTime: 60 * time.Second}})
		if err != nil {
			t.Fatalf("%q: %v", code, err)
		}
		return res
	}
	r := cell("import matplotlib.pyplot as plt\nplt.plot([1, 3, 2])\nplt.title('t')\n")
	if r.Status != StatusCompleted || len(r.Display) != 1 || !strings.HasPrefix(r.Display[0]["image/png"], "iVBORw0KGgo") {
		t.Errorf("a figure: %s %q %d displays", r.Status, r.Stderr, len(r.Display))
	} else if c := r.Display[0]["application/vnd.sandbox-run.chart+json"]; !strings.Contains(c, `"type": "line"`) || !strings.Contains(c, `[[0.0, 1.0], [1.0, 3.0], [2.0, 2.0]]`) {
		t.Errorf("a figure's data: %s", c)
	}
	if r := cell("1"); len(r.Display) != 0 {
		t.Errorf("the figure was displayed again by the next cell")
	}
	// A pie's and a box plot's data, in the shape of E2B's charts; a figure it cannot describe: no data.
	chart := func(code string) string {
		t.Helper()
		r := cell(code)
		if r.Status != StatusCompleted || len(r.Display) != 1 || !strings.HasPrefix(r.Display[0]["image/png"], "iVBORw0KGgo") {
			t.Fatalf("%q: %s %q %d displays", code, r.Status, r.Stderr, len(r.Display))
		}
		c, ok := r.Display[0]["application/vnd.sandbox-run.chart+json"]
		if !ok {
			return ""
		}
		var v any
		if err := json.Unmarshal([]byte(c), &v); err != nil {
			t.Fatalf("%q: %v %s", code, err, c)
		}
		b, _ := json.Marshal(v)
		return string(b)
	}
	for _, c := range []struct{ code, want string }{
		{"plt.pie([90, 10], labels=['No', 'No, in blue'], startangle=90)\nplt.title('wake')",
			`{"elements":[{"angle":324,"label":"No","radius":1},{"angle":36,"label":"No, in blue","radius":1}],"title":"wake","type":"pie"}`},
		{"plt.pie([1, 1, 2])",
			`{"elements":[{"angle":90,"label":"","radius":1},{"angle":90,"label":"","radius":1},{"angle":180,"label":"","radius":1}],"title":null,"type":"pie"}`},
		{"plt.boxplot([[1, 2, 3, 4, 5, 6, 7, 8, 9, 30], [2, 4, 6]], labels=['a', 'b'])\nplt.title('scores')\nplt.ylabel('score')",
			`{"elements":[{"first_quartile":3.25,"label":"a","max":9,"median":5.5,"min":1,"outliers":[30],"third_quartile":7.75},` +
				`{"first_quartile":3,"label":"b","max":6,"median":4,"min":2,"outliers":[],"third_quartile":5}],` +
				`"title":"scores","type":"box_and_whisker","x_label":null,"x_unit":null,"y_label":"score","y_unit":null}`},
		{"plt.boxplot([[-40, 1, 2, 3, 4, 5, 6, 7, 8, 9]], vert=False, patch_artist=True, showmeans=True, labels=['c'])\nplt.xlabel('value')",
			`{"elements":[{"first_quartile":2.25,"label":"c","max":9,"median":4.5,"min":1,"outliers":[-40],"third_quartile":6.75}],` +
				`"title":null,"type":"box_and_whisker","x_label":null,"x_unit":null,"y_label":"value","y_unit":null}`},
		{"plt.boxplot([1, 2, 3])\nplt.scatter([1], [5])", ""},
	} {
		if got := chart("import matplotlib.pyplot as plt\n" + c.code); got != c.want {
			t.Errorf("%q's data:\n%s\nwant\n%s", c.code, got, c.want)
		}
	}
	r = cell("import pandas as pd\npd.DataFrame({'a': [1, 2], 'b': [3, 4]})")
	if r.Status != StatusCompleted || !strings.Contains(r.Value["text/html"], "<table") || !strings.Contains(r.Value["text/plain"], "a  b") {
		t.Errorf("a DataFrame: %s %q %v", r.Status, r.Stderr, r.Value)
	}
}
