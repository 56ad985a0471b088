// Package natstest runs a real NATS JetStream cluster for tests: n
// nats-server processes on free 127.0.0.1 ports, routed to each other,
// that a test can kill and restart by index.
//
// The nats-server binary is never linked into the product: it is a tool
// dependency of the module (go.mod's `tool` line, pinned at
// DefaultVersion), built from the module cache like everything else with
// `go tool -n nats-server`. StartCluster takes $SANDBOX_RUN_NATS_SERVER or
// one on PATH first; another version ($NATS_SERVER_VERSION) is built once
// into the test cache (~/.cache/sandbox-run-test/bin) with `go install`.
// When none can be had the test fails under CI=true, and is skipped with
// the reason elsewhere.
package natstest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// DefaultVersion is the nats-server version built when none is found.
const DefaultVersion = "v2.14.9"

// Bounded waits: generous, because the test machines are busy.
const (
	startTimeout = 60 * time.Second
	pollEvery    = 100 * time.Millisecond
)

// Cluster is a running n-node JetStream cluster.
type Cluster struct {
	t      testing.TB
	bin    string
	dir    string
	name   string
	nodes  []*node
	mu     sync.Mutex
	closed bool
}

type node struct {
	name    string
	client  int
	cluster int
	monitor int
	conf    string
	args    []string // after -c conf
	log     string
	cmd     *exec.Cmd
	done    chan struct{} // closed when cmd has been waited for
	waitErr error
	running bool
}

// StartCluster starts n nats-server processes forming one JetStream
// cluster and waits until every one is up and the cluster has a meta
// leader. Everything is stopped (by PID) and waited for at t's cleanup.
func StartCluster(t testing.TB, n int) *Cluster {
	t.Helper()
	if n < 1 {
		t.Fatalf("natstest: cluster of %d nodes", n)
	}
	bin := ServerBinary(t)
	for attempt := 1; ; attempt++ {
		c, err := tryStart(t, bin, n)
		if err == nil {
			return c
		}
		c.stopAll()
		// A port taken between choosing it and the server's bind: choose again.
		if attempt < 3 && strings.Contains(c.logTails(), "address already in use") {
			t.Logf("natstest: a port was taken, starting again: %v", err)
			continue
		}
		t.Fatalf("natstest: %v\n%s", err, c.logTails())
	}
}

