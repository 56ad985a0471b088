package judge0

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"mime"
	"net/http"
	"net/url"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/sandbox-run/sandbox-run/pkg/jobs"
	"github.com/sandbox-run/sandbox-run/pkg/runner"
	"github.com/sandbox-run/sandbox-run/pkg/wire"
)

// Input is a submission as a client sends it (Judge0's names).
type Input struct {
	SourceCode             *string  `json:"source_code"`
	LanguageID             *int     `json:"language_id"`
	CompilerOptions        string   `json:"compiler_options"`
	CommandLineArguments   string   `json:"command_line_arguments"`
	Stdin                  *string  `json:"stdin"`
	ExpectedOutput         *string  `json:"expected_output"`
	CPUTimeLimit           *float64 `json:"cpu_time_limit"`
	CPUExtraTime           *float64 `json:"cpu_extra_time"`
	WallTimeLimit          *float64 `json:"wall_time_limit"`
	MemoryLimit            *float64 `json:"memory_limit"` // KB
	StackLimit             *float64 `json:"stack_limit"`
	MaxProcesses           *int64   `json:"max_processes_and_or_threads"`
	PerProcessTime         *bool    `json:"enable_per_process_and_thread_time_limit"`
	PerProcessMemory       *bool    `json:"enable_per_process_and_thread_memory_limit"`
	MaxFileSize            *float64 `json:"max_file_size"` // KB
	RedirectStderrToStdout bool     `json:"redirect_stderr_to_stdout"`
	CallbackURL            string   `json:"callback_url"`
	AdditionalFiles        string   `json:"additional_files"` // base64 zip
	NumberOfRuns           *int     `json:"number_of_runs"`
	EnableNetwork          bool     `json:"enable_network"`
	// Isolation is ours (wire.ExecuteRequest's): Judge0 has none.
	Isolation string `json:"isolation"`
}

// submission is a submission: what came (kept with its job as the job's
// Meta), and, once looked up, where its job is.
type submission struct {
	stored
	req  *wire.ExecuteRequest // what runs (at submission only)
	lang lang

	// Filled from the job when it is looked up.
	token    string
	statusID int
	created  time.Time
	finished time.Time
	res      *wire.Result
	message  string
}

// stored is what a submission keeps with its job (the job's Meta): what
// its answers repeat of it.
type stored struct {
	In     Input `json:"in"`
	Base64 bool  `json:"base64,omitempty"` // its input came base64 (callbacks answer alike)
	LangID int   `json:"language_id"`
	Runs   int   `json:"runs"`
	// The limits it runs with, as our request has them.
	CPUTime, WallTime  float64 `json:",omitempty"`
	MemoryMB, FileSize int64   `json:",omitempty"`
	Processes          int     `json:",omitempty"`
}

// Limits of what a submission may ask.
const (
	maxRuns    = 20
	maxExtract = 16 << 20
)

// decodeText is a text field as it came: base64 when the request says so.
func decodeText(v *string, b64 bool, field string) (string, error) {
	if v == nil {
		return "", nil
	}
	if !b64 {
		return *v, nil
	}
	data, err := base64.StdEncoding.DecodeString(strings.TrimSpace(*v))
	if err != nil {
		return "", fieldError(field, "is not valid base64: %v", err)
	}
	return string(data), nil
}

