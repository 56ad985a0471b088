package api

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sandbox-run/sandbox-run/internal/testkit/imagetest"
	"github.com/sandbox-run/sandbox-run/pkg/executor"
	"github.com/sandbox-run/sandbox-run/pkg/local"
)

var digestRE = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)

// A request's image runs only when the server's images.allow permits it:
// by default none (400), else those its patterns match; the result says
// which image and digest ran.
func TestImageAllowPolicy(t *testing.T) {
	t.Parallel()
	img := imagetest.BusyboxImage(t, []string{"PATH=/bin", "IMG_ONLY=from-the-image"},
		imagetest.File{Name: "etc/marker", Data: []byte("in-the-image\n")})
	dir := t.TempDir()
	ref := imagetest.WriteLayout(t, filepath.Join(dir, "layout"), img, "1")
	body := map[string]any{"language": "sh", "code": "cat /etc/marker; echo $IMG_ONLY", "image": ref}

	closed := startServer(t, testConfig())
	resp, data := closed.execute(t, body)
	if e := decodeError(t, data); resp.StatusCode != http.StatusBadRequest || !strings.Contains(e.Error, "images.allow") {
		t.Errorf("without images.allow: %d %s, want 400 naming images.allow", resp.StatusCode, data)
	}

	cfg := testConfig()
	cfg.Images.Allow = []string{"oci:" + dir + "/**"}
	open := startServer(t, cfg)
	res := open.run(t, body)
	if res.Status != "completed" || res.Stdout != "in-the-image\nfrom-the-image\n" {
		t.Errorf("allowed image: status %s, stdout %q, stderr %q, error %q", res.Status, res.Stdout, res.Stderr, res.Error)
	}
	if res.Image != ref || !digestRE.MatchString(res.ImageDigest) {
		t.Errorf("image %q digest %q, want %q and a sha256 digest", res.Image, res.ImageDigest, ref)
	}
	for _, other := range []string{"oci:/elsewhere/layout:1", "docker.io/library/python:3.12", "127.0.0.1:5000/x:1"} {
		resp, data := open.execute(t, map[string]any{"language": "sh", "code": "echo ran", "image": other})
		if resp.StatusCode != http.StatusBadRequest || strings.Contains(string(data), "ran\\n") {
			t.Errorf("image %s outside images.allow: %d %s, want 400", other, resp.StatusCode, data)
		}
	}
	// Streamed (SSE) the same: output live, the result names the image.
	_, events := open.stream(t, body)
	streams, last := checkEvents(t, events)
	if sres := decodeResult(t, last.data); string(streams["stdout"]) != "in-the-image\nfrom-the-image\n" || sres.Image != ref || sres.ImageDigest != res.ImageDigest {
		t.Errorf("streamed: stdout %q, result image %q digest %q", streams["stdout"], sres.Image, sres.ImageDigest)
	}
	resp, data = open.execute(t, map[string]any{"language": "sh", "code": "echo ran", "image": "Not A Reference"})
	if e := decodeError(t, data); resp.StatusCode != http.StatusBadRequest || !strings.Contains(e.Error, "image") {
		t.Errorf("an invalid reference: %d %s, want 400", resp.StatusCode, data)
	}
	// Allowed, but the source has no such tag: the request's mistake.
	resp, data = open.execute(t, map[string]any{"language": "sh", "code": "echo ran", "image": "oci:" + dir + "/layout:nope"})
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("a tag the layout lacks: %d %s, want 400", resp.StatusCode, data)
	}
}

