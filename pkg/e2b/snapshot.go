package e2b

import (
	"errors"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/sandbox-run/sandbox-run/pkg/live"
	"github.com/sandbox-run/sandbox-run/pkg/runner"
)

// Snapshots and forks: a snapshot keeps a sandbox's files under the
// caller's key, and Sandbox.create(snapshotID) starts a sandbox with
// them; a fork makes sandboxes with a running one's files.

// snapshotJSON is a snapshot as createSnapshot and listSnapshots read it.
type snapshotJSON struct {
	SnapshotID string   `json:"snapshotID"`
	Names      []string `json:"names"`
}

func snapshotOf(sn *live.Snapshot) snapshotJSON {
	return snapshotJSON{SnapshotID: sn.ID, Names: slices.Clone(sn.Names)}
}

// findSnapshot is the caller's snapshot whose id or one of whose names is
// ref, or nil.
func (d *Door) findSnapshot(r *http.Request, ref string) *live.Snapshot {
	if ref == "" {
		return nil
	}
	for _, sn := range d.svc.LiveSnapshots(caller(r), "") {
		if sn.ID == ref || slices.Contains(sn.Names, ref) {
			return sn
		}
	}
	return nil
}

// snapshot is createSnapshot: 201 with the snapshot's id and names.
func (d *Door) snapshot(w http.ResponseWriter, r *http.Request) {
	var b struct {
		Name string `json:"name"`
	}
	if err := decode(r, &b); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	sn, err := d.svc.SnapshotLive(r.Context(), caller(r), r.PathValue("id"), b.Name)
	if err != nil {
		writeRunnerError(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, snapshotOf(sn))
}

// snapshots is listSnapshots: the caller's, of one sandbox (sandboxID) or
// all, by name (name), at most limit.
func (d *Door) snapshots(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit := 100
	if l := q.Get("limit"); l != "" {
		var err error
		if limit, err = strconv.Atoi(l); err != nil || limit <= 0 {
			writeError(w, http.StatusBadRequest, "limit: want a positive number")
			return
		}
	}
	out := []snapshotJSON{}
	for _, sn := range d.svc.LiveSnapshots(caller(r), q.Get("sandboxID")) {
		if name := q.Get("name"); name != "" && !slices.Contains(sn.Names, name) {
			continue
		}
		if len(out) < limit {
			out = append(out, snapshotOf(sn))
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// deleteSnapshot is deleteSnapshot (DELETE /templates/{id}): 204, or 404.
func (d *Door) deleteSnapshot(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if sn := d.findSnapshot(r, id); sn != nil {
		id = sn.ID
	}
	if err := d.svc.DeleteLiveSnapshot(caller(r), id); err != nil {
		writeRunnerError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// forkResult is one child of fork: the sandbox, or why there is none.
type forkResult struct {
	Sandbox *sandboxJSON `json:"sandbox,omitempty"`
	Error   *errorJSON   `json:"error,omitempty"`
}

// errorJSON is an error in the control plane's shape.
type errorJSON struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

// fork is Sandbox.fork: count children (1 by default) with the sandbox's
// files, each living timeout seconds; 201 with one result each.
func (d *Door) fork(w http.ResponseWriter, r *http.Request) {
	var b struct {
		Count   *int `json:"count"`
		Timeout *int `json:"timeout"`
	}
	if err := decode(r, &b); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	n := 1
	if b.Count != nil {
		n = *b.Count
	}
	var timeout time.Duration
	if b.Timeout != nil && *b.Timeout > 0 {
		timeout = time.Duration(*b.Timeout) * time.Second
	}
	kids, errs, err := d.svc.ForkLive(r.Context(), caller(r), r.PathValue("id"), n, timeout)
	if err != nil {
		writeRunnerError(w, err)
		return
	}
	out := make([]forkResult, len(kids))
	for i, k := range kids {
		if errs[i] != nil {
			status, msg := runnerStatus(errs[i])
			out[i].Error = &errorJSON{Code: status, Message: msg}
			continue
		}
		sj := d.sandboxJSON(r, k)
		out[i].Sandbox = &sj
	}
	writeJSON(w, http.StatusCreated, out)
}

// runnerStatus is err's HTTP status and message, as writeRunnerError
// answers them (a fork's child too).
func runnerStatus(err error) (int, string) {
	var e *runner.Error
	if errors.As(err, &e) {
		return e.Kind.HTTPStatus(), e.Msg
	}
	return http.StatusInternalServerError, err.Error()
}
