package api

import (
	"net/http"
	"slices"

	"github.com/sandbox-run/sandbox-run/pkg/live"
	"github.com/sandbox-run/sandbox-run/pkg/runner"
	"github.com/sandbox-run/sandbox-run/pkg/wire"
)

// snapshotsPath is the collection of the key's snapshots.
const snapshotsPath = "/api/sandbox/snapshots"

func (s *Server) registerSnapshots() {
	b := sandboxesPath
	s.route("POST "+b+"/{id}/snapshots", ScopeExecute, s.withSandbox(s.handleSnapshotCreate))
	s.route("POST "+b+"/{id}/fork", ScopeExecute, s.withSandbox(s.handleFork))
	s.route("GET "+snapshotsPath, ScopeExecute, s.handleSnapshotList)
	s.route("DELETE "+snapshotsPath+"/{id}", ScopeExecute, s.handleSnapshotDelete)
	s.allowOnly(b+"/{id}/snapshots", "POST")
	s.allowOnly(b+"/{id}/fork", "POST")
	s.allowOnly(snapshotsPath+"/{id}", "DELETE")
}

func snapshotJSON(sn *live.Snapshot) wire.Snapshot {
	return wire.Snapshot{ID: sn.ID, Names: slices.Clone(sn.Names), SandboxID: sn.SandboxID, CreatedAt: sn.Created.UTC(), SizeBytes: sn.Size, Memory: sn.Memory}
}

// handleSnapshotCreate takes a snapshot of the sandbox's files.
func (s *Server) handleSnapshotCreate(w http.ResponseWriter, r *http.Request, sb *live.Sandbox) {
	var req struct {
		Name string `json:"name"`
	}
	if r.ContentLength != 0 && !s.decodeJSONBody(w, r, &req) {
		return
	}
	if len(req.Name) > 200 {
		writeError(w, http.StatusBadRequest, "name: at most 200 bytes")
		return
	}
	sn, err := s.run.SnapshotLive(r.Context(), runner.CallerOf(r.Context()), sb.ID, req.Name)
	if err != nil {
		s.writeLiveError(w, err)
		return
	}
	w.Header().Set("Location", snapshotsPath+"/"+sn.ID)
	writeJSON(w, http.StatusCreated, snapshotJSON(sn))
}

// handleSnapshotList lists the key's snapshots (of one sandbox with
// ?sandbox_id=).
func (s *Server) handleSnapshotList(w http.ResponseWriter, r *http.Request) {
	out := []wire.Snapshot{}
	for _, sn := range s.run.LiveSnapshots(runner.CallerOf(r.Context()), r.URL.Query().Get("sandbox_id")) {
		out = append(out, snapshotJSON(sn))
	}
	writeJSON(w, http.StatusOK, map[string]any{"snapshots": out})
}

// handleSnapshotDelete deletes one of the key's snapshots.
func (s *Server) handleSnapshotDelete(w http.ResponseWriter, r *http.Request) {
	if err := s.run.DeleteLiveSnapshot(runner.CallerOf(r.Context()), r.PathValue("id")); err != nil {
		s.writeLiveError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// handleFork makes count (1 to 100, default 1) sandboxes with the
// sandbox's files.
func (s *Server) handleFork(w http.ResponseWriter, r *http.Request, sb *live.Sandbox) {
	var req struct {
		Count          *int    `json:"count"`
		TimeoutSeconds float64 `json:"timeout_seconds"`
	}
	if r.ContentLength != 0 && !s.decodeJSONBody(w, r, &req) {
		return
	}
	n := 1
	if req.Count != nil {
		n = *req.Count
	}
	if n < 1 || n > 100 {
		writeError(w, http.StatusBadRequest, "count: give 1 to 100")
		return
	}
	if req.TimeoutSeconds < 0 || req.TimeoutSeconds > 1e9 {
		writeError(w, http.StatusBadRequest, "timeout_seconds: give a positive number of seconds")
		return
	}
	kids, errs, err := s.run.ForkLive(r.Context(), runner.CallerOf(r.Context()), sb.ID, n, seconds(req.TimeoutSeconds))
	if err != nil {
		s.writeLiveError(w, err)
		return
	}
	out := wire.ForkResult{Children: make([]wire.ForkChild, len(kids))}
	for i, k := range kids {
		if errs[i] != nil {
			out.Children[i].Error = errs[i].Error()
			continue
		}
		sj := sandboxJSON(k)
		sj.AccessToken = k.Token
		out.Children[i].Sandbox = &sj
		out.Memory = out.Memory || k.ForkedMemory
	}
	writeJSON(w, http.StatusCreated, out)
}