// The admin endpoints list, remove, pull and prune the server's images;
// a key without the admin scope gets 403.
func TestImageAdminEndpoints(t *testing.T) {
	t.Parallel()
	reg := imagetest.NewRegistry(t)
	ref := reg.Push(t, imagetest.BusyboxImage(t, []string{"PATH=/bin"}), "admin/busybox:1")
	cfg := testConfig()
	cfg.Keys = append(cfg.Keys, APIKey{ID: "ops", Key: "admin-secret", Scopes: []string{ScopeAdmin}},
		APIKey{ID: "user", Key: "user-secret", Scopes: []string{ScopeExecute}})
	ts := startServer(t, cfg)

	if resp, _ := ts.get(t, "/api/admin/images", "user-secret"); resp.StatusCode != http.StatusForbidden {
		t.Errorf("GET /api/admin/images with an execute key: %d, want 403", resp.StatusCode)
	}
	resp, data := ts.call(t, request{method: http.MethodPost, path: "/api/admin/images", key: "admin-secret", body: mustJSON(t, map[string]string{"image": ref})})
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(data), `"digest": "sha256:`) && !strings.Contains(string(data), `"digest":"sha256:`) {
		t.Fatalf("pull: %d %s", resp.StatusCode, data)
	}
	resp, data = ts.get(t, "/api/admin/images", "admin-secret")
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(data), reg.Host+"/admin/busybox:1") {
		t.Errorf("list after the pull: %d %s", resp.StatusCode, data)
	}
	del := "/api/admin/images?image=" + url.QueryEscape(ref)
	if resp, data := ts.call(t, request{method: http.MethodDelete, path: del, key: "admin-secret"}); resp.StatusCode != http.StatusNoContent {
		t.Errorf("remove: %d %s", resp.StatusCode, data)
	}
	if resp, _ := ts.call(t, request{method: http.MethodDelete, path: del, key: "admin-secret"}); resp.StatusCode != http.StatusNotFound {
		t.Errorf("remove again: %d, want 404", resp.StatusCode)
	}
	resp, data = ts.get(t, "/api/admin/images", "admin-secret")
	if resp.StatusCode != http.StatusOK || strings.Contains(string(data), "admin/busybox") {
		t.Errorf("list after the removal: %d %s", resp.StatusCode, data)
	}
	// The store is the test executor's, which tests running beside this
	// one pull into: while one of theirs is under way a prune is a 409
	// that says so (as it should be), and is tried again once it is over.
	for deadline := time.Now().Add(3 * time.Minute); ; time.Sleep(100 * time.Millisecond) {
		resp, data = ts.call(t, request{method: http.MethodPost, path: "/api/admin/images/prune", key: "admin-secret"})
		if resp.StatusCode != http.StatusConflict || !strings.Contains(string(data), "a pull is under way") || time.Now().After(deadline) {
			break
		}
	}
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(data), "freed_bytes") {
		t.Errorf("prune: %d %s", resp.StatusCode, data)
	}
	resp, data = ts.call(t, request{method: http.MethodPost, path: "/api/admin/images", key: "admin-secret", body: mustJSON(t, map[string]string{"image": reg.Host + "/admin/missing:1"})})
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("pull of an image the registry lacks: %d %s, want 404", resp.StatusCode, data)
	}
}

// A pull holds no worker: with one worker, a run whose image is being
// pulled does not keep a run without one from starting.
func TestImagePullHoldsNoWorker(t *testing.T) {
	t.Parallel()
	reg := imagetest.NewRegistry(t)
	ref := reg.Push(t, imagetest.BusyboxImage(t, []string{"PATH=/bin"}), "slow/busybox:1")
	cfg := testConfig()
	cfg.Workers = 1
	cfg.Images.Allow = []string{reg.Host + "/**"}
	ts := startServer(t, cfg)
	held, release := reg.HoldBlobs()
	defer release()
	pulled := make(chan *executor.Result, 1)
	go func() {
		resp, data, err := ts.send(t, executeRequest(t, map[string]any{"language": "sh", "code": "echo in-image", "image": ref}))
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Errorf("the run in the image: %v %s", err, data)
			pulled <- nil
			return
		}
		pulled <- resultOf(t, data, "the run in the image")
	}()
	select {
	case <-held:
	case <-time.After(time.Minute):
		t.Fatal("the pull never reached the registry")
	}
	// Generous on a busy machine, yet far from waiting for ever.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	beside := executeRequest(t, map[string]any{"language": "bash", "code": "echo beside-the-pull"})
	beside.ctx = ctx
	resp, data, err := ts.send(t, beside)
	if err != nil {
		t.Fatalf("a run beside the pull did not finish while the pull was held (it waits for the pull's worker?): %v", err)
	}
	if res := decodeResult(t, data); resp.StatusCode != http.StatusOK || res.Status != "completed" || res.Stdout != "beside-the-pull\n" {
		t.Errorf("a run beside the pull: %d %s", resp.StatusCode, data)
	}
	select {
	case <-pulled:
		t.Fatal("the run in the image ended while its pull was held")
	default:
	}
	release()
	if res := <-pulled; res == nil || res.Status != "completed" || res.Stdout != "in-image\n" {
		t.Errorf("the run in the image: %+v", res)
	}
}

