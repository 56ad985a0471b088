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
	s.mux.HandleFunc("GET "+Prefix+"about", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"version": "1.13.1-sandbox-run", "homepage": "", "source_code": "",
			"maintainer": "sandbox-run: Judge0 CE compatible API"})
	})
	s.mux.HandleFunc("GET "+Prefix+"config_info", s.configInfo)
	s.mux.HandleFunc(Prefix, func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "not found: " + r.Method + " " + r.URL.Path +
			" (this server speaks Judge0 CE's API: submissions, submissions/batch, languages, statuses, about, config_info)"})
	})
	return s.mux
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

// configInfo answers GET /config_info: the limits as Judge0 names them.
func (s *server) configInfo(w http.ResponseWriter, r *http.Request) {
	d, m := s.cfg.Defaults, s.cfg.Maximums
	writeJSON(w, http.StatusOK, map[string]any{
		"enable_wait_result": true, "enable_compiler_options": false, "allowed_languages_for_compile_options": []string{},
		"enable_command_line_arguments": true, "enable_submission_delete": false, "enable_callbacks": true,
		"callbacks_max_tries": 1 + s.cfg.CallbackRetries, "callbacks_timeout": s.cfg.CallbackTimeoutSeconds,
		"enable_additional_files": true, "max_queue_size": s.cfg.AsyncQueue,
		"cpu_time_limit": cmp.Or(d.CPUTimeSeconds, d.TimeoutSeconds), "max_cpu_time_limit": cmp.Or(m.CPUTimeSeconds, m.TimeoutSeconds),
		"wall_time_limit": d.TimeoutSeconds, "max_wall_time_limit": m.TimeoutSeconds,
		"memory_limit": d.MemoryMB * 1024, "max_memory_limit": m.MemoryMB * 1024,
		"max_processes_and_or_threads": d.Processes, "max_max_processes_and_or_threads": m.Processes,
		"max_file_size": d.FileSizeBytes / 1024, "max_max_file_size": m.FileSizeBytes / 1024,
		"number_of_runs": 1, "max_number_of_runs": maxRuns, "redirect_stderr_to_stdout": false,
		"enable_network": false, "allow_enable_network": false, "max_extract_size": maxExtract / 1024,
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