func tryStart(t testing.TB, bin string, n int) (*Cluster, error) {
	c := &Cluster{t: t, bin: bin, dir: t.TempDir(), name: "sr-test"}
	ports := freePorts(t, 3*n)
	for i := 0; i < n; i++ {
		c.nodes = append(c.nodes, &node{
			name:    fmt.Sprintf("n%d", i),
			client:  ports[3*i],
			cluster: ports[3*i+1],
			monitor: ports[3*i+2],
		})
	}
	for i, nd := range c.nodes {
		var routes []string
		for j, o := range c.nodes {
			if j != i {
				routes = append(routes, fmt.Sprintf("nats-route://127.0.0.1:%d", o.cluster))
			}
		}
		store := filepath.Join(c.dir, nd.name, "store")
		if err := os.MkdirAll(store, 0o755); err != nil {
			t.Fatal(err)
		}
		conf := fmt.Sprintf(`server_name: %q
listen: "127.0.0.1:%d"
http: "127.0.0.1:%d"
jetstream {
  store_dir: %q
  max_memory_store: 64MB
  max_file_store: 256MB
}
`, nd.name, nd.client, nd.monitor, store)
		if n > 1 {
			conf += fmt.Sprintf(`cluster {
  name: %q
  listen: "127.0.0.1:%d"
  routes: [%s]
}
`, c.name, nd.cluster, quoteJoin(routes))
		}
		nd.conf = filepath.Join(c.dir, nd.name, "server.conf")
		nd.log = filepath.Join(c.dir, nd.name, "server.log")
		if err := os.WriteFile(nd.conf, []byte(conf), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return c, c.startAll()
}

// startAll starts every node (stopped at cleanup) and waits until each is
// ready.
func (c *Cluster) startAll() error {
	c.t.Cleanup(c.stopAll)
	for i := range c.nodes {
		c.start(i)
	}
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	for i := range c.nodes {
		if err := c.waitReady(ctx, i); err != nil {
			return err
		}
	}
	return nil
}

// StartFromConfigs starts a nats-server for each of confs (configuration
// files made elsewhere: `sandbox-run cluster init`'s) whose clients listen
// on clientPorts, with a monitoring port of its own added, and waits until
// every one is up and the cluster has a meta leader. Stopped at cleanup.
func StartFromConfigs(t testing.TB, confs []string, clientPorts []int) *Cluster {
	t.Helper()
	c := &Cluster{t: t, bin: ServerBinary(t), dir: t.TempDir(), name: "from-configs"}
	mon := freePorts(t, len(confs))
	for i, conf := range confs {
		c.nodes = append(c.nodes, &node{name: fmt.Sprintf("n%d", i), client: clientPorts[i], monitor: mon[i], conf: conf,
			args: []string{"-m", fmt.Sprint(mon[i])}, log: filepath.Join(c.dir, fmt.Sprintf("n%d.log", i))})
	}
	if err := c.startAll(); err != nil {
		t.Fatalf("natstest: %v\n%s", err, c.logTails())
	}
	return c
}

// PortRange is the first of n consecutive ports free on 127.0.0.1 (for
// configurations that number their servers' ports from a base). Like
// freePorts, it takes them below the kernel's ephemeral range when it
// can: a range in it was once taken by another test's outgoing connection
// between this check and the server's bind.
func PortRange(t testing.TB, n int) int {
	t.Helper()
	lo, hi := 10000, ephemeralLow()
	for try := 0; try < 50; try++ {
		base := 0
		if hi-lo > 1000+n {
			base = lo + rand.IntN(hi-lo-n)
		} else {
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			base = l.Addr().(*net.TCPAddr).Port
			l.Close()
		}
		if base+n <= 65535 && freeRange(base, n) {
			return base
		}
	}
	t.Fatal("natstest: no free port range")
	return 0
}

// freeRange says whether ports base to base+n-1 are free on 127.0.0.1.
func freeRange(base, n int) bool {
	for p := base; p < base+n; p++ {
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
		if err != nil {
			return false
		}
		l.Close()
	}
	return true
}

func (c *Cluster) URLs() string {
	return strings.Join(c.URLList(), ",")
}

// URLList is the client URL of every node.
func (c *Cluster) URLList() []string {
	var urls []string
	for i := range c.nodes {
		urls = append(urls, c.URL(i))
	}
	return urls
}

// URL is node i's client URL.
func (c *Cluster) URL(i int) string {
	return fmt.Sprintf("nats://127.0.0.1:%d", c.nodes[i].client)
}

// N is the number of nodes.
func (c *Cluster) N() int { return len(c.nodes) }

// PID is node i's process id, 0 when it is not running.
func (c *Cluster) PID(i int) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if nd := c.nodes[i]; nd.running {
		return nd.cmd.Process.Pid
	}
	return 0
}

// Kill sends SIGKILL to node i (by its PID) and waits for it to exit.
func (c *Cluster) Kill(i int) {
	c.t.Helper()
	c.mu.Lock()
	nd := c.nodes[i]
	if !nd.running {
		c.mu.Unlock()
		c.t.Fatalf("natstest: Kill(%d): node is not running", i)
	}
	nd.running = false
	c.mu.Unlock()
	_ = nd.cmd.Process.Kill()
	select {
	case <-nd.done:
	case <-time.After(startTimeout):
		c.t.Fatalf("natstest: node %d (pid %d) did not exit after SIGKILL", i, nd.cmd.Process.Pid)
	}
}

// Restart starts node i again (after Kill), on the same ports and store,
// and waits until it is up and JetStream has a meta leader.
func (c *Cluster) Restart(i int) {
	c.t.Helper()
	c.mu.Lock()
	running := c.nodes[i].running
	c.mu.Unlock()
	if running {
		c.Kill(i)
	}
	c.start(i)
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	if err := c.waitReady(ctx, i); err != nil {
		c.t.Fatalf("natstest: restart: %v\n%s", err, c.logTails())
	}
}

// StartStopped starts every node that is not running (the whole cluster,
// after all were killed: none is ready alone) and waits until all are.
func (c *Cluster) StartStopped() {
	c.t.Helper()
	for i, nd := range c.nodes {
		c.mu.Lock()
		running := nd.running
		c.mu.Unlock()
		if !running {
			c.start(i)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	for i := range c.nodes {
		if err := c.waitReady(ctx, i); err != nil {
			c.t.Fatalf("natstest: start: %v\n%s", err, c.logTails())
		}
	}
}

func (c *Cluster) start(i int) {
	c.t.Helper()
	nd := c.nodes[i]
	logf, err := os.OpenFile(nd.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		c.t.Fatal(err)
	}
	defer logf.Close()
	cmd := exec.Command(c.bin, append([]string{"-c", nd.conf}, nd.args...)...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = sysProcAttr()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		c.t.Fatalf("natstest: cluster already stopped")
	}
	if err := cmd.Start(); err != nil {
		c.t.Fatalf("natstest: start %s: %v", c.bin, err)
	}
	nd.cmd, nd.done, nd.running = cmd, make(chan struct{}), true
	go func(nd *node, cmd *exec.Cmd, done chan struct{}) {
		err := cmd.Wait()
		c.mu.Lock()
		nd.waitErr = err
		c.mu.Unlock()
		close(done)
	}(nd, cmd, nd.done)
}

// stopAll kills every running node by PID and waits for each.
func (c *Cluster) stopAll() {
	c.mu.Lock()
	c.closed = true
	var waits []chan struct{}
	for _, nd := range c.nodes {
		if nd.running {
			nd.running = false
			_ = nd.cmd.Process.Kill()
			waits = append(waits, nd.done)
		}
	}
	c.mu.Unlock()
	for _, w := range waits {
		select {
		case <-w:
		case <-time.After(startTimeout):
			c.t.Errorf("natstest: a nats-server did not exit after SIGKILL")
		}
	}
	if c.t.Failed() {
		c.t.Logf("natstest: server logs:\n%s", c.logTails())
	}
}

// waitReady polls node i's monitoring endpoints until it is healthy
// (JetStream current) and knows a meta leader, or ctx ends.
func (c *Cluster) waitReady(ctx context.Context, i int) error {
	nd := c.nodes[i]
	base := fmt.Sprintf("http://127.0.0.1:%d", nd.monitor)
	client := &http.Client{Timeout: 2 * time.Second}
	var last error
	for {
		select {
		case <-nd.done:
			return fmt.Errorf("node %d exited while starting: %v", i, nd.waitErr)
		default:
		}
		last = checkReady(ctx, client, base, len(c.nodes))
		if last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("node %d not ready: %v", i, last)
		case <-time.After(pollEvery):
		}
	}
}

func checkReady(ctx context.Context, client *http.Client, base string, n int) error {
	get := func(path string, v any) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		var body bytes.Buffer
		_, _ = body.ReadFrom(resp.Body)
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%s: %s: %s", path, resp.Status, strings.TrimSpace(body.String()))
		}
		if v != nil {
			return json.Unmarshal(body.Bytes(), v)
		}
		return nil
	}
	if err := get("/healthz", nil); err != nil {
		return err
	}
	if n == 1 {
		return nil
	}
	var jsz struct {
		Meta *struct {
			Leader string `json:"leader"`
			Size   int    `json:"cluster_size"`
		} `json:"meta_cluster"`
	}
	if err := get("/jsz", &jsz); err != nil {
		return err
	}
	if jsz.Meta == nil || jsz.Meta.Leader == "" {
		return errors.New("no JetStream meta leader yet")
	}
	return nil
}