// prepare checks a submission and maps it onto our request.
func (s *server) prepare(ctx context.Context, in Input, b64 bool) (*submission, error) {
	sub := &submission{stored: stored{In: in, Base64: b64, LangID: ptrOr(in.LanguageID, 0), Runs: 1}}
	switch {
	case in.LanguageID == nil:
		return nil, fieldError("language_id", "can't be blank")
	case in.SourceCode == nil && in.AdditionalFiles == "":
		return nil, fieldError("source_code", "can't be blank")
	case in.CompilerOptions != "":
		return nil, fieldError("compiler_options", "setting compiler options is not supported by this server")
	case in.EnableNetwork && len(s.cfg.Judge0.Network) == 0:
		return nil, fieldError("enable_network", "network access is not allowed for Judge0 submissions on this server (its judge0.network is empty; use the native API's network allow-list)")
	case in.PerProcessTime != nil && *in.PerProcessTime, in.PerProcessMemory != nil && *in.PerProcessMemory:
		return nil, fieldError("enable_per_process_and_thread_time_limit", "per-process limits are not supported: the limits hold for the whole run")
	}
	l, ok := byID(*in.LanguageID)
	version, installed := "", false
	if ok {
		version, installed = s.resolve(l)
	}
	if !installed {
		return nil, fieldError("language_id", "language with id %d doesn't exist", *in.LanguageID)
	}
	sub.lang = l
	code, err := decodeText(in.SourceCode, b64, "source_code")
	if err != nil {
		return nil, err
	}
	stdin, err := decodeText(in.Stdin, b64, "stdin")
	if err != nil {
		return nil, err
	}
	if _, err := decodeText(in.ExpectedOutput, b64, "expected_output"); err != nil {
		return nil, err
	}
	if !utf8.ValidString(code) {
		return nil, fieldError("source_code", "is not UTF-8 text")
	}
	if in.Isolation != "" && in.Isolation != "native" && in.Isolation != "gvisor" {
		return nil, fieldError("isolation", "is %q: use native or gvisor", in.Isolation)
	}
	req := &wire.ExecuteRequest{Language: l.Ours, Version: version, Code: code, InputData: stdin, Isolation: in.Isolation}
	if in.EnableNetwork {
		// The server's configuration gives what Judge0 cannot name.
		req.Network = &wire.NetworkRequest{Allow: slices.Clone(s.cfg.Judge0.Network)}
		req.Secrets = slices.Clone(s.cfg.Judge0.Secrets)
	}
	if !utf8.ValidString(stdin) {
		req.InputData, req.InputDataEncoding = base64.StdEncoding.EncodeToString([]byte(stdin)), "base64"
	}
	if req.Args, err = splitArgs(in.CommandLineArguments); err != nil {
		return nil, fieldError("command_line_arguments", "%v", err)
	}
	if v := in.CPUTimeLimit; v != nil {
		if *v <= 0 {
			return nil, fieldError("cpu_time_limit", "must be greater than 0")
		}
		req.CPUTimeSeconds = *v + ptrOr(in.CPUExtraTime, 0)
	}
	if v := in.WallTimeLimit; v != nil {
		if *v <= 0 {
			return nil, fieldError("wall_time_limit", "must be greater than 0")
		}
		req.TimeoutSeconds = *v
	} else if req.CPUTimeSeconds > 0 {
		// Judge0's wall limit is above its CPU limit: the CPU limit ends a
		// busy program, not the wall clock.
		req.TimeoutSeconds = max(req.CPUTimeSeconds*2, req.CPUTimeSeconds+1)
	}
	if v := in.MemoryLimit; v != nil {
		if *v <= 0 {
			return nil, fieldError("memory_limit", "must be greater than 0")
		}
		req.MaxMemoryMB = int64(math.Ceil(*v / 1024))
	}
	if v := in.MaxFileSize; v != nil && *v > 0 {
		req.MaxFileSizeBytes = int64(*v * 1024)
	}
	if v := in.MaxProcesses; v != nil && *v > 0 {
		req.MaxProcesses = int(*v)
	}
	if n := in.NumberOfRuns; n != nil {
		if *n < 1 || *n > maxRuns {
			return nil, fieldError("number_of_runs", "must be between 1 and %d", maxRuns)
		}
		sub.Runs = *n
	}
	if in.AdditionalFiles != "" {
		if req.Files, err = unzip(in.AdditionalFiles); err != nil {
			return nil, fieldError("additional_files", "%v", err)
		}
		if in.SourceCode == nil {
			// Judge0 runs a multi-file program's "run" script: bash it.
			if _, ok := req.Files["run"]; !ok {
				return nil, fieldError("source_code", "can't be blank (or give a run script in additional_files)")
			}
		}
	}
	sub.req = req
	sub.CPUTime, sub.WallTime, sub.MemoryMB = req.CPUTimeSeconds, req.TimeoutSeconds, req.MaxMemoryMB
	sub.FileSize, sub.Processes = req.MaxFileSizeBytes, req.MaxProcesses
	req.CallbackURL = in.CallbackURL
	if err := s.svc.Prepare(ctx, req, runner.CallerOf(ctx).Tenant()); err != nil {
		switch {
		case errors.Is(err, runner.ErrCallbackURL):
			return nil, fieldError("callback_url", "%v", err)
		case in.EnableNetwork && errors.Is(err, runner.ErrSecretsRefused):
			// The secrets are the server's judge0.secrets: the key lacks one.
			return nil, fieldError("enable_network", "%v (a submission with enable_network uses this server's judge0.secrets, of the caller's key)", err)
		}
		return nil, fieldError("submission", "%v", err)
	}
	return sub, nil
}

