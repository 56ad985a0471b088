// Package judge0 serves Judge0 CE's API under /judge0, so that Judge0's
// clients run on sandbox-run by changing their base URL to
// http://host:8080/judge0: submissions (one, batched, with wait or a token
// to poll, base64 or text, expected_output verdicts, limits, callbacks,
// number_of_runs, additional files), languages, statuses and about, with
// Judge0's field names, language ids, status ids and error shapes. It is a
// transport: every run goes through the API server's run service, behind
// its keys, limits, metrics and logs. What Judge0 has and this does not is
// answered 422 in Judge0's shape ({"field": ["why"]}).
package judge0

import (
	"cmp"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/sandbox-run/sandbox-run/pkg/config"
	"github.com/sandbox-run/sandbox-run/pkg/runner"
	"github.com/sandbox-run/sandbox-run/pkg/webhook"
)

// Prefix is where the API is served.
const Prefix = "/judge0/"

// Status is a Judge0 status.
type Status struct {
	ID          int    `json:"id"`
	Description string `json:"description"`
}

type server struct {
	cfg   config.Config
	svc   *runner.Service
	log   *slog.Logger
	mux   *http.ServeMux
	hooks *webhook.Sender
	stats stats
}

// maxBatch is the most submissions one batch takes (Judge0's default).
const maxBatch = 20

// New serves Judge0 CE's API at Prefix through svc: every submission
// passes svc's door (origin, content, the key's rate: a batch of N is N
// runs) and is a job of svc's job store (the async queue, the key's queue
// and result quota, expiry, restarts), whether the client waits for it or
// polls its token.
func New(cfg config.Config, svc *runner.Service, log *slog.Logger) http.Handler {
	s := &server{cfg: cfg, svc: svc, log: log, mux: http.NewServeMux(),
		hooks: runner.CallbackSender(cfg, http.MethodPut)} // Judge0 PUTs its callbacks
	s.setKind()
	s.mux.HandleFunc("POST "+Prefix+"submissions", s.create)
	s.mux.HandleFunc("GET "+Prefix+"submissions/{token}", s.get)
	s.mux.HandleFunc("POST "+Prefix+"submissions/batch", s.createBatch)
	s.mux.HandleFunc("GET "+Prefix+"submissions/batch", s.getBatch)
	s.mux.HandleFunc("GET "+Prefix+"languages", s.languages)
	s.mux.HandleFunc("GET "+Prefix+"languages/all", s.languages)
	s.mux.HandleFunc("GET "+Prefix+"languages/{id}", s.language)
	s.mux.HandleFunc("GET "+Prefix+"statuses", func(w http.ResponseWriter, r *http.Request) { writeJSON(w, http.StatusOK, statuses) })
	s.mux.HandleFunc("GET "+Prefix+"about", s.about)
	s.mux.HandleFunc("GET "+Prefix+"version", s.version)
	s.mux.HandleFunc("GET "+Prefix+"config_info", s.configInfo)
	s.mux.HandleFunc("GET "+Prefix+"system_info", s.systemInfo)
	s.mux.HandleFunc("GET "+Prefix+"workers", s.workers)
	s.mux.HandleFunc("GET "+Prefix+"statistics", s.statistics)
	s.mux.HandleFunc(Prefix, func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "not found: " + r.Method + " " + r.URL.Path +
			" (this server speaks Judge0 CE's API: submissions, submissions/batch, languages, statuses, about, version, config_info, system_info, workers, statistics)"})
	})
	return s
}

// ServeHTTP serves the API; a path with a trailing slash is the one
// without (Rails routes both: POST /submissions/ is POST /submissions).
func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if p := r.URL.Path; len(p) > len(Prefix) && strings.HasSuffix(p, "/") {
		r2 := *r
		u := *r.URL
		u.Path, u.RawPath = strings.TrimRight(p, "/"), ""
		r2.URL = &u
		r = &r2
	}
	s.mux.ServeHTTP(w, r)
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// languages answers GET /languages: the ids whose language is installed,
// named as Judge0 names them, with the version that runs.
func (s *server) languages(w http.ResponseWriter, r *http.Request) {
	type entry struct {
		ID   int    `json:"id"`
		Name string `json:"name"`
	}
	out := []entry{}
	for _, l := range languages {
		if v, ok := s.resolve(l); ok {
			out = append(out, entry{l.ID, nameOf(l, v)})
		}
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *server) language(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.Atoi(r.PathValue("id"))
	l, ok := byID(id)
	v, installed := "", false
	if ok {
		v, installed = s.resolve(l)
	}
	if err != nil || !installed {
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "language with id " + r.PathValue("id") + " doesn't exist"})
		return
	}
	source := "main"
	if lang, ok := s.svc.Lookup(l.Ours); ok && lang.Source != "" {
		source = lang.Source
	}
	writeJSON(w, http.StatusOK, map[string]any{"id": l.ID, "name": nameOf(l, v), "is_archived": false,
		"source_file": source, "compile_cmd": nil, "run_cmd": nil})
}

