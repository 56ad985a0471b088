package e2b

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sandbox-run/sandbox-run/pkg/live"
	"github.com/sandbox-run/sandbox-run/pkg/runner"
	"github.com/sandbox-run/sandbox-run/pkg/wire"
)

// The control plane: sandboxes created, listed, described, kept alive and
// killed, behind the server's API keys (another key's sandbox is 404).

func (d *Door) routeControl() {
	d.mux.HandleFunc("POST /v2/sandboxes", d.create)
	d.mux.HandleFunc("GET /v2/sandboxes", d.list)
	d.mux.HandleFunc("GET /sandboxes", d.list)
	d.mux.HandleFunc("POST /v2/sandboxes/{id}/connect", d.connect)
	d.mux.HandleFunc("GET /sandboxes/{id}", d.info)
	d.mux.HandleFunc("DELETE /sandboxes/{id}", d.kill)
	d.mux.HandleFunc("POST /sandboxes/{id}/timeout", d.setTimeout)
	d.mux.HandleFunc("GET /sandboxes/{id}/metrics", d.metrics)
	d.mux.HandleFunc("POST /sandboxes/{id}/refreshes", d.refresh)
	d.mux.HandleFunc("POST /sandboxes/{id}/pause", d.pause)
	d.mux.HandleFunc("POST /sandboxes/{id}/resume", d.resume)
	d.mux.HandleFunc("POST /sandboxes/{id}/snapshots", d.snapshot)
	d.mux.HandleFunc("GET /snapshots", d.snapshots)
	d.mux.HandleFunc("DELETE /templates/{id}", d.deleteSnapshot)
	d.mux.HandleFunc("POST /sandboxes/{id}/fork", d.fork)
	d.mux.HandleFunc("PUT /sandboxes/{id}/network", d.updateNetwork)
	d.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "no such endpoint: "+r.Method+" "+r.URL.Path)
	})
}

// createRequest is POST /v2/sandboxes's body.
type createRequest struct {
	TemplateID          string            `json:"templateID"`
	Metadata            map[string]string `json:"metadata"`
	EnvVars             map[string]string `json:"envVars"`
	Timeout             *int              `json:"timeout"`
	AllowInternetAccess *bool             `json:"allow_internet_access"`
	Network             *struct {
		AllowOut           []string `json:"allowOut"`
		DenyOut            []string `json:"denyOut"`
		AllowPublicTraffic *bool    `json:"allowPublicTraffic"`
	} `json:"network"`
	AutoPause bool `json:"autoPause"`
}

// sandboxJSON is a sandbox as create and connect answer it.
type sandboxJSON struct {
	SandboxID          string  `json:"sandboxID"`
	TemplateID         string  `json:"templateID"`
	Alias              string  `json:"alias,omitempty"`
	ClientID           string  `json:"clientID"`
	EnvdVersion        string  `json:"envdVersion"`
	EnvdAccessToken    string  `json:"envdAccessToken"`
	TrafficAccessToken *string `json:"trafficAccessToken"`
	Domain             string  `json:"domain,omitempty"`
}

// detailJSON is a sandbox as getInfo and list answer it.
type detailJSON struct {
	SandboxID   string            `json:"sandboxID"`
	TemplateID  string            `json:"templateID"`
	Alias       string            `json:"alias,omitempty"`
	ClientID    string            `json:"clientID"`
	CPUCount    int               `json:"cpuCount"`
	MemoryMB    int64             `json:"memoryMB"`
	DiskSizeMB  int64             `json:"diskSizeMB"`
	EnvdVersion string            `json:"envdVersion"`
	StartedAt   time.Time         `json:"startedAt"`
	EndAt       time.Time         `json:"endAt"`
	State       string            `json:"state"`
	Metadata    map[string]string `json:"metadata"`
	Domain      string            `json:"domain,omitempty"`
	Lifecycle   lifecycleJSON     `json:"lifecycle"`
	// AllowInternetAccess and Network say what its network may reach.
	AllowInternetAccess bool        `json:"allowInternetAccess"`
	Network             networkJSON `json:"network"`
}

// lifecycleJSON is what a sandbox's timeout does (kill, or pause when it
// was made with autoPause) and whether a call resumes it (always here).
type lifecycleJSON struct {
	OnTimeout  string `json:"onTimeout"`
	AutoResume bool   `json:"autoResume"`
}

// networkJSON is a sandbox's network as getInfo answers it.
type networkJSON struct {
	AllowOut []string `json:"allowOut"`
	DenyOut  []string `json:"denyOut"`
}

const clientID = "sandbox-run"

