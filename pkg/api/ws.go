package api

// The WebSocket endpoint for interactive programs. (Stub: filled in by the
// WebSocket work.)

func (s *Server) registerWebSocket() {}