func ptrOr[T any](p *T, def T) T {
	if p == nil {
		return def
	}
	return *p
}

// splitArgs splits a command line as a shell would (quotes, no
// expansions).
func splitArgs(s string) ([]string, error) {
	var args []string
	var cur strings.Builder
	in, quote, esc := false, rune(0), false
	for _, c := range s {
		switch {
		case esc:
			cur.WriteRune(c)
			esc = false
		case c == '\\' && quote != '\'':
			esc, in = true, true
		case quote != 0:
			if c == quote {
				quote = 0
			} else {
				cur.WriteRune(c)
			}
		case c == '\'' || c == '"':
			quote, in = c, true
		case c == ' ' || c == '\t' || c == '\n':
			if in {
				args = append(args, cur.String())
				cur.Reset()
				in = false
			}
		default:
			cur.WriteRune(c)
			in = true
		}
	}
	if quote != 0 || esc {
		return nil, errors.New("unterminated quote or escape")
	}
	if in {
		args = append(args, cur.String())
	}
	return args, nil
}

// unzip reads a base64 zip of additional files, bounded.
func unzip(b64 string) (map[string]wire.FileData, error) {
	data, err := base64.StdEncoding.DecodeString(strings.TrimSpace(b64))
	if err != nil {
		return nil, fmt.Errorf("not valid base64: %v", err)
	}
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return nil, fmt.Errorf("not a zip archive: %v", err)
	}
	files := map[string]wire.FileData{}
	var total int64
	for _, f := range zr.File {
		if f.FileInfo().IsDir() {
			continue
		}
		name := path.Clean(strings.TrimPrefix(f.Name, "/"))
		if name == "." || strings.HasPrefix(name, "../") || name == ".." {
			return nil, fmt.Errorf("entry %q leaves the work directory", f.Name)
		}
		rc, err := f.Open()
		if err != nil {
			return nil, err
		}
		b, err := io.ReadAll(io.LimitReader(rc, maxExtract-total+1))
		rc.Close()
		if err != nil {
			return nil, err
		}
		if total += int64(len(b)); total > maxExtract {
			return nil, fmt.Errorf("more than %d bytes extracted", maxExtract)
		}
		files[name] = wire.FileData(b)
	}
	return files, nil
}

// verdict is Judge0's status of a finished run, and its message.
func verdict(sub *submission, res *wire.Result) (int, string) {
	switch res.Status {
	case wire.StatusCompileError:
		return 6, ""
	case wire.StatusTimeout:
		return 5, "Time limit exceeded (" + res.LimitReason + ")"
	case wire.StatusSetupError:
		return 13, res.Error
	case wire.StatusRuntimeError:
		switch {
		case res.Signal == "SIGSEGV":
			return 7, ""
		case res.Signal == "SIGXFSZ" || res.LimitReason == "file_size":
			return 8, ""
		case res.Signal == "SIGFPE":
			return 9, ""
		case res.Signal == "SIGABRT":
			return 10, ""
		case res.Signal != "":
			msg := "killed by " + res.Signal
			if res.LimitReason != "" {
				msg = res.LimitReason + " limit exceeded"
			}
			return 12, msg
		case res.LimitReason != "":
			return 12, res.LimitReason + " limit exceeded"
		}
		return 11, fmt.Sprintf("Exited with error status %d", res.ExitCode)
	}
	if sub.In.ExpectedOutput != nil {
		want, _ := decodeText(sub.In.ExpectedOutput, sub.Base64, "")
		if strings.TrimRight(output(res.Stdout, res.StdoutEncoding), " \t\r\n") != strings.TrimRight(want, " \t\r\n") {
			return 4, ""
		}
	}
	return 3, ""
}