func (d *Door) create(w http.ResponseWriter, r *http.Request) {
	var req createRequest
	if err := decode(r, &req); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	// The run service's templates: base, code-interpreter-v1, a language's
	// name or names joined with + (an unknown one is 404, as E2B's).
	// A template that names an OCI image (python:3.12, ghcr.io/x/y:tag)
	// makes a sandbox of its root, when the server's images.allow lets it.
	tpl, err := d.svc.LiveTemplate(req.TemplateID)
	image, snapshot := "", ""
	if err != nil && strings.ContainsAny(req.TemplateID, ":/") {
		tpl, image, err = runner.LiveTemplate{Name: req.TemplateID}, req.TemplateID, nil
	}
	if err != nil {
		// A snapshot's id or name (createSnapshot): the sandbox starts
		// with its files.
		if sn := d.findSnapshot(r, req.TemplateID); sn != nil {
			tpl, snapshot, err = runner.LiveTemplate{Name: sn.Options.Template, Default: true}, sn.ID, nil
		}
	}
	if err != nil {
		writeError(w, http.StatusNotFound, err.Error())
		return
	}
	var allow, deny []string
	if n := req.Network; n != nil {
		allow, deny = n.AllowOut, n.DenyOut
	}
	network, err := d.network(allow, deny, req.AllowInternetAccess)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	o := live.CreateOptions{Env: req.EnvVars, Metadata: req.Metadata, Template: tpl.Name, Network: network, AutoPause: req.AutoPause,
		PrivatePorts: req.Network != nil && req.Network.AllowPublicTraffic != nil && !*req.Network.AllowPublicTraffic}
	if !tpl.Default {
		o.Languages = tpl.Languages // base: the server's defaults
	}
	o.Image, o.Snapshot = image, snapshot
	if req.Timeout != nil {
		if *req.Timeout <= 0 {
			writeError(w, http.StatusBadRequest, "timeout must be a positive number of seconds")
			return
		}
		o.Timeout = time.Duration(*req.Timeout) * time.Second
	}
	sb, err := d.svc.CreateLive(r.Context(), caller(r), o)
	if err != nil {
		writeRunnerError(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, d.sandboxJSON(r, sb))
}

// network is what req's sandbox's network may reach (nil: none): the
// hosts of network.allowOut, or with allow_internet_access and no list,
// everything the server lets a sandbox reach (its network.allow). What
// is not allowed is denied, so denyOut adds nothing to an allowOut list;
// without one, it can only deny everything (0.0.0.0/0): this server
// allows by list and subtracts nothing from its maximum.
func (d *Door) network(allow, deny []string, internet *bool) ([]string, error) {
	if len(allow) > 0 {
		return slices.Clone(allow), nil
	}
	if internet == nil || !*internet {
		return nil, nil
	}
	if len(deny) > 0 {
		if slices.ContainsFunc(deny, func(c string) bool { return c != "0.0.0.0/0" }) {
			return nil, errors.New("network.denyOut: give it with allowOut (what is not allowed is denied), or 0.0.0.0/0 alone: this server allows destinations by list and does not subtract from its maximum")
		}
		return nil, nil
	}
	max := d.svc.NetworkMaximum()
	if len(max) == 0 {
		return nil, errors.New("this server gives sandboxes no internet access (its network.allow is empty): leave allow_internet_access out, or list destinations in network.allowOut")
	}
	return max, nil
}

func (d *Door) sandboxJSON(r *http.Request, sb *live.Sandbox) sandboxJSON {
	// The traffic token is the access token: the code interpreter sends
	// it on every call (the access token on /execute only), and a sandbox
	// created with allowPublicTraffic false wants it on its ports.
	tok := sb.Token
	return sandboxJSON{SandboxID: sb.ID, TemplateID: sb.Template, Alias: sb.Template, ClientID: clientID, EnvdVersion: EnvdVersion,
		EnvdAccessToken: sb.Token, TrafficAccessToken: &tok, Domain: d.domainFor(r)}
}

func (d *Door) detail(r *http.Request, sb *live.Sandbox) detailJSON {
	md := sb.Metadata
	if md == nil {
		md = map[string]string{}
	}
	lc := lifecycleJSON{OnTimeout: "kill", AutoResume: true}
	if sb.AutoPause {
		lc.OnTimeout = "pause"
	}
	return detailJSON{SandboxID: sb.ID, TemplateID: sb.Template, Alias: sb.Template, ClientID: clientID, CPUCount: 1,
		MemoryMB: sb.Memory >> 20, EnvdVersion: EnvdVersion, StartedAt: sb.Started.UTC(), EndAt: sb.End().UTC(),
		State: sb.State(), Metadata: md, Domain: d.domainFor(r), AllowInternetAccess: len(sb.Network) > 0, Lifecycle: lc,
		Network: networkJSON{AllowOut: append([]string{}, sb.Network...), DenyOut: []string{}}}
}

// domainFor is the domain of sandboxes' ports (getHost): the configured
// one, or sandbox.<the Host the client used> (sandbox.localhost:PORT for a
// loopback address, which resolves to this machine).
func (d *Door) domainFor(r *http.Request) string {
	if d.domain != "" {
		return d.domain
	}
	host, port, err := net.SplitHostPort(r.Host)
	if err != nil {
		host, port = r.Host, ""
	}
	if ip := net.ParseIP(strings.Trim(host, "[]")); (ip != nil && ip.IsLoopback()) || host == "localhost" {
		host = "localhost"
	}
	if port != "" {
		return "sandbox." + host + ":" + port
	}
	return "sandbox." + host
}

func (d *Door) list(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	want, err := url.ParseQuery(q.Get("metadata"))
	if err != nil {
		writeError(w, http.StatusBadRequest, "metadata: want k=v&k2=v2, URL-encoded")
		return
	}
	var states []string // state=running,paused or state=running&state=paused
	for _, v := range q["state"] {
		for _, st := range strings.Split(v, ",") {
			if st = strings.TrimSpace(st); st != "" {
				states = append(states, st)
			}
		}
	}
	limit := 100
	if l := q.Get("limit"); l != "" {
		if limit, err = strconv.Atoi(l); err != nil || limit <= 0 {
			writeError(w, http.StatusBadRequest, "limit: want a positive number")
			return
		}
	}
	out := []detailJSON{}
	m := d.svc.Live()
	if m == nil {
		writeJSON(w, http.StatusOK, out)
		return
	}
	for _, sb := range m.List(caller(r).Tenant()) {
		match := len(states) == 0 || slices.Contains(states, sb.State())
		for k := range want {
			if sb.Metadata[k] != want.Get(k) {
				match = false
			}
		}
		if match && len(out) < limit {
			out = append(out, d.detail(r, sb))
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// pause is Sandbox.pause: 204, or 409 when it is paused already.
func (d *Door) pause(w http.ResponseWriter, r *http.Request) {
	if err := d.svc.PauseLive(r.Context(), caller(r), r.PathValue("id")); err != nil {
		writeRunnerError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// updateNetwork is E2B's network update (PUT /sandboxes/{id}/network):
// what the sandbox may reach, as its create's network says it (allowOut,
// denyOut, allow_internet_access; none of them: nothing), changed at once,
// its open connections the new list leaves out reset, its byte budgets
// kept for the entries it keeps. A sandbox made without a network cannot
// be given one (400).
func (d *Door) updateNetwork(w http.ResponseWriter, r *http.Request) {
	var req struct {
		AllowOut            []string `json:"allowOut"`
		DenyOut             []string `json:"denyOut"`
		AllowInternetAccess *bool    `json:"allow_internet_access"`
	}
	if err := decode(r, &req); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	allow, err := d.network(req.AllowOut, req.DenyOut, req.AllowInternetAccess)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	// E2B names no budgets: the entries it keeps keep theirs.
	n := wire.NetworkRequest{Allow: allow}
	if sb, err := d.svc.LiveSandbox(caller(r), r.PathValue("id")); err == nil {
		n.Budgets = sb.KeptBudgets(allow)
	}
	if err := d.svc.SetLiveNetwork(caller(r), r.PathValue("id"), n); err != nil {
		writeRunnerError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// resume is the older SDKs' resume: 201 with the sandbox, or 409 when it
// was not paused.
func (d *Door) resume(w http.ResponseWriter, r *http.Request) {
	sb, timeout, ok := d.ownedTimeout(w, r)
	if !ok {
		return
	}
	if !sb.Paused() {
		writeError(w, http.StatusConflict, "the sandbox is not paused")
		return
	}
	if _, err := d.svc.ResumeLive(caller(r), sb.ID, timeout); err != nil {
		writeRunnerError(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, d.sandboxJSON(r, sb))
}

// ownedTimeout is owned with the timeout the body gives (0: none), or
// false once answered (400 for a body that is not one).
func (d *Door) ownedTimeout(w http.ResponseWriter, r *http.Request) (*live.Sandbox, time.Duration, bool) {
	var b timeoutBody
	if err := decode(r, &b); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return nil, 0, false
	}
	sb, ok := d.owned(w, r)
	return sb, b.seconds(), ok
}

// owned is the caller's sandbox {id}, or false once answered.
func (d *Door) owned(w http.ResponseWriter, r *http.Request) (*live.Sandbox, bool) {
	sb, err := d.svc.LiveSandbox(caller(r), r.PathValue("id"))
	if err != nil {
		writeRunnerError(w, err)
		return nil, false
	}
	return sb, true
}

func (d *Door) info(w http.ResponseWriter, r *http.Request) {
	if sb, ok := d.owned(w, r); ok {
		writeJSON(w, http.StatusOK, d.detail(r, sb))
	}
}

func (d *Door) kill(w http.ResponseWriter, r *http.Request) {
	if err := d.svc.KillLive(caller(r), r.PathValue("id")); err != nil {
		writeRunnerError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// timeoutBody is the body of connect, resume, timeout and refreshes.
type timeoutBody struct {
	Timeout  *int `json:"timeout"`
	Duration *int `json:"duration"`
}

// seconds is its timeout (0: none given).
func (b timeoutBody) seconds() time.Duration {
	if b.Timeout == nil || *b.Timeout <= 0 {
		return 0
	}
	return time.Duration(*b.Timeout) * time.Second
}

func (d *Door) setTimeout(w http.ResponseWriter, r *http.Request) {
	var b timeoutBody
	if err := decode(r, &b); err != nil || b.Timeout == nil {
		writeError(w, http.StatusBadRequest, "want {\"timeout\": seconds}")
		return
	}
	if err := d.svc.SetLiveTimeout(caller(r), r.PathValue("id"), time.Duration(*b.Timeout)*time.Second); err != nil {
		writeRunnerError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (d *Door) refresh(w http.ResponseWriter, r *http.Request) {
	var b timeoutBody
	_ = decode(r, &b)
	secs := 60
	if b.Duration != nil {
		secs = *b.Duration
	}
	if err := d.svc.SetLiveTimeout(caller(r), r.PathValue("id"), time.Duration(secs)*time.Second); err != nil {
		writeRunnerError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// connect is Sandbox.connect: the sandbox as create answered it (201 when
// it was paused and is resumed, 200 when it ran), its timeout set anew
// when the call gives one.
func (d *Door) connect(w http.ResponseWriter, r *http.Request) {
	sb, timeout, ok := d.ownedTimeout(w, r)
	if !ok {
		return
	}
	resumed, err := d.svc.ResumeLive(caller(r), sb.ID, timeout)
	if err != nil {
		writeRunnerError(w, err)
		return
	}
	status := http.StatusOK
	if resumed {
		status = http.StatusCreated
	}
	writeJSON(w, status, d.sandboxJSON(r, sb))
}

// metricsJSON is one point of GET /sandboxes/{id}/metrics.
type metricsJSON struct {
	Timestamp     time.Time `json:"timestamp"`
	TimestampUnix int64     `json:"timestampUnix"`
	CPUCount      int       `json:"cpuCount"`
	CPUUsedPct    float64   `json:"cpuUsedPct"`
	MemUsed       int64     `json:"memUsed"`
	MemTotal      int64     `json:"memTotal"`
	DiskUsed      int64     `json:"diskUsed"`
	DiskTotal     int64     `json:"diskTotal"`
}

func (d *Door) metrics(w http.ResponseWriter, r *http.Request) {
	sb, ok := d.owned(w, r)
	if !ok {
		return
	}
	st, err := sb.Stats()
	if err != nil {
		writeError(w, http.StatusNotFound, "the sandbox has ended")
		return
	}
	// CPU over its life so far: what its processes used of one CPU.
	now := time.Now().UTC()
	pct := 0.0
	if wall := now.Sub(sb.Started); wall > 0 {
		pct = 100 * float64(st.CPU) / float64(wall)
	}
	writeJSON(w, http.StatusOK, []metricsJSON{{Timestamp: now, TimestampUnix: now.Unix(), CPUCount: 1, CPUUsedPct: pct,
		MemUsed: st.Memory, MemTotal: sb.Memory, DiskUsed: st.Disk, DiskTotal: st.DiskTotal}})
}

// decode reads a JSON body (an empty one is {}).
func decode(r *http.Request, v any) error {
	b, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		return err
	}
	if len(strings.TrimSpace(string(b))) == 0 {
		return nil
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("the body is not the JSON expected: %v", err)
	}
	return nil
}

// writeRunnerError answers a run service's refusal in the control plane's
// shape.
func writeRunnerError(w http.ResponseWriter, err error) {
	var e *runner.Error
	if errors.As(err, &e) && e.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(int((e.RetryAfter+time.Second-1)/time.Second)))
	}
	status, msg := runnerStatus(err)
	writeError(w, status, msg)
}
