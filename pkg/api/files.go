package api

// The file store: POST/GET/DELETE /api/sandbox/files. (Stub: filled in by
// the file-store work.)

func (s *Server) registerFiles() {}

// resolveFileRefs replaces {"file_id": ...} references in req by the stored
// contents, checking that the key may read them.
func (s *Server) resolveFileRefs(req *ExecuteRequest, key *apiKey) error {
	if req.CodeFileID != "" || len(req.FileIDs) > 0 {
		return badRequest("file ids are not supported yet")
	}
	return nil
}