// output is a stream's bytes as a string.
func output(s, encoding string) string {
	if encoding == "base64" {
		if b, err := base64.StdEncoding.DecodeString(s); err == nil {
			return string(b)
		}
	}
	return s
}

// fieldNames are every field a submission answers with fields=*.
var fieldNames = []string{"source_code", "language_id", "stdin", "expected_output", "stdout", "status_id", "created_at",
	"finished_at", "time", "memory", "stderr", "token", "number_of_runs", "cpu_time_limit", "cpu_extra_time",
	"wall_time_limit", "memory_limit", "stack_limit", "max_processes_and_or_threads",
	"enable_per_process_and_thread_time_limit", "enable_per_process_and_thread_memory_limit", "max_file_size",
	"compile_output", "exit_code", "exit_signal", "message", "wall_time", "compiler_options", "command_line_arguments",
	"redirect_stderr_to_stdout", "callback_url", "additional_files", "enable_network", "status", "language"}

// defaultFields are those answered without fields=.
var defaultFields = []string{"token", "stdout", "time", "memory", "stderr", "compile_output", "message", "status"}

// view is sub as Judge0 answers it, with fields (nil: the default), text
// fields base64 when b64. errUTF8 when a text field cannot go as text.
func (s *server) view(sub *submission, fields []string, b64 bool) (map[string]any, error) {
	if len(fields) == 0 {
		fields = defaultFields
	}
	if len(fields) == 1 && fields[0] == "*" {
		fields = fieldNames
	}
	var badUTF8 bool
	text := func(v string, set bool) any {
		if !set {
			return nil
		}
		if b64 {
			return base64.StdEncoding.EncodeToString([]byte(v))
		}
		if !utf8.ValidString(v) {
			badUTF8 = true
		}
		return v
	}
	in := sub.In
	raw := func(p *string, field string) (string, bool) {
		if p == nil {
			return "", false
		}
		v, _ := decodeText(p, sub.Base64, field)
		return v, true
	}
	res := sub.res
	out := map[string]any{}
	for _, f := range fields {
		var v any
		switch f {
		case "token":
			v = sub.token
		case "source_code":
			v = text(raw(in.SourceCode, f))
		case "stdin":
			v = text(raw(in.Stdin, f))
		case "expected_output":
			v = text(raw(in.ExpectedOutput, f))
		case "language_id":
			v = sub.lang.ID
		case "language":
			version, _ := s.resolve(sub.lang)
			v = map[string]any{"id": sub.lang.ID, "name": nameOf(sub.lang, version)}
		case "status_id":
			v = sub.statusID
		case "status":
			v = status(sub.statusID)
		case "created_at":
			v = judge0Time(sub.created)
		case "finished_at":
			if !sub.finished.IsZero() {
				v = judge0Time(sub.finished)
			}
		case "stdout", "stderr", "compile_output", "exit_code", "exit_signal":
			v = resultField(res, f, sub.In.RedirectStderrToStdout, text)
		case "time":
			if ran(res) {
				v = fmt.Sprintf("%.3f", res.CPUTimeMs/1000)
			}
		case "wall_time":
			if ran(res) {
				v = fmt.Sprintf("%.3f", res.DurationMs/1000)
			}
		case "memory":
			if ran(res) {
				v = int64(math.Round(res.MemoryUsedMB * 1024))
			}
		case "message":
			if sub.message != "" {
				v = text(sub.message, true)
			}
		case "number_of_runs":
			v = sub.Runs
		case "cpu_time_limit":
			v = num(sub.CPUTime)
		case "wall_time_limit":
			v = num(sub.WallTime)
		case "memory_limit":
			v = num(float64(sub.MemoryMB * 1024))
		case "max_file_size":
			v = num(float64(sub.FileSize / 1024))
		case "max_processes_and_or_threads":
			v = num(float64(sub.Processes))
		case "cpu_extra_time", "stack_limit":
			v = nil
		case "enable_per_process_and_thread_time_limit", "enable_per_process_and_thread_memory_limit":
			v = false
		case "enable_network":
			v = in.EnableNetwork
		case "compiler_options":
			v = nil
		case "command_line_arguments":
			v = nilIfEmpty(in.CommandLineArguments)
		case "redirect_stderr_to_stdout":
			v = in.RedirectStderrToStdout
		case "callback_url":
			v = nilIfEmpty(in.CallbackURL)
		case "additional_files":
			v = nilIfEmpty(in.AdditionalFiles)
		default:
			continue // Judge0 ignores fields it does not know
		}
		out[f] = v
	}
	if badUTF8 {
		return nil, errUTF8
	}
	return out, nil
}

