// Package piston serves Piston v2's API under /piston, so that Piston's
// clients run on sandbox-run unchanged (a client's base URL
// http://host:8080/piston): GET /piston/api/v2/runtimes, POST
// /piston/api/v2/execute and the interactive WebSocket
// /piston/api/v2/connect. It is a transport: every run goes through the
// API server's run service, behind its keys, limits, metrics and logs.
package piston

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/sandbox-run/sandbox-run/pkg/config"
	"github.com/sandbox-run/sandbox-run/pkg/runner"
	"github.com/sandbox-run/sandbox-run/pkg/wire"
)

// Prefix is where the API is served.
const Prefix = "/piston/"

type server struct {
	cfg config.Config
	svc *runner.Service
	log *slog.Logger
	mux *http.ServeMux
}

// New serves Piston v2's API at Prefix through svc: every run passes svc's
// door (origin, content, the key's rate and concurrency) and pool.
func New(cfg config.Config, svc *runner.Service, log *slog.Logger) http.Handler {
	s := &server{cfg: cfg, svc: svc, log: log, mux: http.NewServeMux()}
	s.mux.HandleFunc("GET "+Prefix+"api/v2/runtimes", s.runtimes)
	s.mux.HandleFunc("POST "+Prefix+"api/v2/execute", s.execute)
	s.mux.HandleFunc("GET "+Prefix+"api/v2/connect", s.connect)
	s.mux.HandleFunc(Prefix, func(w http.ResponseWriter, r *http.Request) {
		writeMessage(w, http.StatusNotFound, "Not found: "+r.Method+" "+r.URL.Path+" (this server speaks Piston's API v2: /api/v2/runtimes, /api/v2/execute, /api/v2/connect)")
	})
	return s
}

func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// Refuse answers a request the server refused before it reached the
// transport (a missing or wrong API key) in Piston's shape: its clients
// read "message" (piston-api-client takes a body without one for a run).
func (s *server) Refuse(w http.ResponseWriter, status int, msg string) {
	writeMessage(w, status, msg)
}

// Runtime is one entry of GET /api/v2/runtimes.
type Runtime struct {
	Language string   `json:"language"`
	Version  string   `json:"version"`
	Aliases  []string `json:"aliases"`
	Runtime  string   `json:"runtime,omitempty"`
}

