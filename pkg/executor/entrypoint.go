package executor

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"

	"github.com/sandbox-run/sandbox-run/pkg/sandbox"
)

// RunnerTarget is where the runners are mounted (read-only) in every
// sandbox: part of its system image, never in /work.
const RunnerTarget = "/opt/sandbox-run/runner"

// callFile is the file of /work that carries the call (class, method,
// params) to the runner, which reads and deletes it before loading the
// user's code.
const callFile = ".sandbox-run-call.json"

//go:embed runners/python.py runners/node.js runners/kernel.py runners/kernel.js
var runnerFS embed.FS

// entryRunners are the languages whose code can be called, and how their
// runner starts.
var entryRunners = map[string]func(bin, source string) []string{
	"python": func(bin, source string) []string {
		return []string{bin, "-B", RunnerTarget + "/python.py", "/work/" + source}
	},
	"javascript": func(bin, source string) []string { return []string{bin, RunnerTarget + "/node.js", "/work/" + source} },
}

// SupportsEntrypoint reports whether a language's code can be called
// through an entry point.
func SupportsEntrypoint(language string) bool {
	_, ok := entryRunners[language]
	return ok
}

// installRunners writes the embedded runners once into a root-owned
// directory under dir named by their content hash (directories 0755, files
// 0444), which is then mounted read-only into the sandboxes. A directory
// already there with the same content is reused.
func installRunners(dir string) (string, error) {
	names, err := runnerFS.ReadDir("runners")
	if err != nil {
		return "", err
	}
	h := sha256.New()
	files := map[string][]byte{}
	for _, n := range names {
		b, err := runnerFS.ReadFile("runners/" + n.Name())
		if err != nil {
			return "", err
		}
		files[n.Name()] = b
		fmt.Fprintf(h, "%s\x00%d\x00", n.Name(), len(b))
		h.Write(b)
	}
	final := filepath.Join(dir, "runner", hex.EncodeToString(h.Sum(nil))[:16])
	if runnersIntact(final, files) {
		return final, nil
	}
	if err := os.MkdirAll(filepath.Dir(final), 0o755); err != nil {
		return "", err
	}
	if err := os.Chmod(filepath.Dir(final), 0o755); err != nil {
		return "", err
	}
	tmp, err := os.MkdirTemp(filepath.Dir(final), ".tmp-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(tmp, name), b, 0o444); err != nil {
			return "", err
		}
		if err := os.Chmod(filepath.Join(tmp, name), 0o444); err != nil {
			return "", err
		}
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return "", err
	}
	if err := os.Rename(tmp, final); err != nil {
		// Another executor installed the same runners meanwhile, or a
		// damaged copy is in the way: replace the latter.
		if runnersIntact(final, files) {
			return final, nil
		}
		os.RemoveAll(final)
		if err := os.Rename(tmp, final); err != nil {
			return "", err
		}
	}
	return final, nil
}

func runnersIntact(dir string, files map[string][]byte) bool {
	st, err := os.Stat(dir)
	if err != nil || !st.IsDir() || st.Mode().Perm() != 0o755 {
		return false
	}
	for name, b := range files {
		p := filepath.Join(dir, name)
		st, err := os.Stat(p)
		if err != nil || st.Mode().Perm() != 0o444 {
			return false
		}
		have, err := os.ReadFile(p)
		if err != nil || !bytes.Equal(have, b) {
			return false
		}
	}
	return true
}

var (
	pythonIdent = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	jsIdent     = regexp.MustCompile(`^[A-Za-z_$][A-Za-z0-9_$]*$`)
)

const maxIdentLen = 256

// validateEntrypoint checks an entry point for a language.
func validateEntrypoint(req *Request, lang *Language) error {
	ep := req.Entrypoint
	if ep == nil {
		return nil
	}
	if _, ok := entryRunners[lang.Name]; !ok {
		return invalid("entrypoint is not supported for %s (only for python and javascript)", lang.Name)
	}
	if len(req.TestCases) > 0 {
		return invalid("entrypoint cannot be combined with test_cases")
	}
	ident := pythonIdent
	if lang.Name == "javascript" {
		ident = jsIdent
	}
	checkName := func(field, v string) error {
		if len(v) > maxIdentLen || !ident.MatchString(v) {
			return invalid("entrypoint.%s %.80q is not an identifier", field, v)
		}
		return nil
	}
	checkParams := func(field string, raw json.RawMessage) error {
		if len(raw) == 0 {
			return nil
		}
		if len(raw) > MaxFileBytes {
			return invalid("entrypoint.%s is %d bytes (at most %d)", field, len(raw), MaxFileBytes)
		}
		var obj map[string]json.RawMessage
		if t := bytes.TrimSpace(raw); len(t) == 0 || t[0] != '{' || json.Unmarshal(t, &obj) != nil {
			return invalid("entrypoint.%s must be a JSON object (parameter name → value)", field)
		}
		return nil
	}
	switch {
	case ep.Function != "" && (ep.ClassName != "" || ep.MethodName != "" || len(ep.MethodParams) > 0):
		return invalid("entrypoint: give either function (with params) or class_name and method_name (with method_params), not both")
	case ep.Function != "":
		if err := checkName("function", ep.Function); err != nil {
			return err
		}
		return checkParams("params", ep.Params)
	case ep.ClassName == "" || ep.MethodName == "":
		return invalid("entrypoint needs class_name and method_name, or function")
	case len(ep.Params) > 0:
		return invalid("entrypoint: a method's parameters are method_params, not params")
	}
	if err := checkName("class_name", ep.ClassName); err != nil {
		return err
	}
	if err := checkName("method_name", ep.MethodName); err != nil {
		return err
	}
	return checkParams("method_params", ep.MethodParams)
}

