// Package playground serves the web playground: a page with a code editor
// that runs code through the API, interactively over the WebSocket (GET /
// and GET /playground/assets/*).
// Its assets are built from web/playground by web/playground/build.sh and
// embedded, so the binary needs nothing at run time (no CDN).
package playground

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"io/fs"
	"net/http"
	"path"
	"strings"
	"time"
)

//go:embed dist
var dist embed.FS

// Assets are the built files: index.html and assets/*.
func Assets() fs.FS {
	sub, err := fs.Sub(dist, "dist")
	if err != nil {
		panic(err)
	}
	return sub
}

// CSP is the Content-Security-Policy of the page (with a nonce for the
// editor's generated style sheets: "style-src 'self' 'nonce-...'") and of
// the assets: this origin only, no inline scripts, no plugins, no framing.
const CSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; font-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// pageCSP is CSP with the page's style nonce.
func pageCSP(nonce string) string {
	return strings.Replace(CSP, "style-src 'self'", "style-src 'self' 'nonce-"+nonce+"'", 1)
}

// noncePlaceholder is where index.html takes the nonce (a meta tag the
// script reads for CodeMirror's EditorView.cspNonce).
const noncePlaceholder = "{{NONCE}}"

// Prefix is where the assets are served.
const Prefix = "/playground/"

var contentTypes = map[string]string{
	".html": "text/html; charset=utf-8",
	".js":   "text/javascript; charset=utf-8",
	".css":  "text/css; charset=utf-8",
	".txt":  "text/plain; charset=utf-8",
	".svg":  "image/svg+xml",
	".png":  "image/png",
}

// Handler serves the page at / and the assets under Prefix; anything else
// is passed to notFound. Asset names carry a hash of their content, so
// they are cached for good; the page, with a fresh nonce each time, is
// not stored.
func Handler(notFound http.Handler) http.Handler {
	type asset struct {
		data []byte
		etag string
	}
	assets := map[string]asset{}
	err := fs.WalkDir(Assets(), ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := fs.ReadFile(Assets(), name)
		sum := sha256.Sum256(data)
		assets[name] = asset{data, `"` + base64.RawURLEncoding.EncodeToString(sum[:12]) + `"`}
		return err
	})
	if err != nil {
		panic(err)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := "index.html"
		if r.URL.Path != "/" {
			rest, ok := strings.CutPrefix(r.URL.Path, Prefix+"assets/")
			if !ok || rest == "" || strings.Contains(rest, "/") || path.Clean(rest) != rest {
				notFound.ServeHTTP(w, r)
				return
			}
			name = "assets/" + rest
		}
		a, ok := assets[name]
		if !ok {
			notFound.ServeHTTP(w, r)
			return
		}
		h := w.Header()
		ct, known := contentTypes[path.Ext(name)]
		if !known {
			ct = "application/octet-stream"
		}
		h.Set("Content-Type", ct)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("X-Frame-Options", "DENY")
		data := a.data
		if name == "index.html" {
			var b [16]byte
			rand.Read(b[:])
			nonce := base64.StdEncoding.EncodeToString(b[:])
			data = bytes.ReplaceAll(data, []byte(noncePlaceholder), []byte(nonce))
			h.Set("Content-Security-Policy", pageCSP(nonce))
			h.Set("Cache-Control", "no-store")
		} else {
			h.Set("Content-Security-Policy", CSP)
			h.Set("Cache-Control", "public, max-age=31536000, immutable")
			h.Set("ETag", a.etag)
		}
		// ServeContent answers HEAD, ranges and If-None-Match (the ETag);
		// embedded files have no time, so no Last-Modified.
		http.ServeContent(w, r, name, time.Time{}, bytes.NewReader(data))
	})
}