// ran says whether the program ran: not when its compile failed or its
// sandbox could not be set up (Judge0 answers null time and memory then).
func ran(res *wire.Result) bool {
	return res != nil && res.Status != wire.StatusCompileError && res.Status != wire.StatusSetupError
}

var errUTF8 = errors.New("some attributes for this submission cannot be converted to UTF-8, use base64_encoded=true query parameter")

func num(v float64) any {
	if v == 0 {
		return nil
	}
	return v
}

func nilIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// resultField is one of a run's outputs as Judge0 names it.
func resultField(res *wire.Result, f string, redirect bool, text func(string, bool) any) any {
	if res == nil {
		return nil
	}
	stdout, stderr := output(res.Stdout, res.StdoutEncoding), output(res.Stderr, res.StderrEncoding)
	if redirect {
		stdout, stderr = stdout+stderr, ""
	}
	switch f {
	case "stdout":
		if res.Status == wire.StatusCompileError {
			return nil
		}
		return text(stdout, stdout != "")
	case "stderr":
		if res.Status == wire.StatusCompileError {
			return nil
		}
		return text(stderr, stderr != "")
	case "compile_output":
		if c := res.Compile; c != nil {
			co := output(c.Stdout, c.StdoutEncoding) + output(c.Stderr, c.StderrEncoding)
			return text(co, co != "")
		}
		return nil
	case "exit_code":
		if res.Signal == "" && res.Status != wire.StatusCompileError {
			return res.ExitCode
		}
		return nil
	case "exit_signal":
		if res.Signal != "" {
			return signalNumber(res.Signal)
		}
	}
	return nil
}

// signalNumber is a signal's number (Linux x86-64 and arm64 alike for
// these).
func signalNumber(name string) int {
	for n, s := range []string{"", "SIGHUP", "SIGINT", "SIGQUIT", "SIGILL", "SIGTRAP", "SIGABRT", "SIGBUS", "SIGFPE",
		"SIGKILL", "SIGUSR1", "SIGSEGV", "SIGUSR2", "SIGPIPE", "SIGALRM", "SIGTERM", "SIGSTKFLT", "SIGCHLD", "SIGCONT",
		"SIGSTOP", "SIGTSTP", "SIGTTIN", "SIGTTOU", "SIGURG", "SIGXCPU", "SIGXFSZ"} {
		if s == name {
			return n
		}
	}
	return 0
}

// fieldsParam is the fields= query.
func fieldsParam(r *http.Request) []string {
	v := strings.TrimSpace(r.URL.Query().Get("fields"))
	if v == "" {
		return nil
	}
	var out []string
	for _, f := range strings.Split(v, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// decodeInput reads a request's body into v: JSON, or, where Judge0 (Rails)
// takes one and form is set, a form (application/x-www-form-urlencoded,
// its values strings as in JSON sent by a form: Input takes both).
func (s *server) decodeInput(w http.ResponseWriter, r *http.Request, v any, form bool) bool {
	body := http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes)
	var err error
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt == "application/x-www-form-urlencoded" {
		if !form {
			writeJSON(w, http.StatusUnsupportedMediaType, map[string]string{"error": "a batch is sent as JSON: {\"submissions\": [...]}"})
			return false
		}
		err = decodeForm(body, v)
	} else {
		err = json.NewDecoder(body).Decode(v)
	}
	var e errors422
	switch {
	case errors.As(err, &e):
		writeJSON(w, http.StatusUnprocessableEntity, e)
		return false
	case err != nil:
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "invalid body: " + err.Error()})
		return false
	}
	return true
}

