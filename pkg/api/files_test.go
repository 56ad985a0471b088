package api

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"mime/multipart"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The file store: uploads, metadata, content, executions that reference
// stored files, ownership, the size cap, the quota and expiry.

const (
	aliceKey = "alice-secret"
	bobKey   = "bob-secret"
)

// storeConfig has two execute keys and a data directory of its own.
func storeConfig(t testing.TB) Config {
	cfg := keyConfig(
		APIKey{ID: "alice", Key: aliceKey, Scopes: []string{ScopeExecute}},
		APIKey{ID: "bob", Key: bobKey, Scopes: []string{ScopeExecute}},
	)
	cfg.DataDir = t.TempDir()
	return cfg
}

// upload posts a raw body (query like "?name=x") and returns the answer.
func (ts *testServer) upload(t testing.TB, key string, data []byte, query string) (*http.Response, []byte) {
	t.Helper()
	return ts.call(t, request{method: http.MethodPost, path: "/api/sandbox/files" + query, body: data,
		contentType: "application/octet-stream", key: key})
}

// stored uploads data and wants a 201 with its metadata.
func (ts *testServer) stored(t testing.TB, key string, data []byte, query string) FileInfo {
	t.Helper()
	resp, body := ts.upload(t, key, data, query)
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("upload: %d %s", resp.StatusCode, body)
	}
	var f FileInfo
	if err := json.Unmarshal(body, &f); err != nil {
		t.Fatal(err)
	}
	if loc := resp.Header.Get("Location"); loc != "/api/sandbox/files/"+f.FileID {
		t.Errorf("Location %q for %s", loc, f.FileID)
	}
	return f
}

