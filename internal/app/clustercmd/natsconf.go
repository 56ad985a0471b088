package clustercmd

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/sandbox-run/sandbox-run/pkg/cluster"
	"github.com/sandbox-run/sandbox-run/pkg/secrets"
)

// InitOptions say what `cluster init` writes.
type InitOptions struct {
	Dir                           string
	Nodes                         int
	Host                          string
	ClientPortBase, RoutePortBase int
	// TLS: the servers' certificate and key, and the CA that verifies
	// them (and the routes' peers); all three or none.
	TLSCert, TLSKey, TLSCA string
	// Force overwrites what Dir holds already.
	Force bool
}

// The subjects each role may use (docs/CLUSTER.md, "Threat model"). An API
// node submits jobs, cancels them, sends stdin and session calls, reads
// results and events, and keeps jobs, sessions and files; it may not take
// jobs nor answer for a worker. A worker takes jobs, acknowledges them,
// publishes results, events and pings, and keeps its presence, jobs'
// results and sessions' files; it may not submit jobs, cancel runs,
// delete the queue, nor write or purge the secrets (it reads them). Both answer the requests they receive
// (allow_responses) and nothing else's inbox.
var (
	apiPublish = []string{"$JS.API.>", "$JS.FC.>", "$KV.SR_JOBS.>", "$KV.SR_SESSIONS.>", "$KV.SR_WORKERS.>", "$KV.SR_LIVE.>", "$KV.SR_SECRETS.>", "$O.>",
		"sandbox-run.runs.>", "sandbox-run.cancel.>", "sandbox-run.stdin.>", "sandbox-run.w.>"}
	apiPublishDeny = []string{"$JS.API.CONSUMER.MSG.NEXT.SR_RUNS.>", "$JS.API.STREAM.DELETE.>", "$JS.ACK.SR_RUNS.>"}
	apiSubscribe   = []string{"_INBOX.>", "sandbox-run.>", "$JS.EVENT.ADVISORY.>"}

	workerPublish = []string{"$JS.API.>", "$JS.ACK.SR_RUNS.>", "$JS.FC.>", "$KV.SR_WORKERS.>", "$KV.SR_JOBS.>", "$KV.SR_SESSIONS.>", "$KV.SR_LIVE.>",
		"$O.>", "sandbox-run.reply.>", "sandbox-run.out.>", "sandbox-run.ping.>", "sandbox-run.w.>"}
	workerPublishDeny = []string{"$JS.API.STREAM.DELETE.>", "$JS.API.STREAM.PURGE." + cluster.StreamName,
		"$JS.API.STREAM.MSG.DELETE." + cluster.StreamName, "$JS.API.STREAM.PURGE.KV_" + cluster.SecretsBucket,
		"$JS.API.STREAM.MSG.DELETE.KV_" + cluster.SecretsBucket, "$JS.API.STREAM.UPDATE.KV_" + cluster.SecretsBucket,
		"sandbox-run.runs.>", "sandbox-run.cancel.>"}
	workerSubscribe = []string{"_INBOX.>", "sandbox-run.cancel.>", "sandbox-run.stdin.>", "sandbox-run.w.>"}
)

