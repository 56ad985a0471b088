package clustercmd

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/sandbox-run/sandbox-run/internal/testkit/natstest"
	"github.com/sandbox-run/sandbox-run/pkg/cluster"
	"github.com/sandbox-run/sandbox-run/pkg/secrets"
	"github.com/sandbox-run/sandbox-run/pkg/wire"
)

const bounded = 90 * time.Second

// initCluster writes a 3-server cluster with Init and starts it from the
// files it wrote.
func initCluster(t *testing.T) (dir, urls string) {
	t.Helper()
	dir = t.TempDir()
	p := natstest.PortRange(t, 6)
	out, err := Init(InitOptions{Dir: dir, Nodes: 3, Host: "127.0.0.1", ClientPortBase: p, RoutePortBase: p + 3})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"nats-server -c " + filepath.Join(dir, "nats-1.conf"), "--nats-creds " + filepath.Join(dir, "api.creds"),
		"--nats-creds " + filepath.Join(dir, "worker.creds")} {
		if !strings.Contains(out, want) {
			t.Fatalf("init's output names no %q:\n%s", want, out)
		}
	}
	for _, f := range []string{"api.creds", "worker.creds", "nats-1.conf"} {
		if st, err := os.Stat(filepath.Join(dir, f)); err != nil || st.Mode().Perm() != 0o600 {
			t.Fatalf("%s: %v %v", f, st.Mode(), err)
		}
	}
	if _, err := Init(InitOptions{Dir: dir, Nodes: 3, Host: "127.0.0.1", ClientPortBase: p, RoutePortBase: p + 3}); err == nil {
		t.Fatal("a second init wrote over the first")
	}
	var confs []string
	var ports []int
	for i := 0; i < 3; i++ {
		confs = append(confs, filepath.Join(dir, fmt.Sprintf("nats-%d.conf", i+1)))
		ports = append(ports, p+i)
	}
	nc := natstest.StartFromConfigs(t, confs, ports)
	return dir, nc.URLs()
}