func multipartBody(t testing.TB, parts ...[3]string) ([]byte, string) {
	t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	for _, p := range parts { // field, filename ("" for a plain field), content
		var w interface{ Write([]byte) (int, error) }
		var err error
		if p[1] == "" {
			w, err = mw.CreateFormField(p[0])
		} else {
			w, err = mw.CreateFormFile(p[0], p[1])
		}
		if err != nil {
			t.Fatal(err)
		}
		w.Write([]byte(p[2]))
	}
	mw.Close()
	return buf.Bytes(), mw.FormDataContentType()
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func keyed(r request, key string) request {
	r.key = key
	return r
}

func TestFileStore(t *testing.T) {
	t.Parallel()
	ts := startServer(t, storeConfig(t))
	binary := []byte{0, 1, 2, 0x7f, 0x80, 0xfe, 0xff, '\n', 0xc3, ',', 'x'}

	t.Run("raw_upload_metadata_content", func(t *testing.T) {
		t.Parallel()
		f := ts.stored(t, aliceKey, binary, "?name=data.bin")
		if f.Size != int64(len(binary)) || f.SHA256 != sha(binary) || f.Name != "data.bin" || f.ContentType != "application/octet-stream" {
			t.Errorf("metadata %+v", f)
		}
		if !strings.HasPrefix(f.FileID, "file_") || !f.ExpiresAt.After(f.CreatedAt.Add(23*time.Hour)) {
			t.Errorf("id %q, created %v, expires %v", f.FileID, f.CreatedAt, f.ExpiresAt)
		}
		resp, body := ts.get(t, "/api/sandbox/files/"+f.FileID, aliceKey)
		var got FileInfo
		json.Unmarshal(body, &got)
		if resp.StatusCode != http.StatusOK || got != f {
			t.Errorf("GET metadata: %d %s, want %+v", resp.StatusCode, body, f)
		}
		resp, body = ts.get(t, "/api/sandbox/files/"+f.FileID+"/content", aliceKey)
		if resp.StatusCode != http.StatusOK || !bytes.Equal(body, binary) || resp.Header.Get("Content-Type") != "application/octet-stream" {
			t.Errorf("GET content: %d %q %q", resp.StatusCode, resp.Header.Get("Content-Type"), body)
		}
		if cd := resp.Header.Get("Content-Disposition"); !strings.Contains(cd, "data.bin") {
			t.Errorf("Content-Disposition %q", cd)
		}
		resp, body = ts.call(t, request{method: http.MethodHead, path: "/api/sandbox/files/" + f.FileID + "/content", key: aliceKey})
		if resp.StatusCode != http.StatusOK || len(body) != 0 {
			t.Errorf("HEAD content: %d, %d bytes", resp.StatusCode, len(body))
		}
		// Chunked, without a Content-Type and with nothing in it.
		resp, body = ts.call(t, request{method: http.MethodPost, path: "/api/sandbox/files", body: []byte{}, contentType: "none", chunked: true, key: aliceKey})
		json.Unmarshal(body, &got)
		if resp.StatusCode != http.StatusCreated || got.Size != 0 || got.SHA256 != sha(nil) {
			t.Errorf("empty upload: %d %s", resp.StatusCode, body)
		}
	})

	t.Run("multipart_upload", func(t *testing.T) {
		t.Parallel()
		body, ct := multipartBody(t, [3]string{"comment", "", "not the file"}, [3]string{"upload", "../dir/table.csv", string(binary)}, [3]string{"other", "b.txt", "second file"})
		resp, data := ts.call(t, request{method: http.MethodPost, path: "/api/sandbox/files", body: body, contentType: ct, key: aliceKey})
		var f FileInfo
		json.Unmarshal(data, &f)
		if resp.StatusCode != http.StatusCreated || f.Size != int64(len(binary)) || f.SHA256 != sha(binary) || f.Name != "table.csv" {
			t.Fatalf("multipart upload: %d %s", resp.StatusCode, data)
		}
		if _, data = ts.get(t, "/api/sandbox/files/"+f.FileID+"/content", aliceKey); !bytes.Equal(data, binary) {
			t.Errorf("content %q", data)
		}
		// No file part; a part named "file" counts without a filename.
		body, ct = multipartBody(t, [3]string{"comment", "", "x"})
		resp, data = ts.call(t, request{method: http.MethodPost, path: "/api/sandbox/files", body: body, contentType: ct, key: aliceKey})
		wantError(t, resp, data, http.StatusBadRequest, "no file")
		body, ct = multipartBody(t, [3]string{"file", "", "plain field"})
		resp, data = ts.call(t, request{method: http.MethodPost, path: "/api/sandbox/files", body: body, contentType: ct, key: aliceKey})
		f = FileInfo{}
		if json.Unmarshal(data, &f); resp.StatusCode != http.StatusCreated || f.Size != 11 || f.Name != "" {
			t.Errorf("file field: %d %s", resp.StatusCode, data)
		}
		resp, data = ts.call(t, request{method: http.MethodPost, path: "/api/sandbox/files", body: []byte("--x\r\nbroken"), contentType: "multipart/form-data; boundary=x", key: aliceKey})
		wantError(t, resp, data, http.StatusBadRequest, "multipart")
		resp, data = ts.call(t, request{method: http.MethodPost, path: "/api/sandbox/files", body: []byte("x"), contentType: "multipart/form-data", key: aliceKey})
		wantError(t, resp, data, http.StatusBadRequest, "boundary")
	})

	t.Run("execute_by_file_id", func(t *testing.T) {
		t.Parallel()
		code := ts.stored(t, aliceKey, []byte("import sys\ndata = open('data.csv', 'rb').read()\nprint('hello from a stored script', data.hex(), sys.argv[1:])\n"), "?name=main.py")
		data := ts.stored(t, aliceKey, binary, "")
		for range 2 { // uploaded once, run many times
			r := keyed(executeRequest(t, map[string]any{"language": "python", "code": map[string]string{"file_id": code.FileID},
				"files": map[string]any{"data.csv": map[string]string{"file_id": data.FileID}}, "args": []string{"a"}}), aliceKey)
			resp, body := ts.call(t, r)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("execute: %d %s", resp.StatusCode, body)
			}
			if res := decodeResult(t, body); res.Stdout != fmt.Sprintf("hello from a stored script %x ['a']\n", binary) {
				t.Errorf("stdout %q stderr %q", res.Stdout, res.Stderr)
			}
		}
		// Mixed with inline files; the stored bytes arrive exactly.
		r := keyed(executeRequest(t, map[string]any{"language": "python",
			"code":  "import hashlib\nprint(hashlib.sha256(open('in/b.bin','rb').read()).hexdigest(), open('n.txt').read())",
			"files": map[string]any{"in/b.bin": map[string]string{"file_id": data.FileID}, "n.txt": "inline"}}), aliceKey)
		resp, body := ts.call(t, r)
		if res := decodeResult(t, body); resp.StatusCode != http.StatusOK || res.Stdout != sha(binary)+" inline\n" {
			t.Errorf("mixed files: %d %s", resp.StatusCode, body)
		}
		// Code must be text.
		r = keyed(executeRequest(t, map[string]any{"language": "python", "code": map[string]string{"file_id": data.FileID}}), aliceKey)
		resp, body = ts.call(t, r)
		wantError(t, resp, body, http.StatusBadRequest, "not UTF-8")
		// A stored file under a bad name.
		r = keyed(executeRequest(t, map[string]any{"language": "python", "code": "1", "files": map[string]any{"../x": map[string]string{"file_id": data.FileID}}}), aliceKey)
		resp, body = ts.call(t, r)
		wantError(t, resp, body, http.StatusBadRequest, "invalid file name")
	})

	t.Run("delete", func(t *testing.T) {
		t.Parallel()
		f := ts.stored(t, aliceKey, []byte("print('x')"), "")
		resp, body := ts.call(t, request{method: http.MethodDelete, path: "/api/sandbox/files/" + f.FileID, key: aliceKey})
		if resp.StatusCode != http.StatusNoContent || len(body) != 0 {
			t.Fatalf("DELETE: %d %s", resp.StatusCode, body)
		}
		for _, p := range []string{"", "/content"} {
			resp, body = ts.get(t, "/api/sandbox/files/"+f.FileID+p, aliceKey)
			wantError(t, resp, body, http.StatusNotFound, "no such file")
		}
		resp, body = ts.call(t, request{method: http.MethodDelete, path: "/api/sandbox/files/" + f.FileID, key: aliceKey})
		wantError(t, resp, body, http.StatusNotFound, "no such file")
		for _, body := range []map[string]any{
			{"language": "python", "code": map[string]string{"file_id": f.FileID}},
			{"language": "python", "code": "print(1)", "files": map[string]any{"a.txt": map[string]string{"file_id": f.FileID}}},
		} {
			resp, data := ts.call(t, keyed(executeRequest(t, body), aliceKey))
			wantError(t, resp, data, http.StatusBadRequest, "unknown file id", f.FileID)
		}
		if _, err := os.Stat(filepath.Join(ts.cfg.DataDir, "files", f.FileID+".bin")); !os.IsNotExist(err) {
			t.Errorf("content still on disk: %v", err)
		}
	})

	t.Run("other_keys", func(t *testing.T) {
		t.Parallel()
		f := ts.stored(t, aliceKey, []byte("print('alice')"), "")
		for _, p := range []string{"", "/content"} {
			resp, body := ts.get(t, "/api/sandbox/files/"+f.FileID+p, bobKey)
			wantError(t, resp, body, http.StatusNotFound, "no such file")
		}
		resp, body := ts.call(t, request{method: http.MethodDelete, path: "/api/sandbox/files/" + f.FileID, key: bobKey})
		wantError(t, resp, body, http.StatusNotFound)
		resp, body = ts.call(t, keyed(executeRequest(t, map[string]any{"language": "python", "code": map[string]string{"file_id": f.FileID}}), bobKey))
		wantError(t, resp, body, http.StatusBadRequest, "unknown file id")
		// Bob's list lacks it, Alice's has it; without a key, nothing.
		var list struct{ Files []FileInfo }
		_, body = ts.get(t, "/api/sandbox/files", bobKey)
		json.Unmarshal(body, &list)
		for _, g := range list.Files {
			if g.FileID == f.FileID {
				t.Errorf("bob lists alice's file")
			}
		}
		_, body = ts.get(t, "/api/sandbox/files", aliceKey)
		list.Files = nil
		json.Unmarshal(body, &list)
		found := false
		for _, g := range list.Files {
			found = found || g == f
		}
		if !found {
			t.Errorf("alice's list %s lacks %+v", body, f)
		}
		resp, body = ts.get(t, "/api/sandbox/files/"+f.FileID, "")
		wantError(t, resp, body, http.StatusUnauthorized)
		// Still Alice's, still runnable.
		resp, body = ts.call(t, keyed(executeRequest(t, map[string]any{"language": "python", "code": map[string]string{"file_id": f.FileID}}), aliceKey))
		if resp.StatusCode != http.StatusOK || decodeResult(t, body).Stdout != "alice\n" {
			t.Errorf("alice's run: %d %s", resp.StatusCode, body)
		}
	})

	t.Run("bad_requests", func(t *testing.T) {
		t.Parallel()
		for _, q := range []string{"?ttl_seconds=0", "?ttl_seconds=-1", "?ttl_seconds=x", "?name=a%0Ab"} {
			resp, body := ts.upload(t, aliceKey, []byte("x"), q)
			wantError(t, resp, body, http.StatusBadRequest)
		}
		for _, id := range []string{"nope", "file_000000000000000000000000", "..%2F..%2Fetc"} {
			resp, body := ts.get(t, "/api/sandbox/files/"+id, aliceKey)
			wantError(t, resp, body, http.StatusNotFound)
		}
		resp, body := ts.call(t, request{method: http.MethodPut, path: "/api/sandbox/files/file_000000000000000000000000", body: []byte("x"), key: aliceKey})
		wantError(t, resp, body, http.StatusMethodNotAllowed)
		if allow := resp.Header.Get("Allow"); !strings.Contains(allow, "DELETE") {
			t.Errorf("Allow %q", allow)
		}
		resp, body = ts.call(t, request{method: http.MethodPut, path: "/api/sandbox/files", body: []byte("x"), key: aliceKey})
		wantError(t, resp, body, http.StatusMethodNotAllowed)
	})
}