// Init writes a NATS cluster's configuration and the credentials of each
// role into o.Dir, and returns the commands that start it.
func Init(o InitOptions) (string, error) {
	if o.Dir == "" {
		return "", errors.New("give --dir DIR: where the configuration and credentials go")
	}
	if o.Nodes < 1 || o.Nodes > 64 {
		return "", fmt.Errorf("--nodes %d: give 1 to 64 (3 for a cluster that survives one node)", o.Nodes)
	}
	if (o.TLSCert != "" || o.TLSKey != "" || o.TLSCA != "") && (o.TLSCert == "" || o.TLSKey == "" || o.TLSCA == "") {
		return "", errors.New("TLS needs all of --tls-cert, --tls-key and --tls-ca")
	}
	for _, p := range []int{o.ClientPortBase, o.RoutePortBase} {
		if p < 1 || p+o.Nodes-1 > 65535 {
			return "", fmt.Errorf("port base %d: the ports must be within 1-65535", p)
		}
	}
	if o.ClientPortBase < o.RoutePortBase+o.Nodes && o.RoutePortBase < o.ClientPortBase+o.Nodes {
		return "", errors.New("the client and cluster port ranges overlap")
	}
	dir, err := filepath.Abs(o.Dir)
	if err != nil {
		return "", err
	}
	files := map[string][]byte{}
	apiNATS, apiNATSPub, err := cluster.NewSeed()
	if err != nil {
		return "", err
	}
	workerNATS, workerNATSPub, _ := cluster.NewSeed()
	apiSign, apiSignPub, _ := cluster.NewSeed()
	workerSign, workerSignPub, _ := cluster.NewSeed()
	// One secrets key for the whole cluster: API nodes seal secrets
	// with it, workers open them as runs start.
	secretsKey := make([]byte, secrets.KeySize)
	rand.Read(secretsKey)
	files["api.creds"] = cluster.FormatCredentials(cluster.RoleAPI, apiNATS, apiSign, apiSignPub, workerSignPub, secretsKey)
	files["worker.creds"] = cluster.FormatCredentials(cluster.RoleWorker, workerNATS, workerSign, apiSignPub, workerSignPub, secretsKey)
	files["auth.conf"] = []byte(authConf(apiNATSPub, workerNATSPub))
	routePass := randomHex(24)
	scheme := "nats"
	if o.TLSCert != "" {
		scheme = "tls"
	}
	var urls, starts []string
	for i := 1; i <= o.Nodes; i++ {
		name := fmt.Sprintf("nats-%d", i)
		files[name+".conf"] = []byte(nodeConf(o, dir, i, routePass))
		urls = append(urls, fmt.Sprintf("%s://%s", scheme, hostPort(o.Host, o.ClientPortBase+i-1)))
		starts = append(starts, "  nats-server -c "+filepath.Join(dir, name+".conf"))
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	if !o.Force {
		for name := range files {
			if _, err := os.Lstat(filepath.Join(dir, name)); err == nil {
				return "", fmt.Errorf("%s exists already: give another --dir, or --force to write over it (the nodes then need the new credentials)", filepath.Join(dir, name))
			}
		}
	}
	for name, data := range files {
		if err := writeFile(filepath.Join(dir, name), data); err != nil {
			return "", err
		}
	}
	for i := 1; i <= o.Nodes; i++ {
		if err := os.MkdirAll(filepath.Join(dir, fmt.Sprintf("nats-%d", i)), 0o700); err != nil {
			return "", err
		}
	}
	tlsFlag := ""
	if o.TLSCA != "" {
		tlsFlag = " --nats-ca " + o.TLSCA
	}
	all := strings.Join(urls, ",")
	var b strings.Builder
	fmt.Fprintf(&b, "Wrote %s: nats-1.conf..nats-%d.conf (with auth.conf), api.creds, worker.creds.\n\n", dir, o.Nodes)
	b.WriteString("NATS: per-role users (NKeys) with subject permissions, JetStream encrypted at rest, route\n")
	b.WriteString("authentication. Copy each nats-N.conf with auth.conf to its host (store_dir is in the file).\n\n")
	b.WriteString("Start the NATS servers:\n" + strings.Join(starts, "\n") + "\n\n")
	b.WriteString("Then the API nodes (api.creds) and the workers (worker.creds), each file on its own role's hosts only:\n")
	fmt.Fprintf(&b, "  sandbox-run serve --role api --nats %s --nats-creds %s%s\n", all, filepath.Join(dir, "api.creds"), tlsFlag)
	fmt.Fprintf(&b, "  sandbox-run worker --nats %s --nats-creds %s%s\n", all, filepath.Join(dir, "worker.creds"), tlsFlag)
	return b.String(), nil
}

func hostPort(host string, port int) string {
	if strings.Contains(host, ":") {
		return "[" + host + "]:" + strconv.Itoa(port)
	}
	return host + ":" + strconv.Itoa(port)
}

func writeFile(path string, data []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func quoteList(s []string) string {
	q := make([]string, len(s))
	for i, x := range s {
		q[i] = strconv.Quote(x)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

// authConf is the servers' authorization: one NKey user per role.
func authConf(apiPub, workerPub string) string {
	user := func(role, pub string, pub_, pubDeny, sub []string) string {
		return fmt.Sprintf(`    # %s
    {
      nkey: %q
      permissions: {
        publish: { allow: %s, deny: %s }
        subscribe: { allow: %s }
        allow_responses: true
      }
    }
`, role, pub, quoteList(pub_), quoteList(pubDeny), quoteList(sub))
	}
	return "# sandbox-run: who may connect to NATS and what each role may do (written by `sandbox-run cluster init`).\n" +
		"# Secret-free (public keys only), but keep it with its nats-N.conf.\nauthorization {\n  users: [\n" +
		user("API nodes (api.creds)", apiPub, apiPublish, apiPublishDeny, apiSubscribe) +
		user("workers (worker.creds)", workerPub, workerPublish, workerPublishDeny, workerSubscribe) + "  ]\n}\n"
}

// nodeConf is server i's configuration.
func nodeConf(o InitOptions, dir string, i int, routePass string) string {
	var routes []string
	for j := 1; j <= o.Nodes; j++ {
		if j != i { // TLS, when on, is the cluster block's (routes verify each other's certificates)
			routes = append(routes, fmt.Sprintf("nats://route:%s@%s", routePass, hostPort(o.Host, o.RoutePortBase+j-1)))
		}
	}
	tls := ""
	if o.TLSCert != "" {
		tls = fmt.Sprintf("tls {\n  cert_file: %q\n  key_file: %q\n  ca_file: %q\n}\n", o.TLSCert, o.TLSKey, o.TLSCA)
	}
	clusterTLS := strings.ReplaceAll(strings.TrimSuffix(tls, "\n"), "\n", "\n  ")
	if clusterTLS != "" {
		clusterTLS = "  " + clusterTLS + "\n"
	}
	clusterBlock := fmt.Sprintf(`cluster {
  name: "sandbox-run"
  listen: %q
  authorization { user: "route", password: %q }
%s  routes: %s
}
`, hostPort(o.Host, o.RoutePortBase+i-1), routePass, clusterTLS, quoteList(routes))
	if o.Nodes == 1 {
		clusterBlock = "" // one server: no routes
	}
	return fmt.Sprintf(`# NATS server %d of %d for sandbox-run (written by `+"`sandbox-run cluster init`"+`). Secret: it holds the
# JetStream encryption key and the routes' password. Start it with: nats-server -c <this file>
server_name: "sandbox-run-nats-%d"
listen: %q
include "auth.conf"
%sjetstream {
  store_dir: %q
  # Everything JetStream keeps on disk (streams, buckets, their Raft logs) is encrypted with this key.
  cipher: chachapoly
  key: %q
}
%s`, i, o.Nodes, i, hostPort(o.Host, o.ClientPortBase+i-1), tls, filepath.Join(dir, fmt.Sprintf("nats-%d", i)), randomHex(32), clusterBlock)
}
