package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"

	"github.com/sandbox-run/sandbox-run/pkg/images"
)

// The image store's admin endpoints (scope admin): what `sandbox-run
// images` does on the server's store.
//
//	GET    /api/admin/images            the images, by reference
//	POST   /api/admin/images            {"image": REF}: pull (again) and unpack
//	DELETE /api/admin/images?image=REF  forget the reference
//	POST   /api/admin/images/prune      free what no reference needs

// ImageList is the answer of GET /api/admin/images: the images the store
// holds (those evicted past images.max_store_bytes are gone from it).
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
	// The store evicts least recently used images past
	// images.max_store_bytes, and says so in the server's log. A store
	// left by an earlier run is opened (and so trimmed to the bound, which
	// may have shrunk) at start; a new one when first needed.
	if x, ok := s.x.(interface{ SetImageLogger(*slog.Logger) }); ok {
		x.SetImageLogger(s.log)
	}
	s.background = append(s.background, func(context.Context) {
		x, ok := s.x.(interface{ Images() (*images.Store, error) })
		if _, err := os.Stat(filepath.Join(s.cfg.DataDir, "images")); !ok || err != nil {
			return
		}
		if _, err := x.Images(); err != nil {
			s.log.Warn("image store", "error", err)
		}
	})
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
	puller, ok := s.x.(interface {
		PullImage(context.Context, string) (*images.Image, error)
	})
	if !ok {
		writeError(w, http.StatusNotImplemented, "this server's executor pulls no images")
		return
	}
	img, err := puller.PullImage(r.Context(), req.Image)
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