func (c *Cluster) logTails() string {
	var b strings.Builder
	for _, nd := range c.nodes {
		data, _ := os.ReadFile(nd.log)
		if len(data) > 4000 {
			data = data[len(data)-4000:]
		}
		fmt.Fprintf(&b, "--- %s (%s)\n%s\n", nd.name, nd.log, data)
	}
	return b.String()
}

// freePorts reserves n distinct free TCP ports on 127.0.0.1 (listening on
// all at once so they differ, then releasing them). It takes them below
// the kernel's ephemeral range when it can: an outgoing connection (of
// this or another test binary) is never given such a port, so it stays
// free for the server, and for the same server after Restart.
func freePorts(t testing.TB, n int) []int {
	t.Helper()
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	listen := func(port int) bool {
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			return false
		}
		ls = append(ls, l)
		return true
	}
	lo, hi := 10000, ephemeralLow()
	var ports []int
	for tries := 0; len(ports) < n && hi-lo > 1000 && tries < 100*n; tries++ {
		p := lo + rand.IntN(hi-lo)
		if listen(p) {
			ports = append(ports, p)
		}
	}
	for len(ports) < n {
		if !listen(0) {
			t.Fatalf("natstest: no free port on 127.0.0.1")
		}
		ports = append(ports, ls[len(ls)-1].Addr().(*net.TCPAddr).Port)
	}
	return ports
}