// decodeForm reads a form body into v as the JSON object of its fields
// (the first value of each).
func decodeForm(body io.Reader, v any) error {
	data, err := io.ReadAll(body)
	if err != nil {
		return err
	}
	values, err := url.ParseQuery(string(data))
	if err != nil {
		return fmt.Errorf("form: %v", err)
	}
	obj := map[string]string{}
	for k, vs := range values {
		obj[k] = vs[0]
	}
	data, _ = json.Marshal(obj)
	return json.Unmarshal(data, v)
}

// Judge0's numeric and boolean fields, which clients also send as strings
// ("71", "2.5", "true": form-driven frontends, Rails casting them).
var (
	intFields   = []string{"language_id", "max_processes_and_or_threads", "number_of_runs"}
	floatFields = []string{"cpu_time_limit", "cpu_extra_time", "wall_time_limit", "memory_limit", "stack_limit", "max_file_size"}
	boolFields  = []string{"enable_per_process_and_thread_time_limit", "enable_per_process_and_thread_memory_limit",
		"redirect_stderr_to_stdout", "enable_network"}
)

// UnmarshalJSON reads a submission as Judge0 does: a number may come as a
// string ("71", " 2.5 "; "" is no value), an integer as a whole float
// (71.0), a flag as "true"/"false"/"1"/"0" or null. A value that is none of
// these is a 422 naming the field.
func (in *Input) UnmarshalJSON(data []byte) error {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return err
	}
	for name, v := range raw {
		isInt, isFloat, isBool := slices.Contains(intFields, name), slices.Contains(floatFields, name), slices.Contains(boolFields, name)
		if !isInt && !isFloat && !isBool {
			continue
		}
		var str string
		if json.Unmarshal(v, &str) == nil {
			str = strings.TrimSpace(str)
		} else {
			str = string(bytes.TrimSpace(v)) // a number, true, false, null
		}
		switch {
		case str == "" || str == "null":
			raw[name] = json.RawMessage("null")
		case isBool:
			b, err := strconv.ParseBool(str)
			if err != nil {
				return fieldError(name, "is not a boolean: %.40q", str)
			}
			raw[name] = json.RawMessage(strconv.FormatBool(b))
		default:
			f, err := strconv.ParseFloat(str, 64)
			if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
				return fieldError(name, "is not a number: %.40q", str)
			}
			if isInt && f != math.Trunc(f) {
				return fieldError(name, "is not an integer: %.40q", str)
			}
			raw[name] = json.RawMessage(strconv.FormatFloat(f, 'f', -1, 64))
		}
	}
	if v, ok := raw["language_id"]; ok && string(v) != "null" {
		// Within int: a huge id is no language, not a decoding error.
		if f, _ := strconv.ParseFloat(string(v), 64); math.Abs(f) > math.MaxInt32 {
			return fieldError("language_id", "language with id %s doesn't exist", v)
		}
	}
	type plain Input
	data, _ = json.Marshal(raw)
	var out plain
	if err := json.Unmarshal(data, &out); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return fieldError(te.Field, "must be a %s, not a JSON %s", te.Type, te.Value)
		}
		return err
	}
	*in = Input(out)
	return nil
}

// kind names Judge0's jobs in the job store.
const kind = "judge0"

// submit stores sub (admitted and prepared) as a job of the caller's;
// the job store runs it on the pool every transport shares, keeps its
// result under the key's quotas and sends its callback (setKind).
func (s *server) submit(ctx context.Context, sub *submission) error {
	js := s.svc.Jobs()
	if js == nil {
		return &runner.Error{Kind: runner.Busy, Msg: "this server keeps no submissions"}
	}
	meta, err := json.Marshal(sub.stored)
	if err != nil {
		return err
	}
	st, err := js.SubmitWith(ctx, runner.CallerOf(ctx).Tenant(), sub.req.Language, sub.req, jobs.Options{Kind: kind, Meta: meta, Runs: sub.Runs})
	if err != nil {
		return err
	}
	sub.token = st.ExecutionID
	s.stats.created(sub.LangID, time.Now())
	return nil
}