func byID(id int) (lang, bool) {
	for _, l := range languages {
		if l.ID == id {
			return l, true
		}
	}
	return lang{}, false
}

// resolve is the installed version l runs, if any: the one its version
// prefix names, else the language's default.
func (s *server) resolve(l lang) (string, bool) {
	if l.Version != "" {
		if _, v, err := s.svc.Resolve(l.Ours, l.Version); err == nil {
			return v.Version, true
		}
		if strings.Count(l.Version, ".") == 0 {
			return "", false // a major version that is not here (Python 2)
		}
	}
	if _, v, err := s.svc.Resolve(l.Ours, ""); err == nil {
		return v.Version, true
	}
	return "", false
}

// stackKB is the stack every run has (the engine's RLIMIT_STACK, 8 MiB);
// a submission's stack_limit is not applied.
const stackKB = 8 << 10

// configInfo answers GET /config_info: every key Judge0 CE 1.13.1 answers
// (its app/helpers/config.rb), each with the type Judge0 gives it (clients
// such as judge0-python's Config require them all), from this server's
// defaults and maximums; what it does not do (compiler options, per-process
// limits, deletion) is false, and so is network unless the server's
// judge0.network lets a submission enable it.
func (s *server) configInfo(w http.ResponseWriter, r *http.Request) {
	d, m := s.cfg.Defaults, s.cfg.Maximums
	maxCPU := cmp.Or(m.CPUTimeSeconds, m.TimeoutSeconds)
	writeJSON(w, http.StatusOK, map[string]any{
		"maintenance_mode": s.svc.Draining(), "enable_wait_result": true,
		"enable_compiler_options": false, "allowed_languages_for_compile_options": []string{},
		"enable_command_line_arguments": true, "enable_submission_delete": false, "enable_callbacks": true,
		"callbacks_max_tries": 1 + s.cfg.CallbackRetries, "callbacks_timeout": s.cfg.CallbackTimeoutSeconds,
		"enable_additional_files": true, "max_queue_size": s.cfg.AsyncQueue,
		"cpu_time_limit": cmp.Or(d.CPUTimeSeconds, d.TimeoutSeconds), "max_cpu_time_limit": maxCPU,
		// cpu_extra_time is added to cpu_time_limit, the sum within the maximum.
		"cpu_extra_time": 0.0, "max_cpu_extra_time": maxCPU,
		"wall_time_limit": d.TimeoutSeconds, "max_wall_time_limit": m.TimeoutSeconds,
		"memory_limit": d.MemoryMB * 1024, "max_memory_limit": m.MemoryMB * 1024,
		"stack_limit": stackKB, "max_stack_limit": stackKB,
		"max_processes_and_or_threads": d.Processes, "max_max_processes_and_or_threads": m.Processes,
		"enable_per_process_and_thread_time_limit": false, "allow_enable_per_process_and_thread_time_limit": false,
		"enable_per_process_and_thread_memory_limit": false, "allow_enable_per_process_and_thread_memory_limit": false,
		"max_file_size": d.FileSizeBytes / 1024, "max_max_file_size": m.FileSizeBytes / 1024,
		"number_of_runs": 1, "max_number_of_runs": maxRuns, "redirect_stderr_to_stdout": false,
		"max_extract_size":           maxExtract / 1024,
		"enable_batched_submissions": true, "max_submission_batch_size": maxBatch,
		"submission_cache_duration": 0.0, "use_docs_as_homepage": false,
		"enable_network": false, "allow_enable_network": len(s.cfg.Judge0.Network) > 0,
	})
}

// errors422 is Judge0's validation answer: the field and why.
type errors422 map[string][]string

func (e errors422) Error() string {
	var parts []string
	for k, v := range e {
		parts = append(parts, k+": "+strings.Join(v, ", "))
	}
	return strings.Join(parts, "; ")
}

func fieldError(field, format string, a ...any) errors422 {
	return errors422{field: {fmt.Sprintf(format, a...)}}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// boolParam reads a query flag ("true", "false", or absent: def).
func boolParam(r *http.Request, name string, def bool) bool {
	v := r.URL.Query().Get(name)
	if v == "" {
		return def
	}
	b, err := strconv.ParseBool(v)
	return err == nil && b
}
