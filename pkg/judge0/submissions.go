package judge0

import (
	"archive/zip"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"path"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/sandbox-run/sandbox-run/pkg/api"
	"github.com/sandbox-run/sandbox-run/pkg/executor"
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
}

// submission is a submission as kept: what came, what it came to.
type submission struct {
	token, owner string
	base64       bool // its input came base64 (callbacks answer alike)
	in           Input
	lang         lang
	req          *wire.ExecuteRequest
	runs         int

	// Filled as it goes (guarded by server.mu).
	statusID   int
	created    time.Time
	finished   time.Time
	res        *executor.Result
	time, wall float64 // seconds, averaged over the runs
	memory     float64 // KB, averaged
	message    string
	done       chan struct{} // closed when over
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
func (s *server) prepare(in Input, b64 bool) (*submission, error) {
	sub := &submission{in: in, base64: b64, runs: 1}
	switch {
	case in.LanguageID == nil:
		return nil, fieldError("language_id", "can't be blank")
	case in.SourceCode == nil && in.AdditionalFiles == "":
		return nil, fieldError("source_code", "can't be blank")
	case in.CompilerOptions != "":
		return nil, fieldError("compiler_options", "setting compiler options is not supported by this server")
	case in.EnableNetwork:
		return nil, fieldError("enable_network", "network access is not allowed for Judge0 submissions on this server (use the native API's network allow-list)")
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
	req := &wire.ExecuteRequest{Language: l.Ours, Version: version, Code: code, InputData: stdin}
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
		sub.runs = *n
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
	if err := runner.Check(req, &s.cfg); err != nil {
		return nil, fieldError("submission", "%v", err)
	}
	if err := s.svc.CheckLanguage(req); err != nil {
		return nil, fieldError("language_id", "%v", err)
	}
	if err := s.svc.Validate(req); err != nil {
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

// newToken is a Judge0-looking token (a random UUID).
func newToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6], b[8] = b[6]&0x0f|0x40, b[8]&0x3f|0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// run runs sub (number_of_runs times) and records the outcome.
func (s *server) run(ctx context.Context, sub *submission) {
	s.setStatus(sub, 2)
	var last *executor.Result
	var cpu, wall, mem float64
	var err error
	for i := 0; i < sub.runs; i++ {
		last, err = s.runOnce(ctx, sub)
		if err != nil {
			break
		}
		cpu, wall, mem = cpu+last.CPUTimeMs/1000, wall+last.DurationMs/1000, mem+last.MemoryUsedMB*1024
		if last.Status == executor.StatusCompileError || last.Status == executor.StatusSetupError {
			break
		}
	}
	n := float64(sub.runs)
	s.mu.Lock()
	defer s.mu.Unlock()
	sub.finished = time.Now().UTC()
	if err != nil {
		sub.statusID, sub.message = 13, err.Error()
	} else {
		sub.res, sub.time, sub.wall, sub.memory = last, cpu/n, wall/n, mem/n
		sub.statusID, sub.message = verdict(sub, last)
	}
	close(sub.done)
}

// runOnce runs sub's request once through the run service, waiting for
// room when the pool is full.
func (s *server) runOnce(ctx context.Context, sub *submission) (*executor.Result, error) {
	for wait := 50 * time.Millisecond; ; wait = min(2*wait, 2*time.Second) {
		req := *sub.req
		res, err := s.svc.Run(ctx, runner.Run{Request: runner.ToExecutor(&req), Wire: &req, Tenant: sub.owner, Via: "judge0"})
		if !runner.KindOf(err).Retryable() {
			return res, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(wait):
		}
	}
}

func (s *server) setStatus(sub *submission, id int) {
	s.mu.Lock()
	sub.statusID = id
	s.mu.Unlock()
}

// verdict is Judge0's status of a finished run, and its message.
func verdict(sub *submission, res *executor.Result) (int, string) {
	switch res.Status {
	case executor.StatusCompileError:
		return 6, ""
	case executor.StatusTimeout:
		return 5, "Time limit exceeded (" + res.LimitReason + ")"
	case executor.StatusSetupError:
		return 13, res.Error
	case executor.StatusRuntimeError:
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
	if sub.in.ExpectedOutput != nil {
		want, _ := decodeText(sub.in.ExpectedOutput, sub.base64, "")
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
	s.mu.Lock()
	defer s.mu.Unlock()
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
	in := sub.in
	raw := func(p *string, field string) (string, bool) {
		if p == nil {
			return "", false
		}
		v, _ := decodeText(p, sub.base64, field)
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
			v = sub.created.Format(time.RFC3339Nano)
		case "finished_at":
			if !sub.finished.IsZero() {
				v = sub.finished.Format(time.RFC3339Nano)
			}
		case "stdout", "stderr", "compile_output", "exit_code", "exit_signal":
			v = resultField(res, f, sub.in.RedirectStderrToStdout, text)
		case "time":
			if res != nil {
				v = fmt.Sprintf("%.3f", sub.time)
			}
		case "wall_time":
			if res != nil {
				v = fmt.Sprintf("%.3f", sub.wall)
			}
		case "memory":
			if res != nil {
				v = int64(math.Round(sub.memory))
			}
		case "message":
			if sub.message != "" {
				v = text(sub.message, true)
			}
		case "number_of_runs":
			v = sub.runs
		case "cpu_time_limit":
			v = num(sub.req.CPUTimeSeconds)
		case "wall_time_limit":
			v = num(sub.req.TimeoutSeconds)
		case "memory_limit":
			v = num(float64(sub.req.MaxMemoryMB * 1024))
		case "max_file_size":
			v = num(float64(sub.req.MaxFileSizeBytes / 1024))
		case "max_processes_and_or_threads":
			v = num(float64(sub.req.MaxProcesses))
		case "cpu_extra_time", "stack_limit":
			v = nil
		case "enable_per_process_and_thread_time_limit", "enable_per_process_and_thread_memory_limit", "enable_network":
			v = false
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
func resultField(res *executor.Result, f string, redirect bool, text func(string, bool) any) any {
	if res == nil {
		return nil
	}
	stdout, stderr := output(res.Stdout, res.StdoutEncoding), output(res.Stderr, res.StderrEncoding)
	if redirect {
		stdout, stderr = stdout+stderr, ""
	}
	switch f {
	case "stdout":
		if res.Status == executor.StatusCompileError {
			return nil
		}
		return text(stdout, stdout != "")
	case "stderr":
		if res.Status == executor.StatusCompileError {
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
		if res.Signal == "" && res.Status != executor.StatusCompileError {
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

// decodeInput reads one submission's body.
func (s *server) decodeInput(w http.ResponseWriter, r *http.Request, v any) bool {
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes)).Decode(v); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "invalid JSON body: " + err.Error()})
		return false
	}
	return true
}

// submit stores sub and starts it; false (and an answer written) when
// the server has no room for it.
func (s *server) submit(r *http.Request, sub *submission) error {
	if sub.in.CallbackURL != "" {
		if err := s.hooks.CheckURL(r.Context(), sub.in.CallbackURL); err != nil {
			return fieldError("callback_url", "%v", err)
		}
	}
	sub.token, sub.owner, sub.statusID, sub.created, sub.done = newToken(), api.KeyID(r), 1, time.Now().UTC(), make(chan struct{})
	s.mu.Lock()
	s.expireLocked()
	pending := 0
	for _, x := range s.subs {
		if x.finished.IsZero() {
			pending++
		}
	}
	// As many as the native API's async queue, and one per worker.
	if pending >= s.cfg.AsyncQueue+s.cfg.Workers {
		s.mu.Unlock()
		return errFull
	}
	s.subs[sub.token] = sub
	s.order = append(s.order, sub.token)
	s.mu.Unlock()
	go func() {
		s.busy <- struct{}{}
		defer func() { <-s.busy }()
		s.run(context.Background(), sub)
		if sub.in.CallbackURL != "" {
			s.callback(sub)
		}
	}()
	return nil
}

// maxStored bounds the finished submissions kept beside those queued.
const maxStored = 10000

var errFull = errors.New("the queue is full: retry later")

// expireLocked forgets finished submissions older than result_ttl_seconds,
// and the oldest finished ones past maxStored; never one still to run.
func (s *server) expireLocked() {
	ttl := seconds(s.cfg.ResultTTLSeconds)
	excess := len(s.order) - maxStored
	kept := s.order[:0]
	for _, tok := range s.order {
		sub := s.subs[tok]
		if sub == nil {
			continue
		}
		if !sub.finished.IsZero() && (time.Since(sub.finished) >= ttl || excess > 0) {
			delete(s.subs, tok)
			excess--
			continue
		}
		kept = append(kept, tok)
	}
	s.order = kept
}

// callback PUTs the finished submission to its callback_url, as Judge0
// does.
func (s *server) callback(sub *submission) {
	body, err := s.view(sub, fieldNames, sub.base64)
	if err != nil {
		return
	}
	data, _ := json.Marshal(body)
	if _, err := s.hooks.Deliver(context.Background(), sub.in.CallbackURL, sub.token, data, nil); err != nil {
		s.log.Warn("judge0: callback failed", "token", sub.token, "error", err)
	}
}

// lookup finds owner's submission token.
func (s *server) lookup(token, owner string) *submission {
	s.mu.Lock()
	defer s.mu.Unlock()
	sub := s.subs[token]
	if sub == nil || sub.owner != owner {
		return nil
	}
	return sub
}

func (s *server) create(w http.ResponseWriter, r *http.Request) {
	var in Input
	if !s.decodeInput(w, r, &in) {
		return
	}
	b64 := boolParam(r, "base64_encoded", false)
	sub, err := s.prepare(in, b64)
	if err == nil {
		err = s.submit(r, sub)
	}
	if err != nil {
		s.refuse(w, err)
		return
	}
	if !boolParam(r, "wait", false) {
		writeJSON(w, http.StatusCreated, map[string]string{"token": sub.token})
		return
	}
	select {
	case <-sub.done:
	case <-r.Context().Done():
		return
	}
	v, err := s.view(sub, fieldsParam(r), b64)
	if err != nil {
		writeJSON(w, http.StatusCreated, map[string]any{"token": sub.token, "error": err.Error()})
		return
	}
	writeJSON(w, http.StatusCreated, v)
}

func (s *server) get(w http.ResponseWriter, r *http.Request) {
	sub := s.lookup(r.PathValue("token"), api.KeyID(r))
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
	if !s.decodeInput(w, r, &in) {
		return
	}
	if len(in.Submissions) == 0 || len(in.Submissions) > maxBatch {
		writeJSON(w, http.StatusUnprocessableEntity, map[string]string{"error": fmt.Sprintf("number of submissions in a batch should be between 1 and %d", maxBatch)})
		return
	}
	b64 := boolParam(r, "base64_encoded", false)
	out := make([]any, len(in.Submissions))
	for i, x := range in.Submissions {
		sub, err := s.prepare(x, b64)
		if err == nil {
			err = s.submit(r, sub)
		}
		var e errors422
		switch {
		case err == nil:
			out[i] = map[string]string{"token": sub.token}
		case errors.As(err, &e):
			out[i] = e
		default:
			out[i] = map[string]string{"error": err.Error()}
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
	owner, fields, b64 := api.KeyID(r), fieldsParam(r), boolParam(r, "base64_encoded", false)
	out := make([]any, len(tokens))
	for i, t := range tokens {
		if sub := s.lookup(strings.TrimSpace(t), owner); sub != nil {
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

// refuse answers a submission that is not taken.
func (s *server) refuse(w http.ResponseWriter, err error) {
	var e errors422
	switch {
	case errors.As(err, &e):
		writeJSON(w, http.StatusUnprocessableEntity, e)
	case errors.Is(err, errFull):
		w.Header().Set("Retry-After", "1")
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": err.Error()})
	default:
		writeJSON(w, http.StatusInternalServerError, map[string]string{"error": err.Error()})
	}
}
