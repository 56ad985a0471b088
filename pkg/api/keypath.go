package api

import (
	"net/http"
	"strings"
)

// keyPathPrefix starts a key-bearing base URL: /k/<key>/piston/... and
// /k/<key>/judge0/... are /piston/... and /judge0/... sent with the key,
// for the peers' stock clients, which take a base URL and cannot send a
// header.
const keyPathPrefix = "/k/"

// keyPathTransports are the transports a key-bearing base URL reaches.
var keyPathTransports = []string{"piston/", "judge0/"}

// keyPath rewrites a request to a key-bearing base URL into the request it
// stands for: the path without /k/<key>, the key as its Authorization
// (over any key header it also has). Nothing downstream sees the key in
// the path, so no log line or metric label can carry it. ok is false when
// it answered r itself (a key path to anything else: 404).
func keyPath(w http.ResponseWriter, r *http.Request) (_ *http.Request, ok bool) {
	key, rest, found := strings.Cut(strings.TrimPrefix(r.URL.Path, keyPathPrefix), "/")
	served := false
	for _, t := range keyPathTransports {
		served = served || strings.HasPrefix(rest+"/", t)
	}
	if !found || key == "" || !served {
		writeError(w, http.StatusNotFound, "no such endpoint: a key-bearing base URL is /k/<key>/piston/... or /k/<key>/judge0/...")
		return nil, false
	}
	r2 := r.Clone(r.Context())
	r2.URL.Path = "/" + rest
	r2.URL.RawPath = ""
	r2.RequestURI = r2.URL.RequestURI()
	r2.Header.Del("X-Auth-Token")
	r2.Header.Set("Authorization", "Bearer "+key)
	return r2, true
}
