package api

import (
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"path/filepath"
	"strconv"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/sandbox-run/sandbox-run/pkg/filestore"
	"github.com/sandbox-run/sandbox-run/pkg/runner"
	"github.com/sandbox-run/sandbox-run/pkg/sandbox"
	"github.com/sandbox-run/sandbox-run/pkg/wire"
)

// The file store: POST/GET /api/sandbox/files, GET/DELETE
// /api/sandbox/files/{file_id}, GET /api/sandbox/files/{file_id}/content.
// Executions name stored files as {"file_id": "..."} in place of code or a
// file's content, so big inputs are uploaded once and run many times.

// multipartSlack is what a multipart upload may carry besides the file:
// boundaries, part headers, small fields.
const multipartSlack = 64 << 10

func (s *Server) registerFiles() {
	quotas := filestore.QuotasOf(s.cfg.FileQuotaBytes, s.cfg.MaxFileBytes, s.cfg.FileQuotaFiles, len(s.cfg.Keys) > 0,
		s.cfg.FileQuotaBytesPerKey, s.cfg.FileQuotaFilesPerKey)
	st := s.opts.files
	if st == nil {
		st = filestore.New(filepath.Join(s.cfg.DataDir, "files"), s.cfg.MaxFileBytes, quotas, seconds(s.cfg.FileTTLSeconds), s.log)
	}
	s.files = st
	s.route("POST /api/sandbox/files", ScopeExecute, s.handleFileUpload)
	s.route("GET /api/sandbox/files", ScopeExecute, s.handleFileList)
	s.route("GET /api/sandbox/files/{file_id}", ScopeExecute, s.handleFileInfo)
	s.route("DELETE /api/sandbox/files/{file_id}", ScopeExecute, s.handleFileDelete)
	s.route("GET /api/sandbox/files/{file_id}/content", ScopeExecute, s.handleFileContent)
	s.allowOnly("/api/sandbox/files/{file_id}", "GET", "HEAD", "DELETE")
	s.allowOnly("/api/sandbox/files/{file_id}/content", "GET", "HEAD")
	s.janitor(seconds(s.cfg.FileTTLSeconds), func(now time.Time) {
		if n := st.Expire(now); n > 0 {
			s.log.Info("file store: expired files removed", "files", n)
		}
	})
}

// allowOnly answers 405 (with Allow) to the other methods on a path with
// wildcards, which the catch-all cannot recognise.
func (s *Server) allowOnly(pattern string, methods ...string) {
	allow := ""
	for i, m := range methods {
		if i > 0 {
			allow += ", "
		}
		allow += m
	}
	s.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Allow", allow)
		writeError(w, http.StatusMethodNotAllowed, fmt.Sprintf("method %s not allowed on %s (allowed: %s)", r.Method, r.URL.Path, allow))
	})
}

func (s *Server) handleFileUpload(w http.ResponseWriter, r *http.Request) {
	st := s.files
	var ttl time.Duration
	if v := r.URL.Query().Get("ttl_seconds"); v != "" {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || !(f > 0) || f > 1e9 {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("ttl_seconds %q: give a positive number of seconds", v))
			return
		}
		ttl = seconds(f)
	}
	tooLarge := func() {
		writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("file larger than %d bytes", s.cfg.MaxFileBytes))
	}
	var (
		body        io.Reader
		name        string
		contentType string
	)
	mt, params, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if mt == "multipart/form-data" {
		if r.ContentLength > s.cfg.MaxFileBytes+multipartSlack {
			tooLarge()
			return
		}
		if params["boundary"] == "" {
			writeError(w, http.StatusBadRequest, "multipart/form-data without a boundary")
			return
		}
		mr := multipart.NewReader(http.MaxBytesReader(w, r.Body, s.cfg.MaxFileBytes+multipartSlack), params["boundary"])
		for {
			part, err := mr.NextPart()
			if err != nil {
				var big *http.MaxBytesError
				switch {
				case errors.As(err, &big):
					tooLarge()
				case err == io.EOF:
					writeError(w, http.StatusBadRequest, `no file in the multipart body: send a part with a filename (e.g. curl -F file=@data.csv)`)
				default:
					writeError(w, http.StatusBadRequest, "malformed multipart body: "+err.Error())
				}
				return
			}
			if part.FileName() != "" || part.FormName() == "file" {
				body, name = part, part.FileName()
				contentType = part.Header.Get("Content-Type")
				break
			}
		}
	} else {
		if r.ContentLength > s.cfg.MaxFileBytes {
			tooLarge()
			return
		}
		if r.ContentLength >= 0 {
			if err := st.Room(r.ContentLength, keyOf(r).ID()); err != nil {
				writeError(w, http.StatusInsufficientStorage, err.Error())
				return
			}
		}
		body, name = r.Body, r.URL.Query().Get("name")
		contentType = r.Header.Get("Content-Type")
	}
	if err := checkFileName(name); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	if ct, _, err := mime.ParseMediaType(contentType); err == nil && len(ct) <= 127 {
		contentType = ct
	} else {
		contentType = ""
	}
	cr := &countingReader{r: body}
	f, err := st.Put(cr, keyOf(r).ID(), name, contentType, ttl)
	if err != nil {
		var quota *filestore.QuotaError
		var big *http.MaxBytesError
		switch {
		case errors.Is(err, filestore.ErrTooLarge) || errors.As(err, &big):
			tooLarge()
		case errors.As(err, &quota):
			writeError(w, http.StatusInsufficientStorage, err.Error())
		case cr.err != nil:
			writeError(w, http.StatusBadRequest, "reading the upload: "+cr.err.Error())
		default:
			s.log.Error("file store: upload failed", "error", err)
			writeError(w, http.StatusInternalServerError, "storing the file: "+err.Error())
		}
		return
	}
	s.log.Info("file stored", "file_id", f.ID, "size", f.Size, "key_id", keyOf(r).ID())
	w.Header().Set("Location", "/api/sandbox/files/"+f.ID)
	writeJSON(w, http.StatusCreated, f.Info())
}