// connectAs is a NATS connection with a role's credentials file.
func connectAs(t *testing.T, urls, creds string, errs chan<- error) *nats.Conn {
	t.Helper()
	cr, err := cluster.ReadCredentials(creds)
	if err != nil {
		t.Fatal(err)
	}
	kp, err := nkeys.FromSeed([]byte(cr.Seed))
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := kp.PublicKey()
	nc, err := nats.Connect(urls, nats.Nkey(pub, kp.Sign), nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
		select {
		case errs <- err:
		default:
		}
	}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// TestInitSecuresNATS: a cluster from `cluster init` lets in no anonymous
// client, gives each role only its subjects (a worker's credentials cannot
// submit a job nor an API node's answer for a worker), runs jobs between
// nodes that log in with the files it wrote and sign with their keys, and
// keeps nothing of a job in clear on disk (JetStream encrypted at rest).
// A node refuses a NATS server that lets anyone in.
func TestInitSecuresNATS(t *testing.T) {
	dir, urls := initCluster(t)
	if _, err := nats.Connect(urls); err == nil || !strings.Contains(strings.ToLower(err.Error()), "authorization") {
		t.Fatalf("an anonymous client: %v", err)
	}

	errs := make(chan error, 16)
	wnc := connectAs(t, urls, filepath.Join(dir, "worker.creds"), errs)
	ctx, cancel := context.WithTimeout(context.Background(), bounded)
	defer cancel()

	// Nodes with the files: an API node and a worker.
	connect := func(name, creds string) *cluster.Conn {
		c, err := cluster.Connect(ctx, cluster.Options{URLs: strings.Split(urls, ","), Name: name, CredsFile: filepath.Join(dir, creds)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		if !c.Signing() {
			t.Fatalf("%s does not sign with %s", name, creds)
		}
		return c
	}
	api, wk := connect("api", "api.creds"), connect("worker", "worker.creds")
	wctx, stopWork := context.WithCancel(context.Background())
	worked := make(chan error, 1)
	go func() {
		worked <- wk.Work(wctx, 2, func(ctx context.Context, job cluster.Job, emit func(wire.Event)) (*wire.Result, error) {
			r := &wire.Result{ExecutionID: job.ID}
			r.Stdout = fmt.Sprintf("%d bytes of env", len(job.Request.Env["SECRET"]))
			return r, nil
		})
	}()
	defer func() { stopWork(); <-worked }()

	// A job with a secret in its env and files: it runs, and its secret is
	// nowhere on the servers' disks.
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	secret := "SRSECRET" + hex.EncodeToString(b)
	res, err := api.Run(ctx, cluster.Job{ID: "exec-secret", Deadline: time.Now().Add(time.Minute),
		Request: wire.ExecuteRequest{Language: "bash", Code: "true", Env: map[string]string{"SECRET": secret},
			Files: map[string]wire.FileData{"secret.txt": wire.FileData(secret)}}}, nil)
	if err != nil || res.Stdout != fmt.Sprintf("%d bytes of env", len(secret)) || res.Worker == "" {
		t.Fatalf("%+v, %v", res, err)
	}

	// The worker's credentials may not submit a job (the stream never
	// sees it) ...
	_ = wnc.Publish("sandbox-run.runs.sync", []byte(`{"id":"exec-injected"}`))
	// ... nor cancel a run; an API node's may not answer for a worker.
	_ = wnc.Publish("sandbox-run.cancel.exec-x", nil)
	anc := connectAs(t, urls, filepath.Join(dir, "api.creds"), errs)
	_ = anc.Publish("sandbox-run.reply.exec-x", []byte("{}"))
	_ = anc.Publish("sandbox-run.out.exec-x", []byte("{}"))
	_ = wnc.Flush()
	_ = anc.Flush()
	for denied := 0; denied < 4; {
		select {
		case err := <-errs:
			if !errors.Is(err, nats.ErrPermissionViolation) && !strings.Contains(err.Error(), "ermission") {
				t.Fatalf("unexpected: %v", err)
			}
			denied++
		case <-time.After(bounded):
			t.Fatalf("%d of 4 publishes refused", denied)
		}
	}

	time.Sleep(time.Second) // the servers write what they have
	var found []string
	files := 0
	_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || strings.HasSuffix(p, ".conf") || strings.HasSuffix(p, ".creds") {
			return nil
		}
		files++
		if data, err := os.ReadFile(p); err == nil && bytes.Contains(data, []byte(secret)) {
			found = append(found, p)
		}
		return nil
	})
	if files < 10 || len(found) > 0 {
		t.Fatalf("%d files searched; the secret is in clear in %v", files, found)
	}
}

// TestNodeRefusesOpenNATS: a node refuses a NATS server that lets anyone
// in, saying what to do, unless told it may.
func TestNodeRefusesOpenNATS(t *testing.T) {
	nc := natstest.StartCluster(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), bounded)
	defer cancel()
	_, err := cluster.Connect(ctx, cluster.Options{URLs: nc.URLList()})
	if !errors.Is(err, cluster.ErrInsecure) || !strings.Contains(err.Error(), "--nats-insecure") || !strings.Contains(err.Error(), "cluster init") {
		t.Fatalf("%v", err)
	}
	c, err := cluster.Connect(ctx, cluster.Options{URLs: nc.URLList(), Insecure: true})
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
}

// TestInitTLS: with certificates, the servers require TLS from clients and
// routes; a node that verifies them with the CA joins, a plain one cannot.
func TestInitTLS(t *testing.T) {
	dir := t.TempDir()
	ca, cert, key := testCerts(t, dir)
	p := natstest.PortRange(t, 6)
	if _, err := Init(InitOptions{Dir: filepath.Join(dir, "c"), Nodes: 3, Host: "127.0.0.1", ClientPortBase: p, RoutePortBase: p + 3,
		TLSCert: cert, TLSKey: key, TLSCA: ca}); err != nil {
		t.Fatal(err)
	}
	var confs []string
	for i := 1; i <= 3; i++ {
		confs = append(confs, filepath.Join(dir, "c", fmt.Sprintf("nats-%d.conf", i)))
	}
	natstest.StartFromConfigs(t, confs, []int{p, p + 1, p + 2})
	urls := []string{fmt.Sprintf("tls://127.0.0.1:%d", p), fmt.Sprintf("tls://127.0.0.1:%d", p+1)}
	ctx, cancel := context.WithTimeout(context.Background(), bounded)
	defer cancel()
	c, err := cluster.Connect(ctx, cluster.Options{URLs: urls, CAFile: ca, CredsFile: filepath.Join(dir, "c", "api.creds")})
	if err != nil {
		t.Fatal(err)
	}
	h := c.Health(ctx)
	c.Close()
	if !h.OK() || len(h.Servers) < 3 {
		t.Fatalf("over TLS: %+v", h)
	}
	if _, err := cluster.Connect(ctx, cluster.Options{URLs: urls[:1], CredsFile: filepath.Join(dir, "c", "api.creds")}); err == nil {
		t.Fatal("a node that does not trust the CA joined")
	}
}