// setKind makes the job store send Judge0 submissions' callbacks as Judge0
// does: a PUT of the whole submission.
func (s *server) setKind() {
	ks, ok := s.svc.Jobs().(runner.KindSetter)
	if !ok {
		return
	}
	ks.SetKind(kind, jobs.KindHooks{Notifier: runner.Notifier(s.hooks), Body: func(rec *jobs.Record) []byte {
		sub, err := fromJob(jobs.Answer{Done: rec.Done(), Record: rec})
		if err != nil {
			return nil
		}
		body, err := s.view(sub, fieldNames, sub.Base64)
		if err != nil {
			body = map[string]any{"token": rec.ID, "error": err.Error()}
		}
		data, _ := json.Marshal(body)
		return data
	}})
}

// lookup finds owner's submission token, waiting up to wait for it to be
// over; nil when there is none (another key's, expired).
func (s *server) lookup(ctx context.Context, token string, wait time.Duration) (*submission, error) {
	js := s.svc.Jobs()
	if js == nil {
		return nil, nil
	}
	a, err := js.Get(ctx, token, runner.CallerOf(ctx).Tenant(), wait)
	switch {
	case errors.Is(err, jobs.ErrNotFound):
		return nil, nil
	case err != nil:
		return nil, err
	case a.Record == nil || a.Record.Kind != kind:
		return nil, nil // a native job's id: not a submission
	}
	sub, err := fromJob(a)
	if err == nil && sub.statusID >= 3 {
		s.stats.finished(sub.token, sub.statusID)
	}
	return sub, err
}

// fromJob is the submission a job of Judge0's holds, as it now is.
func fromJob(a jobs.Answer) (*submission, error) {
	rec := a.Record
	sub := &submission{token: rec.ID, created: rec.CreatedAt}
	if err := json.Unmarshal(rec.Meta, &sub.stored); err != nil {
		return nil, fmt.Errorf("submission %s is unreadable: %v", rec.ID, err)
	}
	sub.lang, _ = byID(sub.LangID)
	switch {
	case !a.Done && rec.StateName() == "running":
		sub.statusID = 2
	case !a.Done:
		sub.statusID = 1
	default:
		var res wire.Result
		if err := json.Unmarshal(rec.Result, &res); err != nil {
			sub.statusID, sub.message = 13, "the stored result is unreadable: "+err.Error()
			break
		}
		sub.res, sub.finished = &res, rec.FinishedAt
		sub.statusID, sub.message = verdict(sub, &res)
	}
	return sub, nil
}

func (s *server) create(w http.ResponseWriter, r *http.Request) {
	var in Input
	if !s.decodeInput(w, r, &in, true) {
		return
	}
	wait := boolParam(r, "wait", false)
	leave, err := s.svc.Admit(runner.CallerOf(r.Context()), 1, wait)
	if err != nil {
		s.refuse(w, err)
		return
	}
	defer leave()
	b64 := boolParam(r, "base64_encoded", false)
	sub, err := s.prepare(r.Context(), in, b64)
	if err == nil {
		err = s.submit(r.Context(), sub)
	}
	if err != nil {
		s.refuse(w, err)
		return
	}
	if !wait {
		writeJSON(w, http.StatusCreated, map[string]string{"token": sub.token})
		return
	}
	// wait=true: the answer waits for the job (as long as the client does).
	for {
		done, err := s.lookup(r.Context(), sub.token, time.Minute)
		switch {
		case r.Context().Err() != nil:
			return
		case err != nil:
			s.refuse(w, err)
			return
		case done == nil:
			writeJSON(w, http.StatusNotFound, map[string]string{"error": "Not found"})
			return
		case done.statusID < 3:
			if s.svc.Draining() {
				writeJSON(w, http.StatusCreated, map[string]string{"token": sub.token})
				return
			}
			continue
		}
		v, err := s.view(done, fieldsParam(r), b64)
		if err != nil {
			writeJSON(w, http.StatusCreated, map[string]any{"token": sub.token, "error": err.Error()})
			return
		}
		writeJSON(w, http.StatusCreated, v)
		return
	}
}