func TestFileStoreLimits(t *testing.T) {
	t.Parallel()
	cfg := storeConfig(t)
	cfg.MaxFileBytes = 1000
	cfg.FileQuotaBytes = 2500
	ts := startServer(t, cfg)
	big := bytes.Repeat([]byte("x"), 1001)

	// Over the per-file cap: with a length, chunked, and in multipart.
	resp, body := ts.upload(t, aliceKey, big, "")
	wantError(t, resp, body, http.StatusRequestEntityTooLarge, "larger than 1000")
	resp, body = ts.call(t, request{method: http.MethodPost, path: "/api/sandbox/files", body: big, chunked: true, contentType: "text/csv", key: aliceKey})
	wantError(t, resp, body, http.StatusRequestEntityTooLarge)
	mp, ct := multipartBody(t, [3]string{"file", "big.bin", string(big)})
	resp, body = ts.call(t, request{method: http.MethodPost, path: "/api/sandbox/files", body: mp, contentType: ct, key: aliceKey})
	wantError(t, resp, body, http.StatusRequestEntityTooLarge)
	mp, ct = multipartBody(t, [3]string{"file", "big.bin", string(bytes.Repeat([]byte("y"), 100<<10))})
	resp, body = ts.call(t, request{method: http.MethodPost, path: "/api/sandbox/files", body: mp, contentType: ct, key: aliceKey, chunked: true})
	wantError(t, resp, body, http.StatusRequestEntityTooLarge)

	// The quota counts every key's files; freeing space makes room.
	a := ts.stored(t, aliceKey, big[:1000], "")
	b := ts.stored(t, bobKey, big[:1000], "")
	resp, body = ts.upload(t, aliceKey, big[:1000], "")
	wantError(t, resp, body, http.StatusInsufficientStorage, "quota")
	resp, body = ts.call(t, request{method: http.MethodPost, path: "/api/sandbox/files", body: big[:1000], chunked: true, key: aliceKey, contentType: "none"})
	wantError(t, resp, body, http.StatusInsufficientStorage, "quota")
	ts.stored(t, aliceKey, big[:500], "") // what fits still does
	ts.call(t, request{method: http.MethodDelete, path: "/api/sandbox/files/" + a.FileID, key: aliceKey})
	ts.stored(t, aliceKey, big[:1000], "")
	// Nothing is left behind by the refused uploads.
	entries, _ := os.ReadDir(filepath.Join(cfg.DataDir, "files"))
	if len(entries) != 6 {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Errorf("files dir holds %v, want 3 files with metadata", names)
	}
	// Expired files make room at once, before the janitor comes by (this
	// server runs none).
	ts.call(t, request{method: http.MethodDelete, path: "/api/sandbox/files/" + b.FileID, key: bobKey})
	short := ts.stored(t, bobKey, big[:1000], "?ttl_seconds=0.05")
	time.Sleep(time.Until(short.ExpiresAt))
	ts.stored(t, bobKey, big[:1000], "")
	if _, err := os.Stat(filepath.Join(cfg.DataDir, "files", short.FileID+".bin")); !os.IsNotExist(err) {
		t.Errorf("the expired file is still on disk: %v", err)
	}
}