// entryKey names an entry point for the duration statistics.
func entryKey(language string, ep *Entrypoint) string {
	switch {
	case ep == nil:
		return language
	case ep.Function != "":
		return language + "\x00" + ep.Function
	}
	return language + "\x00" + ep.ClassName + "." + ep.MethodName
}

// callSpec is the call file's content.
func callSpec(ep *Entrypoint) []byte {
	obj := map[string]json.RawMessage{}
	str := func(s string) json.RawMessage { b, _ := json.Marshal(s); return b }
	if ep.Function != "" {
		obj["function"] = str(ep.Function)
		obj["params"] = orEmpty(ep.Params)
	} else {
		obj["class_name"] = str(ep.ClassName)
		obj["method_name"] = str(ep.MethodName)
		obj["method_params"] = orEmpty(ep.MethodParams)
	}
	b, _ := json.Marshal(obj)
	return b
}

func orEmpty(raw json.RawMessage) json.RawMessage {
	if len(bytes.TrimSpace(raw)) == 0 {
		return json.RawMessage("{}")
	}
	return raw
}

// entrySpec turns a run spec into the runner's.
func (x *Executor) entrySpec(spec *sandbox.Spec, lang *Language, tc *Toolchain, source string, req *Request) error {
	if x.runnerDir == "" {
		return fmt.Errorf("the entry point runners are not installed: %v", x.runnerErr)
	}
	spec.Args = append(entryRunners[lang.Name](tc.Bin, source), req.Args...)
	spec.Files = mergeFiles(spec.Files, []sandbox.File{{Path: callFile, Data: callSpec(req.Entrypoint), Mode: 0o644}})
	spec.ResultPipe = true
	return nil
}

// runnerOutcome is what a runner writes to descriptor 3.
type runnerOutcome struct {
	OK    bool            `json:"ok"`
	Value json.RawMessage `json:"value"`
	Error *Exception      `json:"error"`
}

// applyOutcome reads the runner's outcome into the result.
func applyOutcome(res *Result, out *sandbox.Result) {
	failed := func(msg string) {
		res.Error = msg
		if res.Status == StatusCompleted {
			res.Status = StatusRuntimeError
		}
	}
	switch {
	case out.ResultTruncated:
		failed(fmt.Sprintf("the return value is larger than the output limit (%d bytes)", len(out.ResultData)))
		return
	case len(bytes.TrimSpace(out.ResultData)) == 0:
		if res.Status == StatusCompleted {
			failed("the program ended before the entry point returned (did the code exit?)")
		}
		return
	}
	var o runnerOutcome
	dec := json.NewDecoder(bytes.NewReader(out.ResultData))
	err := dec.Decode(&o)
	if err == nil && dec.More() {
		err = errors.New("more than one value")
	}
	if err != nil || (!o.OK && o.Error == nil) || (o.OK && len(o.Value) == 0) {
		failed("the entry point's result channel (descriptor 3) held something other than the runner's outcome")
		return
	}
	if !o.OK {
		// Not in Error: the exception is the program's output (logged only
		// at debug level), Error the executor's own words.
		res.Exception = o.Error
		if res.Status == StatusCompleted {
			res.Status = StatusRuntimeError
		}
		return
	}
	var compact bytes.Buffer
	if json.Compact(&compact, o.Value) != nil {
		failed("the entry point's return value is not valid JSON")
		return
	}
	res.ReturnValue = json.RawMessage(compact.Bytes())
}

// dropCallFile removes the call file from a run's files, should the runner
// have failed before deleting it.
func dropCallFile(out *sandbox.Result) {
	files := out.Files[:0]
	for _, f := range out.Files {
		if f.Path != callFile {
			files = append(files, f)
		}
	}
	out.Files = files
}
