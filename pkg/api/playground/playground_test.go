package playground

import (
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
)

func serve(t *testing.T, method, path string, header http.Header) (*http.Response, string) {
	t.Helper()
	h := Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "not found", http.StatusNotFound)
	}))
	req := httptest.NewRequest(method, path, nil)
	for k, v := range header {
		req.Header[k] = v
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	resp := w.Result()
	body, _ := io.ReadAll(resp.Body)
	return resp, string(body)
}

func TestPage(t *testing.T) {
	resp, body := serve(t, "GET", "/", nil)
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, "<html") {
		t.Fatalf("GET /: %d %.200s", resp.StatusCode, body)
	}
	for k, want := range map[string]string{
		"Content-Type":           "text/html; charset=utf-8",
		"Cache-Control":          "no-store",
		"X-Content-Type-Options": "nosniff",
	} {
		if got := resp.Header.Get(k); got != want {
			t.Errorf("%s: %q, want %q", k, got, want)
		}
	}
	// The page's styles are allowed by a fresh nonce, scripts by origin only.
	csp := resp.Header.Get("Content-Security-Policy")
	m := regexp.MustCompile(`style-src 'self' 'nonce-([A-Za-z0-9+/=]{24})'`).FindStringSubmatch(csp)
	if m == nil || !strings.Contains(body, `<meta name="csp-nonce" content="`+m[1]+`">`) {
		t.Errorf("CSP %q and the page's nonce do not match", csp)
	}
	if !strings.Contains(csp, "script-src 'self';") || strings.Contains(csp, "unsafe") || strings.Contains(body, noncePlaceholder) {
		t.Errorf("CSP %q", csp)
	}
	if resp2, _ := serve(t, "GET", "/", nil); resp2.Header.Get("Content-Security-Policy") == csp {
		t.Error("the nonce is the same twice")
	}
	if resp, body := serve(t, "HEAD", "/", nil); resp.StatusCode != http.StatusOK || body != "" {
		t.Errorf("HEAD /: %d %q", resp.StatusCode, body)
	}

	// Every asset the page names is there, with its type and cached for good.
	refs := regexp.MustCompile(`(?:src|href)="(/playground/assets/[^"]+)"`).FindAllStringSubmatch(body, -1)
	if len(refs) != 2 {
		t.Fatalf("the page names %d assets, want a script and a style sheet", len(refs))
	}
	for _, ref := range refs {
		resp, data := serve(t, "GET", ref[1], nil)
		if resp.StatusCode != http.StatusOK || len(data) == 0 {
			t.Errorf("GET %s: %d", ref[1], resp.StatusCode)
		}
		want := "text/javascript; charset=utf-8"
		if strings.HasSuffix(ref[1], ".css") {
			want = "text/css; charset=utf-8"
		}
		if got := resp.Header.Get("Content-Type"); got != want {
			t.Errorf("%s: Content-Type %q, want %q", ref[1], got, want)
		}
		if got := resp.Header.Get("Cache-Control"); !strings.Contains(got, "immutable") {
			t.Errorf("%s: Cache-Control %q", ref[1], got)
		}
		// Revalidation: the same ETag answers 304.
		etag := resp.Header.Get("ETag")
		if resp, _ := serve(t, "GET", ref[1], http.Header{"If-None-Match": {etag}}); etag == "" || resp.StatusCode != http.StatusNotModified {
			t.Errorf("%s: ETag %q, If-None-Match: %d, want 304", ref[1], etag, resp.StatusCode)
		}
	}
}

func TestAssets(t *testing.T) {
	n := 0
	err := fs.WalkDir(Assets(), "assets", func(name string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		n++
		resp, _ := serve(t, "GET", "/playground/"+name, nil)
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") == "application/octet-stream" {
			t.Errorf("%s: %d %s", name, resp.StatusCode, resp.Header.Get("Content-Type"))
		}
		return nil
	})
	if err != nil || n < 3 {
		t.Fatalf("%d assets: %v", n, err)
	}
}

func TestNotFound(t *testing.T) {
	for _, p := range []string{"/index.html", "/playground/", "/playground/index.html", "/playground/assets/",
		"/playground/assets/nope.js", "/playground/assets/../index.html", "/playground/assets/x/y.js", "/nope"} {
		if resp, _ := serve(t, "GET", p, nil); resp.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s: %d, want 404", p, resp.StatusCode)
		}
	}
}