func TestFileExpiryAndRestart(t *testing.T) {
	t.Parallel()
	cfg := storeConfig(t)
	cfg.FileTTLSeconds = 1
	ts := serveServer(t, cfg)
	f := ts.stored(t, aliceKey, []byte("print('soon gone')"), "")
	short := ts.stored(t, aliceKey, []byte("x"), "?ttl_seconds=0.2")
	if d := short.ExpiresAt.Sub(short.CreatedAt); d != 200*time.Millisecond {
		t.Errorf("ttl_seconds=0.2: expires %v after creation", d)
	}
	if d := f.ExpiresAt.Sub(f.CreatedAt); d != time.Second {
		t.Errorf("the server's TTL of 1 s: expires %v after creation", d)
	}
	if resp, body := ts.get(t, "/api/sandbox/files/"+f.FileID, aliceKey); resp.StatusCode != http.StatusOK {
		t.Errorf("fresh file: %d %s", resp.StatusCode, body)
	}
	// A restart (same data directory) keeps the file and its metadata;
	// leftovers of an interrupted upload are removed.
	dir := filepath.Join(cfg.DataDir, "files")
	os.WriteFile(filepath.Join(dir, ".upload-123"), []byte("partial"), 0o600)
	os.WriteFile(filepath.Join(dir, "file_0123456789abcdef01234567.bin"), []byte("orphan"), 0o600)
	ts2 := startServer(t, cfg)
	resp, body := ts2.get(t, "/api/sandbox/files/"+f.FileID, aliceKey)
	var got FileInfo
	json.Unmarshal(body, &got)
	if resp.StatusCode != http.StatusOK || !got.CreatedAt.Equal(f.CreatedAt) || got.SHA256 != f.SHA256 {
		t.Errorf("after a restart: %d %s", resp.StatusCode, body)
	}
	for _, name := range []string{".upload-123", "file_0123456789abcdef01234567.bin"} {
		if _, err := os.Stat(filepath.Join(dir, name)); !os.IsNotExist(err) {
			t.Errorf("%s survived the restart", name)
		}
	}
	// Expired: gone for every request at once, and from the disk soon.
	time.Sleep(time.Until(f.ExpiresAt))
	resp, body = ts.get(t, "/api/sandbox/files/"+f.FileID, aliceKey)
	wantError(t, resp, body, http.StatusNotFound)
	resp, body = ts.call(t, keyed(executeRequest(t, map[string]any{"language": "python", "code": map[string]string{"file_id": f.FileID}}), aliceKey))
	wantError(t, resp, body, http.StatusBadRequest, "unknown file id")
	if !waitFor(5*time.Second, func() bool {
		entries, _ := os.ReadDir(dir)
		return len(entries) == 0
	}) {
		entries, _ := os.ReadDir(dir)
		t.Errorf("the janitor left %d entries", len(entries))
	}
}

func TestFileConfig(t *testing.T) {
	t.Parallel()
	for _, mod := range []func(*Config){
		func(c *Config) { c.MaxFileBytes = 0 },
		func(c *Config) { c.MaxFileBytes = 1 << 30 },
		func(c *Config) { c.FileQuotaBytes = c.MaxFileBytes - 1 },
		func(c *Config) { c.FileTTLSeconds = 0 },
		func(c *Config) { c.SessionIdleSeconds = -1 },
		func(c *Config) { c.SessionMaxTTLSeconds = c.SessionIdleSeconds / 2 },
		func(c *Config) { c.SessionMaxBytes = 1 << 30 },
		func(c *Config) { c.MaxSessionsPerKey = 0 },
	} {
		cfg := testConfig()
		mod(&cfg)
		if err := cfg.Validate(); err == nil {
			t.Errorf("accepted %+v", cfg)
		}
	}
	cfg := testConfig()
	if err := cfg.Validate(); err != nil {
		t.Errorf("the defaults: %v", err)
	}
}
