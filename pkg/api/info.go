package api

import (
	"net/http"

	"github.com/sandbox-run/sandbox-run/pkg/config"
	"github.com/sandbox-run/sandbox-run/pkg/runner"
	"github.com/sandbox-run/sandbox-run/pkg/wire"
)

// What the server says about itself: languages, the OpenAPI document,
// health and readiness.

// handleLanguages answers the installed languages, worked out once per
// generation of the backend's toolchains (they are found again when the
// host changes: executor.FollowHost).
func (s *Server) handleLanguages(w http.ResponseWriter, r *http.Request) {
	gen := int64(0)
	if g, ok := s.x.(interface{ Generation() int64 }); ok {
		gen = g.Generation()
	}
	s.langMu.Lock()
	defer s.langMu.Unlock()
	if s.langs == nil || gen != s.langGen {
		s.langGen = gen
		limitsOf := func(v runner.Version) LimitSet {
			limits := s.cfg.Defaults
			if v.MemoryMB > 0 {
				limits.MemoryMB = v.MemoryMB
			}
			if v.Processes > 0 {
				limits.Processes = v.Processes
			}
			return limits
		}
		s.langs = []LanguageInfo{}
		for _, l := range s.run.Languages() {
			if !l.Available {
				continue
			}
			info := LanguageInfo{Name: l.Name, Aliases: l.Aliases, Extensions: l.Extensions, Compiled: l.Compiled, Versions: []LanguageVersion{}}
			for _, v := range l.Versions {
				if v.Default {
					info.Version, info.DefaultLimits = v.Version, limitsOf(v)
				}
				info.Versions = append(info.Versions, LanguageVersion{Version: v.Version, Available: true, Default: v.Default, Compiled: v.Compiled, DefaultLimits: limitsOf(v)})
			}
			s.langs = append(s.langs, info)
		}
	}
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
	ready := map[string]any{"status": "ready", "workers": s.cfg.Workers,
		"in_flight": s.run.InFlight(), "queued": s.run.Queued()}
	status := http.StatusOK
	if c := s.opts.cluster; c != nil {
		if s.cfg.NATS.Role == config.RoleAPI {
			ready["workers"] = 0 // it runs none: the cluster's are under "cluster"
		}
		if c.Health != nil {
			h, ok := c.Health(r.Context())
			ready["cluster"] = h
			if !ok {
				ready["status"], status = "cluster unavailable", http.StatusServiceUnavailable
			}
		}
	}
	// Toolchain caches being prepared do not make a server unready: a run
	// that needs one waits for it (or compiles without it).
	if tc, ok := s.x.(interface{ ToolchainCaches() []wire.ToolchainCache }); ok {
		if caches := tc.ToolchainCaches(); len(caches) > 0 {
			ready["toolchain_caches"] = caches
		}
	}
	writeJSON(w, status, ready)
}
