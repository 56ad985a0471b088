package mcp

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// ownerOf is who a call comes from: over HTTP, the API key (its SHA-256;
// the route has checked it), and "" over stdio or without keys.
func ownerOf(req *sdk.CallToolRequest) string {
	if req == nil || req.Extra == nil || req.Extra.Header == nil {
		return ""
	}
	token, ok := strings.CutPrefix(req.Extra.Header.Get("Authorization"), "Bearer ")
	if !ok || token == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}