// testCerts writes a CA and a certificate for 127.0.0.1 it signed (good
// for servers and, as routes need, clients).
func testCerts(t *testing.T, dir string) (ca, cert, key string) {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"}, IsCA: true,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	srvKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	srvTmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
	srvDER, err := x509.CreateCertificate(rand.Reader, srvTmpl, caTmpl, &srvKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	kb, _ := x509.MarshalECPrivateKey(srvKey)
	write := func(name, typ string, der []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	return write("ca.pem", "CERTIFICATE", caDER), write("server.pem", "CERTIFICATE", srvDER), write("server-key.pem", "EC PRIVATE KEY", kb)
}

// TestInitSecretsKey: both roles' credentials hold one secrets key, with
// which an API node seals a secret into the cluster's store and a worker
// opens it; a worker's credentials may neither write the store nor purge
// it.
func TestInitSecretsKey(t *testing.T) {
	dir, urls := initCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), bounded)
	defer cancel()
	connect := func(name, creds string) *cluster.Conn {
		c, err := cluster.Connect(ctx, cluster.Options{URLs: strings.Split(urls, ","), Name: name, CredsFile: filepath.Join(dir, creds)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		return c
	}
	api, wk := connect("api", "api.creds"), connect("worker", "worker.creds")
	if len(api.SecretsKey()) != secrets.KeySize || !bytes.Equal(api.SecretsKey(), wk.SecretsKey()) {
		t.Fatal("the roles' credentials do not share one secrets key")
	}
	store := func(c *cluster.Conn, worker bool) *secrets.Store {
		b := c.SecretBackend(worker)
		st, err := secrets.New(b, c.SecretsKey())
		if err != nil {
			t.Fatal(err)
		}
		if err := c.CheckSecretsKey(ctx, b, st.KeyID()); err != nil {
			t.Fatal(err)
		}
		return st
	}
	ast, wst := store(api, false), store(wk, true)
	if _, err := ast.Put("team", secrets.Secret{Name: "TOKEN", Value: "v-1", Hosts: []string{"example.com"}}); err != nil {
		t.Fatal(err)
	}
	if got, err := wst.Get("team", []string{"TOKEN"}); err != nil || got[0].Value != "v-1" {
		t.Fatalf("the worker reads %+v, %v", got, err)
	}

	errs := make(chan error, 4)
	wnc := connectAs(t, urls, filepath.Join(dir, "worker.creds"), errs)
	_ = wnc.Publish("$KV.SR_SECRETS.forged", []byte("{}"))
	if _, err := wnc.Request("$JS.API.STREAM.PURGE.KV_SR_SECRETS", nil, 5*time.Second); err == nil {
		t.Fatal("a worker's purge of the secrets was answered")
	}
	_ = wnc.Flush()
	for denied := 0; denied < 2; {
		select {
		case err := <-errs:
			if !errors.Is(err, nats.ErrPermissionViolation) && !strings.Contains(err.Error(), "ermission") {
				t.Fatalf("unexpected: %v", err)
			}
			denied++
		case <-time.After(bounded):
			t.Fatalf("%d of 2 refused", denied)
		}
	}
	if got, err := wst.Get("team", []string{"TOKEN"}); err != nil || got[0].Value != "v-1" {
		t.Fatalf("after the worker's attempts: %+v, %v", got, err)
	}
}