// countingReader remembers its reader's error, to tell a client's broken
// upload (400) from the server's failure to store it (500).
type countingReader struct {
	r   io.Reader
	err error
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	if err != nil && err != io.EOF {
		c.err = err
	}
	return n, err
}

// checkFileName accepts a stored file's name (metadata only): at most 255
// bytes of UTF-8 without control or bidirectional-override characters.
func checkFileName(name string) error {
	if len(name) > 255 || !utf8.ValidString(name) {
		return errors.New("file name must be at most 255 bytes of UTF-8")
	}
	for _, r := range name {
		if unicode.IsControl(r) || (r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069) {
			return fmt.Errorf("file name %q contains a control or bidirectional-override character", name)
		}
	}
	return nil
}

func (s *Server) handleFileList(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"files": s.files.List(keyOf(r).ID())})
}

func (s *Server) handleFileInfo(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("file_id")
	f := s.files.Get(id, keyOf(r).ID())
	if f == nil {
		writeError(w, http.StatusNotFound, "no such file: "+id)
		return
	}
	writeJSON(w, http.StatusOK, f.Info())
}

func (s *Server) handleFileContent(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("file_id")
	f, fh, err := s.files.Open(id, keyOf(r).ID())
	if err != nil {
		writeError(w, http.StatusNotFound, "no such file: "+id)
		return
	}
	defer fh.Close()
	h := w.Header()
	// Served as bytes, never as what the uploader said it was.
	h.Set("Content-Type", "application/octet-stream")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Length", strconv.FormatInt(f.Size, 10))
	h.Set("ETag", `"`+f.SHA256+`"`)
	if f.Name != "" {
		h.Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": f.Name}))
	}
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		io.Copy(w, io.LimitReader(fh, f.Size))
	}
}

func (s *Server) handleFileDelete(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("file_id")
	if !s.files.Remove(id, keyOf(r).ID()) {
		writeError(w, http.StatusNotFound, "no such file: "+id)
		return
	}
	s.log.Info("file deleted", "file_id", id, "key_id", keyOf(r).ID())
	w.WriteHeader(http.StatusNoContent)
}

// resolveFileRefs replaces {"file_id": ...} references in req by the stored
// contents, checking that the key may read them.
func (s *Server) resolveFileRefs(req *ExecuteRequest, key *runner.Key) error {
	if req.CodeFileID == "" && len(req.FileIDs) == 0 {
		return nil
	}
	st := s.files
	owner := key.ID()
	if n := len(req.Files) + len(req.FileIDs); n > s.cfg.MaxFiles {
		return badRequest("too many files: %d (at most %d)", n, s.cfg.MaxFiles)
	}
	// Size everything from the metadata before reading a byte.
	total := int64(len(req.Code))
	for _, d := range req.Files {
		total += int64(len(d))
	}
	refs := map[string]*filestore.File{}
	lookup := func(id, what string) error {
		f := st.Get(id, owner)
		if f == nil {
			return badRequest("unknown file id %q (%s): upload it with POST /api/sandbox/files; files expire and are only visible to the key that stored them", id, what)
		}
		total += f.Size
		refs[id] = f
		return nil
	}
	if req.CodeFileID != "" {
		if err := lookup(req.CodeFileID, "code"); err != nil {
			return err
		}
	}
	for name, id := range req.FileIDs {
		if _, err := sandbox.ValidatePath(name); err != nil {
			return badRequest("invalid file name: %v", err)
		}
		if err := lookup(id, "files["+strconv.Quote(name)+"]"); err != nil {
			return err
		}
	}
	if total > wire.MaxTotalBytes {
		return badRequest("code and files total %d bytes (at most %d)", total, wire.MaxTotalBytes)
	}
	contents := map[string][]byte{}
	for id := range refs {
		_, data, err := st.Read(id, owner)
		if err != nil {
			return badRequest("unknown file id %q: %v", id, err)
		}
		contents[id] = data
	}
	if req.CodeFileID != "" {
		data := contents[req.CodeFileID]
		if !utf8.Valid(data) {
			return badRequest("file %s used as code is not UTF-8 text", req.CodeFileID)
		}
		req.Code, req.CodeFileID = string(data), ""
	}
	if len(req.FileIDs) > 0 && req.Files == nil {
		req.Files = map[string]wire.FileData{}
	}
	for name, id := range req.FileIDs {
		req.Files[name] = wire.FileData(contents[id])
	}
	req.FileIDs = nil
	return nil
}
