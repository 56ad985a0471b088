package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/sandbox-run/sandbox-run/pkg/images"
	"github.com/sandbox-run/sandbox-run/pkg/runner"
)

// The image store's admin endpoints (scope admin): what `sandbox-run
// images` does on the server's store.
//
//	GET    /api/admin/images            the images, by reference
//	POST   /api/admin/images            {"image": REF}: pull (again) and unpack
//	DELETE /api/admin/images?image=REF  forget the reference
//	POST   /api/admin/images/prune      free what no reference needs

// ImageList is the answer of GET /api/admin/images.
type ImageList struct {
	Images []*images.Image `json:"images"`
}

// ImagePullRequest is the body of POST /api/admin/images.
type ImagePullRequest struct {
	Image string `json:"image"`
}

// ImagePruned is the answer of POST /api/admin/images/prune.
type ImagePruned struct {
	FreedBytes int64 `json:"freed_bytes"`
}

func (s *Server) registerImages() {
	s.route("GET /api/admin/images", ScopeAdmin, s.handleImageList)
	s.route("POST /api/admin/images", ScopeAdmin, s.handleImagePull)
	s.route("DELETE /api/admin/images", ScopeAdmin, s.handleImageRemove)
	s.route("POST /api/admin/images/prune", ScopeAdmin, s.handleImagePrune)
}

// imageStore is the executor's image store, or an answer saying why none.
func (s *Server) imageStore(w http.ResponseWriter) *images.Store {
	x, ok := s.x.(interface{ Images() (*images.Store, error) })
	if !ok {
		writeError(w, http.StatusNotImplemented, "this server's executor keeps no images")
		return nil
	}
	store, err := x.Images()
	if err != nil {
		writeError(w, http.StatusInternalServerError, "image store: "+err.Error())
		return nil
	}
	return store
}

func (s *Server) handleImageList(w http.ResponseWriter, r *http.Request) {
	store := s.imageStore(w)
	if store == nil {
		return
	}
	list, err := store.List()
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, ImageList{Images: append([]*images.Image{}, list...)})
}

func (s *Server) handleImagePull(w http.ResponseWriter, r *http.Request) {
	var req ImagePullRequest
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 64<<10))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		writeError(w, http.StatusBadRequest, "invalid JSON: "+err.Error())
		return
	}
	if _, err := images.ParseRef(req.Image); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	store := s.imageStore(w)
	if store == nil {
		return
	}
	_, xc := runner.EngineConfigs(s.cfg)
	img, err := store.Fetch(r.Context(), req.Image, xc.ImageCaps, xc.UnpackLimits, nil)
	switch {
	case errors.Is(err, images.ErrUnknown):
		writeError(w, http.StatusNotFound, err.Error())
	case err != nil:
		writeError(w, http.StatusBadGateway, fmt.Sprintf("pull %s: %v", req.Image, err))
	default:
		writeJSON(w, http.StatusOK, img)
	}
}

func (s *Server) handleImageRemove(w http.ResponseWriter, r *http.Request) {
	ref := r.URL.Query().Get("image")
	if _, err := images.ParseRef(ref); err != nil {
		writeError(w, http.StatusBadRequest, "?image=REF: "+err.Error())
		return
	}
	store := s.imageStore(w)
	if store == nil {
		return
	}
	switch err := store.Remove(ref); {
	case errors.Is(err, images.ErrNotFound):
		writeError(w, http.StatusNotFound, err.Error())
	case err != nil:
		writeError(w, http.StatusInternalServerError, err.Error())
	default:
		w.WriteHeader(http.StatusNoContent)
	}
}

func (s *Server) handleImagePrune(w http.ResponseWriter, r *http.Request) {
	store := s.imageStore(w)
	if store == nil {
		return
	}
	freed, err := store.Prune()
	if err != nil {
		writeError(w, http.StatusConflict, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, ImagePruned{FreedBytes: freed})
}
