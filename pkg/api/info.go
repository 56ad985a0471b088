package api

import (
	"net/http"

	"github.com/sandbox-run/sandbox-run/pkg/executor"
)

// What the server says about itself: languages, the OpenAPI document,
// health and readiness.

func (s *Server) handleLanguages(w http.ResponseWriter, r *http.Request) {
	s.langOnce.Do(func() {
		reg := s.x.Registry()
		limitsOf := func(l *executor.Language) LimitSet {
			limits := s.cfg.Defaults
			if l.Limits.MemoryMB > 0 {
				limits.MemoryMB = l.Limits.MemoryMB
			}
			if l.Limits.Processes > 0 {
				limits.Processes = l.Limits.Processes
			}
			return limits
		}
		s.langs = []LanguageInfo{}
		for _, name := range reg.LanguageNames() {
			l, tc, err := reg.Resolve(name, "")
			if err != nil {
				continue
			}
			info := LanguageInfo{Name: l.Name, Aliases: l.Aliases, Extensions: l.Extensions, Version: tc.Version, Compiled: l.Compiled(), DefaultLimits: limitsOf(l), Versions: []LanguageVersion{}}
			for _, e := range reg.Entries(name) {
				if etc := reg.Toolchain(e); etc.Err == nil {
					info.Versions = append(info.Versions, LanguageVersion{Version: etc.Version, Available: true, Default: e == l, Compiled: e.Compiled(), DefaultLimits: limitsOf(e)})
				}
			}
			if info.Aliases == nil {
				info.Aliases = []string{}
			}
			if info.Extensions == nil {
				info.Extensions = []string{}
			}
			s.langs = append(s.langs, info)
		}
	})
	writeJSON(w, http.StatusOK, s.langs)
}

func (s *Server) handleOpenAPI(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Write(openAPIDocument)
}

func (s *Server) handleHealth(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

func (s *Server) handleReady(w http.ResponseWriter, r *http.Request) {
	if s.run.Draining() {
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "shutting down"})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"status": "ready", "workers": s.cfg.Workers,
		"in_flight": s.run.InFlight(), "queued": s.run.Queued()})
}