func (s *server) runtimes(w http.ResponseWriter, r *http.Request) {
	out := []Runtime{}
	for _, l := range s.svc.Languages() {
		for _, v := range l.Versions {
			aliases := append([]string{}, v.Aliases...)
			for _, a := range pistonAliases[l.Name] {
				if a != pistonName(l.Name) && !slices.Contains(aliases, a) {
					aliases = append(aliases, a)
				}
			}
			out = append(out, Runtime{Language: pistonName(l.Name), Version: semver(v.Version), Aliases: aliases})
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// pistonName is Piston's name of a language where it differs from ours.
func pistonName(name string) string {
	switch name {
	case "cpp":
		return "c++"
	}
	return name
}

// pistonAliases are the aliases Piston's runtime packages give each
// language (its packages/*/metadata.json), by our name of the language:
// clients and their READMEs use them ("node-js", "py3").
var pistonAliases = map[string][]string{
	"bash":       {"sh"},
	"c":          {"gcc"},
	"cpp":        {"c++", "cpp", "g++"},
	"csharp":     {"mono", "mono-csharp", "mono-c#", "mono-cs", "c#", "cs"},
	"go":         {"go", "golang"},
	"haskell":    {"haskell", "hs"},
	"java":       {},
	"javascript": {"node-javascript", "node-js", "javascript", "js", "node", "nodejs"},
	"kotlin":     {"kt"},
	"lua":        {"lua"},
	"perl":       {"pl"},
	"php":        {"php"},
	"python":     {"py", "py3", "python3", "python3.x"},
	"ruby":       {"ruby3", "rb"},
	"rust":       {"rs"},
	"scala":      {"sc"},
	"typescript": {"ts", "node-ts", "tsc"},
}

// ourName is our name of a language Piston's clients name: ours (or one of
// our aliases) first, else one of Piston's aliases.
func (s *server) ourName(name string) string {
	if l, ok := s.svc.Lookup(name); ok {
		return l.Name
	}
	lower := strings.ToLower(name)
	for ours, aliases := range pistonAliases {
		if slices.Contains(aliases, lower) {
			return ours
		}
	}
	return name
}

// semver is a toolchain's version as Piston shows it: three numbers
// (0.0.0 for a version without any, such as sh's "POSIX.1-2017").
func semver(v string) string {
	parts := strings.SplitN(v, ".", 3)
	for i, p := range parts {
		n := 0
		for n < len(p) && p[n] >= '0' && p[n] <= '9' {
			n++
		}
		if n == 0 {
			parts = parts[:i]
			break
		}
		parts[i] = p[:n]
	}
	if len(parts) == 0 {
		return "0.0.0"
	}
	for len(parts) < 3 {
		parts = append(parts, "0")
	}
	return strings.Join(parts, ".")
}

// File is one of a request's files.
type File struct {
	Name     string `json:"name"`
	Content  string `json:"content"`
	Encoding string `json:"encoding"`
}

// Request is POST /api/v2/execute's body (and the connect's init).
type Request struct {
	Language           string   `json:"language"`
	Version            string   `json:"version"`
	Files              []File   `json:"files"`
	Stdin              string   `json:"stdin"`
	Args               []string `json:"args"`
	CompileTimeout     *float64 `json:"compile_timeout"` // ms
	RunTimeout         *float64 `json:"run_timeout"`     // ms
	CompileMemoryLimit *float64 `json:"compile_memory_limit"`
	RunMemoryLimit     *float64 `json:"run_memory_limit"` // bytes; -1: none
	// Isolation is ours (wire.ExecuteRequest's): Piston has none.
	Isolation string `json:"isolation"`
}

// Stage is the compile or run stage of an answer.
type Stage struct {
	Stdout   string  `json:"stdout"`
	Stderr   string  `json:"stderr"`
	Output   string  `json:"output"`
	Code     *int    `json:"code"`
	Signal   *string `json:"signal"`
	Message  *string `json:"message"`
	Status   *string `json:"status"`
	CPUTime  float64 `json:"cpu_time"`  // ms
	WallTime float64 `json:"wall_time"` // ms
	Memory   int64   `json:"memory"`    // bytes
}

// Response is POST /api/v2/execute's answer: no run stage when the
// compile stage failed (nothing ran), as Piston answers.
type Response struct {
	Language string `json:"language"`
	Version  string `json:"version"`
	Run      *Stage `json:"run,omitempty"`
	Compile  *Stage `json:"compile,omitempty"`
}

// errBadRequest is a request Piston would refuse with 400.
type errBadRequest struct{ msg string }

func (e *errBadRequest) Error() string { return e.msg }

func bad(format string, a ...any) error { return &errBadRequest{fmt.Sprintf(format, a...)} }

// toRequest maps a Piston request onto ours: the language and version
// resolved (the version a semver selector), the first file the program,
// and the network and secrets of the server's piston section.
func (s *server) toRequest(p *Request) (*wire.ExecuteRequest, string, error) {
	if p.Language == "" {
		return nil, "", bad("language is required as a string")
	}
	if len(p.Files) == 0 {
		return nil, "", bad("files is required as an array")
	}
	name := s.ourName(p.Language)
	var version string
	if l, ok := s.svc.Lookup(name); ok {
		for _, v := range l.Versions {
			if matches(p.Version, semver(v.Version)) {
				version = v.Version
				break
			}
		}
	}
	if version == "" {
		return nil, "", bad("%s-%s runtime is unknown", p.Language, p.Version)
	}
	req := &wire.ExecuteRequest{Language: name, Version: version, Args: p.Args, InputData: p.Stdin, Isolation: p.Isolation}
	if nw := s.cfg.Piston; len(nw.Network) > 0 {
		// Piston names no network: the server's configuration gives it.
		req.Network = &wire.NetworkRequest{Allow: slices.Clone(nw.Network)}
		req.Secrets = slices.Clone(nw.Secrets)
	}
	for i, f := range p.Files {
		data, err := decode(f)
		if err != nil {
			return nil, "", bad("files[%d]: %v", i, err)
		}
		if i == 0 {
			if !isText(data) {
				return nil, "", bad("files[0] is the program: it must be text")
			}
			req.Code = string(data)
			continue
		}
		fname := path.Clean(strings.TrimPrefix(f.Name, "/"))
		if f.Name == "" || fname == "." {
			fname = "file" + strconv.Itoa(i) + ".code"
		}
		if req.Files == nil {
			req.Files = map[string]wire.FileData{}
		}
		req.Files[fname] = wire.FileData(data)
	}
	if t := p.RunTimeout; t != nil && *t > 0 {
		req.TimeoutSeconds = *t / 1000
	}
	if t := p.CompileTimeout; t != nil && *t > 0 {
		req.CompileTimeoutSeconds = *t / 1000
	}
	if m := p.RunMemoryLimit; m != nil && *m > 0 {
		req.MaxMemoryMB = int64(math.Ceil(*m / (1 << 20)))
	}
	return req, semver(version), nil
}

// matches says whether version (x.y.z) satisfies sel: "", "*", "x", an
// exact version, a prefix ("3", "3.11"), or one with x/* parts ("3.x").
// Ranges (">=3.10") are taken by their first version's major number.
func matches(sel, version string) bool {
	sel = strings.TrimSpace(sel)
	sel = strings.TrimLeft(sel, "^~>=<v ")
	if sel == "" || sel == "*" || sel == "x" || sel == "latest" {
		return true
	}
	want, have := strings.Split(sel, "."), strings.Split(version, ".")
	for i, w := range want {
		if w == "x" || w == "X" || w == "*" {
			continue
		}
		if i >= len(have) || have[i] != w {
			return false
		}
	}
	return true
}

func decode(f File) ([]byte, error) {
	switch strings.ToLower(f.Encoding) {
	case "", "utf8", "utf-8":
		return []byte(f.Content), nil
	case "base64":
		return base64.StdEncoding.DecodeString(f.Content)
	case "hex":
		return hex.DecodeString(f.Content)
	}
	return nil, fmt.Errorf("encoding %q: use utf8, base64 or hex", f.Encoding)
}

func isText(b []byte) bool { return utf8.Valid(b) }

func (s *server) execute(w http.ResponseWriter, r *http.Request) {
	leave, err := s.svc.Admit(runner.CallerOf(r.Context()), 1, true)
	if err != nil {
		s.refuse(w, err)
		return
	}
	defer leave()
	var p Request
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes))
	if err := dec.Decode(&p); err != nil {
		writeMessage(w, http.StatusBadRequest, "invalid JSON body: "+err.Error())
		return
	}
	req, version, err := s.toRequest(&p)
	if err == nil {
		err = s.check(r.Context(), req)
	}
	if err != nil {
		s.refuse(w, err)
		return
	}
	res, err := s.svc.Run(r.Context(), runner.Run{Request: req, CompileMemoryBytes: s.compileMemory(&p), Tenant: runner.CallerOf(r.Context()).Tenant(), Via: "piston"})
	if err != nil {
		s.refuse(w, err)
		return
	}
	writeJSON(w, http.StatusOK, toResponse(pistonName(req.Language), version, res))
}

// compileMemory is what only Piston's request has: the compile step's
// memory limit (bytes; -1 or absent: the language's, 0), within the
// server's maximum.
func (s *server) compileMemory(p *Request) int64 {
	if m := p.CompileMemoryLimit; m != nil && *m > 0 {
		return min(int64(*m), s.cfg.Maximums.MemoryMB<<20)
	}
	return 0
}

// check makes the checks the native API makes (runner.Service.Prepare),
// for the caller's key (whose secrets a run with piston.secrets uses).
func (s *server) check(ctx context.Context, req *wire.ExecuteRequest) error {
	return s.svc.Prepare(ctx, req, runner.CallerOf(ctx).Tenant())
}

// refuse answers err in Piston's shape ({"message": ...}).
func (s *server) refuse(w http.ResponseWriter, err error) {
	var b *errBadRequest
	switch k := runner.KindOf(err); {
	case errors.As(err, &b) || k == runner.Invalid:
		writeMessage(w, http.StatusBadRequest, err.Error())
	case k == runner.RateLimited:
		w.Header().Set("Retry-After", retryAfter(err))
		writeMessage(w, http.StatusTooManyRequests, err.Error())
	case k == runner.Forbidden:
		writeMessage(w, http.StatusForbidden, err.Error())
	case k == runner.Unsupported:
		writeMessage(w, http.StatusUnsupportedMediaType, err.Error())
	case k.Retryable():
		w.Header().Set("Retry-After", retryAfter(err))
		writeMessage(w, http.StatusServiceUnavailable, err.Error())
	case k == runner.Full:
		writeMessage(w, http.StatusInsufficientStorage, err.Error())
	case k == runner.Canceled:
		writeMessage(w, http.StatusServiceUnavailable, "execution canceled")
	default:
		s.log.Error("piston: execution failed", "error", err)
		writeMessage(w, http.StatusInternalServerError, err.Error())
	}
}

// retryAfter is the Retry-After of a refused run: what the run service
// says, at least a second.
func retryAfter(err error) string {
	var e *runner.Error
	d := time.Second
	if errors.As(err, &e) {
		d = max(d, e.RetryAfter)
	}
	return strconv.Itoa(int(math.Ceil(d.Seconds())))
}

// toResponse is our result as Piston answers it.
func toResponse(language, version string, res *wire.Result) Response {
	out := Response{Language: language, Version: version}
	if c := res.Compile; c != nil {
		cs := stage(c.Outcome)
		out.Compile = &cs
	}
	if res.Status != wire.StatusCompileError {
		run := stage(res.Outcome)
		out.Run = &run
	}
	return out
}

func stage(o wire.Outcome) Stage {
	st := Stage{Stdout: text(o.Stdout, o.StdoutEncoding), Stderr: text(o.Stderr, o.StderrEncoding),
		CPUTime: o.CPUTimeMs, WallTime: o.DurationMs, Memory: int64(o.MemoryUsedMB * (1 << 20))}
	st.Output = st.Stdout + st.Stderr
	if o.Signal != "" {
		sig := o.Signal
		st.Signal = &sig
	} else {
		code := o.ExitCode
		st.Code = &code
	}
	var status, msg string
	switch {
	case o.Status == wire.StatusTimeout:
		status, msg = "TO", "Time limit exceeded ("+o.LimitReason+")"
	case o.LimitReason == "output":
		status, msg = "OL", "Output limit exceeded"
	case o.LimitReason == "memory":
		status, msg = "SG", "Memory limit exceeded"
	case o.Signal != "":
		status, msg = "SG", "Killed by "+o.Signal
	case o.Status == wire.StatusRuntimeError:
		status, msg = "RE", "Exited with code "+strconv.Itoa(o.ExitCode)
	case o.Status == wire.StatusSetupError:
		status, msg = "XX", "Internal error"
	}
	if status != "" {
		st.Status, st.Message = &status, &msg
	}
	return st
}

// text is output as a string (base64 output decoded, invalid UTF-8 kept
// as JSON can carry it).
func text(s, encoding string) string {
	if encoding == "base64" {
		if b, err := base64.StdEncoding.DecodeString(s); err == nil {
			return strings.ToValidUTF8(string(b), "\uFFFD")
		}
	}
	return s
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeMessage(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]string{"message": msg})
}