// A session may run in an image: its executions get it without naming it,
// may not name another, and the image must be allowed when the session is
// made.
func TestImageSession(t *testing.T) {
	t.Parallel()
	img := imagetest.BusyboxImage(t, []string{"PATH=/bin"}, imagetest.File{Name: "etc/marker", Data: []byte("session-image\n")})
	dir := t.TempDir()
	ref := imagetest.WriteLayout(t, filepath.Join(dir, "layout"), img, "1")
	cfg := testConfig()
	cfg.Images.Allow = []string{"oci:" + dir + "/**"}
	ts := startServer(t, cfg)
	create := func(body map[string]any) (*http.Response, []byte) {
		return ts.call(t, request{method: http.MethodPost, path: "/api/sandbox/sessions", body: mustJSON(t, body)})
	}
	if resp, data := create(map[string]any{"language": "sh", "image": "oci:/elsewhere/x:1"}); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("a session in an image outside images.allow: %d %s", resp.StatusCode, data)
	}
	resp, data := create(map[string]any{"language": "sh", "image": ref})
	if resp.StatusCode != http.StatusCreated && resp.StatusCode != http.StatusOK {
		t.Fatalf("create: %d %s", resp.StatusCode, data)
	}
	var sess struct {
		SessionID string `json:"session_id"`
		Image     string `json:"image"`
	}
	if err := json.Unmarshal(data, &sess); err != nil || sess.Image != ref {
		t.Fatalf("session %s: %v", data, err)
	}
	res := ts.run(t, map[string]any{"language": "sh", "session_id": sess.SessionID, "code": "cat /etc/marker; echo kept > /work/k"})
	if res.Status != "completed" || res.Stdout != "session-image\n" || res.Image != ref {
		t.Errorf("first run: %s %q image %q", res.Status, res.Stdout, res.Image)
	}
	res = ts.run(t, map[string]any{"language": "sh", "session_id": sess.SessionID, "code": "cat /work/k /etc/marker", "image": ref})
	if res.Status != "completed" || res.Stdout != "kept\nsession-image\n" {
		t.Errorf("second run: %s %q %q", res.Status, res.Stdout, res.Stderr)
	}
	other := imagetest.WriteLayout(t, filepath.Join(dir, "other"), img, "1")
	if resp, data := ts.execute(t, map[string]any{"language": "sh", "session_id": sess.SessionID, "code": "echo ran", "image": other}); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("another image in the session: %d %s", resp.StatusCode, data)
	}
}

// images.max_store_bytes bounds the server's image store: after t0, t1,
// t0, t2 (two fit, three do not) GET /api/admin/images lists t0 and t2,
// t1 being the least recently used; t1 then runs again, fetched anew.
func TestImageStoreBound(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var refs []string
	var perImage int64
	for i := range 3 {
		data := make([]byte, 128<<10)
		rand.Read(data)
		img := imagetest.BusyboxImage(t, []string{"PATH=/bin"},
			imagetest.File{Name: "etc/marker", Data: []byte(fmt.Sprintf("t%d\n", i))}, imagetest.File{Name: "etc/random", Data: data})
		refs = append(refs, imagetest.WriteLayout(t, filepath.Join(dir, fmt.Sprintf("t%d", i)), img, "1"))
		perImage = max(perImage, imagetest.StoreBytes(t, img)) // blob, unpacked files, records
	}
	cfg := testConfig()
	cfg.Keys = append(cfg.Keys, APIKey{ID: "ops", Key: "admin-secret", Scopes: []string{ScopeAdmin, ScopeExecute}})
	cfg.Images.Allow = []string{"oci:" + dir + "/**"}
	cfg.Images.MaxStoreBytes = perImage * 5 / 2
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	// An executor of its own (the tests' shared one has the default bound),
	// configured as the server builds it.
	_, xc := local.EngineConfigs(cfg)
	xc.Engine = testEngine
	x, err := executor.New(xc)
	if err != nil {
		t.Fatal(err)
	}
	ts := &testServer{s: New(cfg, local.New(x), slog.New(slog.DiscardHandler)), cfg: cfg, client: &http.Client{Timeout: 3 * time.Minute}}
	hs := httptest.NewServer(ts.s.Handler())
	t.Cleanup(func() {
		hs.Close()
		ts.s.run.Stop()
	})
	ts.url = hs.URL
	store, err := x.Images()
	if err != nil {
		t.Fatal(err)
	}
	run := func(i int) {
		t.Helper()
		req := executeRequest(t, map[string]any{"language": "sh", "code": "cat /etc/marker", "image": refs[i]})
		req.key = "admin-secret"
		resp, data := ts.call(t, req)
		if res := decodeResult(t, data); resp.StatusCode != http.StatusOK || res.Status != "completed" || res.Stdout != fmt.Sprintf("t%d\n", i) {
			t.Errorf("run in t%d: %d %s", i, resp.StatusCode, data)
		}
		if n, err := store.Usage(); err != nil || n > cfg.Images.MaxStoreBytes {
			t.Errorf("after t%d the store holds %d bytes (%v), over images.max_store_bytes %d", i, n, err, cfg.Images.MaxStoreBytes)
		}
	}
	listed := func() string {
		t.Helper()
		resp, data := ts.get(t, "/api/admin/images", "admin-secret")
		var list ImageList
		if err := json.Unmarshal(data, &list); resp.StatusCode != http.StatusOK || err != nil {
			t.Fatalf("GET /api/admin/images: %d %s", resp.StatusCode, data)
		}
		var got []string
		for _, img := range list.Images {
			got = append(got, strings.TrimPrefix(img.Ref, "oci:"+dir+"/"))
		}
		return strings.Join(got, " ")
	}
	for _, i := range []int{0, 1, 0, 2} {
		run(i)
	}
	if got := listed(); got != "t0:1 t2:1" {
		t.Errorf("after t0, t1, t0, t2 the store lists %q, want t0 and t2", got)
	}
	run(1) // evicted: fetched anew; t0 goes
	if got := listed(); got != "t1:1 t2:1" {
		t.Errorf("after t1 again the store lists %q, want t1 and t2", got)
	}
}