// ephemeralLow is the lowest port the kernel gives outgoing connections
// (Linux's ip_local_port_range; 32768 elsewhere).
func ephemeralLow() int {
	data, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err == nil {
		var lo, hi int
		if _, err := fmt.Sscan(string(data), &lo, &hi); err == nil && lo > 0 {
			return lo
		}
	}
	return 32768
}

func quoteJoin(s []string) string {
	var q []string
	for _, x := range s {
		q = append(q, fmt.Sprintf("%q", x))
	}
	return strings.Join(q, ", ")
}

var (
	binOnce sync.Once
	binPath string
	binErr  error
)

// ServerBinary returns the path of a nats-server binary, building it into
// the test cache when there is none; it skips t when none can be had.
func ServerBinary(t testing.TB) string {
	t.Helper()
	binOnce.Do(func() { binPath, binErr = findOrBuild() })
	if binErr != nil {
		msg := fmt.Sprintf("natstest: no nats-server binary (install one on PATH, or allow `go install github.com/nats-io/nats-server/v2@%s`): %v", DefaultVersion, binErr)
		if os.Getenv("CI") == "true" {
			t.Fatal(msg) // CI must run what needs it: a missing prerequisite fails loudly
		}
		t.Skip(msg)
	}
	return binPath
}

func findOrBuild() (string, error) {
	if p := os.Getenv("SANDBOX_RUN_NATS_SERVER"); p != "" {
		return p, nil
	}
	exe := "nats-server"
	if runtime.GOOS == "windows" {
		exe += ".exe"
	}
	if p, err := exec.LookPath(exe); err == nil {
		return p, nil
	}
	version := os.Getenv("NATS_SERVER_VERSION")
	if version == "" || version == DefaultVersion {
		// The module's own tool, at the version go.mod pins.
		if p, err := goTool(); err == nil {
			return p, nil
		}
		version = DefaultVersion
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	binDir := filepath.Join(cache, "sandbox-run-test", "bin")
	// The version is part of the name so a changed version is rebuilt.
	cached := filepath.Join(binDir, strings.TrimSuffix(exe, ".exe")+"-"+version+filepath.Ext(exe))
	if _, err := os.Stat(cached); err == nil {
		return cached, nil
	}
	if version == DefaultVersion {
		// A binary installed by hand with the documented command.
		if p := filepath.Join(binDir, exe); isVersion(p, version) {
			return p, nil
		}
	}
	goCmd := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(goCmd); err != nil {
		if goCmd, err = exec.LookPath("go"); err != nil {
			return "", errors.New("no go command to build nats-server with")
		}
	}
	if err := os.MkdirAll(binDir, 0o755); err != nil {
		return "", err
	}
	// Build into a private directory, then rename: concurrent test
	// binaries (go test ./... runs packages in parallel) never see half
	// a file.
	tmp, err := os.MkdirTemp(binDir, ".build-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, goCmd, "install", "github.com/nats-io/nats-server/v2@"+version)
	cmd.Dir = tmp
	cmd.Env = append(os.Environ(), "GOBIN="+tmp, "GOFLAGS=-buildvcs=false", "GOWORK=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go install nats-server@%s: %v: %s", version, err, bytes.TrimSpace(out))
	}
	if err := os.Rename(filepath.Join(tmp, exe), cached); err != nil {
		return "", err
	}
	return cached, nil
}

// goTool builds (or finds in the build cache) the module's nats-server
// tool and returns its path.
func goTool() (string, error) {
	goCmd := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(goCmd); err != nil {
		if goCmd, err = exec.LookPath("go"); err != nil {
			return "", err
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, goCmd, "tool", "-n", "nats-server").Output()
	if err != nil {
		return "", fmt.Errorf("go tool -n nats-server: %v", err)
	}
	p := strings.TrimSpace(string(out))
	if _, err := os.Stat(p); err != nil {
		return "", err
	}
	return p, nil
}

// isVersion reports whether the binary at p runs and says it is version.
func isVersion(p, version string) bool {
	out, err := exec.Command(p, "--version").Output()
	return err == nil && strings.Contains(string(out), version)
}