func (s *server) get(w http.ResponseWriter, r *http.Request) {
	sub, err := s.lookup(r.Context(), r.PathValue("token"), 0)
	if err != nil {
		s.refuse(w, err)
		return
	}
	if sub == nil {
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "Not found"})
		return
	}
	v, err := s.view(sub, fieldsParam(r), boolParam(r, "base64_encoded", false))
	if err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
		return
	}
	writeJSON(w, http.StatusOK, v)
}

func (s *server) createBatch(w http.ResponseWriter, r *http.Request) {
	var in struct {
		Submissions []Input `json:"submissions"`
	}
	if !s.decodeInput(w, r, &in, false) {
		return
	}
	if len(in.Submissions) == 0 || len(in.Submissions) > maxBatch {
		writeJSON(w, http.StatusUnprocessableEntity, map[string]string{"error": fmt.Sprintf("number of submissions in a batch should be between 1 and %d", maxBatch)})
		return
	}
	// A batch of N is N runs for the key's rate.
	if _, err := s.svc.Admit(runner.CallerOf(r.Context()), len(in.Submissions), false); err != nil {
		s.refuse(w, err)
		return
	}
	b64 := boolParam(r, "base64_encoded", false)
	out := make([]any, len(in.Submissions))
	for i, x := range in.Submissions {
		sub, err := s.prepare(r.Context(), x, b64)
		if err == nil {
			err = s.submit(r.Context(), sub)
		}
		var e errors422
		switch {
		case err == nil:
			out[i] = map[string]string{"token": sub.token}
		case errors.As(err, &e):
			out[i] = e
		default:
			status, msg, _ := refusal(err)
			out[i] = map[string]any{"error": msg, "status": status}
		}
	}
	writeJSON(w, http.StatusCreated, out)
}

func (s *server) getBatch(w http.ResponseWriter, r *http.Request) {
	tokens := strings.Split(r.URL.Query().Get("tokens"), ",")
	if len(tokens) == 0 || tokens[0] == "" || len(tokens) > maxBatch {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": fmt.Sprintf("give between 1 and %d tokens: ?tokens=a,b,c", maxBatch)})
		return
	}
	fields, b64 := fieldsParam(r), boolParam(r, "base64_encoded", false)
	out := make([]any, len(tokens))
	for i, t := range tokens {
		sub, err := s.lookup(r.Context(), strings.TrimSpace(t), 0)
		if err != nil {
			s.refuse(w, err)
			return
		}
		if sub != nil {
			v, err := s.view(sub, fields, b64)
			if err != nil {
				out[i] = map[string]string{"token": sub.token, "error": err.Error()}
				continue
			}
			out[i] = v
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"submissions": out})
}

// refusal is the HTTP status, message and Retry-After of a submission the
// door or the job store did not take: the one error kind, said once.
func refusal(err error) (int, string, time.Duration) {
	var re *runner.Error
	switch {
	case errors.As(err, &re):
		switch status := re.Kind.HTTPStatus(); status {
		case http.StatusBadRequest:
			return http.StatusUnprocessableEntity, re.Msg, 0 // as Judge0 answers a bad field
		case http.StatusTooManyRequests, http.StatusServiceUnavailable:
			return status, re.Msg, max(re.RetryAfter, time.Second)
		default:
			return status, re.Msg, 0
		}
	}
	return http.StatusInternalServerError, err.Error(), 0
}

// refuse answers a submission that is not taken.
func (s *server) refuse(w http.ResponseWriter, err error) {
	var e errors422
	if errors.As(err, &e) {
		writeJSON(w, http.StatusUnprocessableEntity, e)
		return
	}
	status, msg, retry := refusal(err)
	if retry > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(retry.Seconds()))))
	}
	writeJSON(w, status, map[string]string{"error": msg})
}
