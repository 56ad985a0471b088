package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sandbox-run/sandbox-run/internal/testkit/natstest"
)

// The cluster's measures (docs/BENCHMARKS.md "Cluster"), each a ratio
// against a baseline taken in the same run:
//
//	go test -run '^$' -bench Cluster -benchtime 1x ./cmd/sandbox-run
//
// BenchmarkClusterThroughput: I/O-bound runs (`sleep 0.2`) through one API
// node with 1, 2 and 4 workers of 2 slots each, as many clients as slots;
// the scaling against one worker is reported (target >= 0.9 x N).
// BenchmarkClusterLatency: sync `bash true`, one at a time, through a
// single node and through an API node and a worker: p50 of each and the
// difference; and what the cluster's security adds (against the same on a
// cluster made without `cluster init`).

func BenchmarkClusterThroughput(b *testing.B) {
	_, urls, apiEnv, workerEnv := secureNATS(b)
	api := startServe(b, apiEnv, "--nats", urls, "--role", "api")
	const slots, perSlot = 2, 10
	var base float64
	for _, n := range []int{1, 2, 4} {
		for len(liveWorkers(b, urls, apiEnv)) < n {
			startWorker(b, workerEnv, urls, slots)
		}
		warm(b, api.url, n*slots)
		clients := n * slots
		start := time.Now()
		runConcurrently(b, api.url, clients, perSlot, `{"language": "bash", "code": "sleep 0.2"}`)
		rate := float64(clients*perSlot) / time.Since(start).Seconds()
		if n == 1 {
			base = rate
		}
		b.ReportMetric(rate, fmt.Sprintf("runs/s@%dw", n))
		b.ReportMetric(rate/base, fmt.Sprintf("x1w@%dw", n))
	}
}

func BenchmarkClusterLatency(b *testing.B) {
	_, urls, apiEnv, workerEnv := secureNATS(b)
	single := startServe(b, nil)
	api := startServe(b, apiEnv, "--nats", urls, "--role", "api")
	startWorker(b, workerEnv, urls, 2)
	// The same on a cluster set up without `cluster init` (no users,
	// signatures or encryption): what the security costs.
	open := natstest.StartCluster(b, 3)
	openAPI := startServe(b, nil, "--nats", open.URLs(), "--nats-insecure", "--role", "api")
	startWorker(b, []string{"SANDBOX_RUN_NATS_INSECURE=1"}, open.URLs(), 2)
	const n = 200
	body := `{"language": "bash", "code": "true"}`
	nodes := []string{single.url, api.url, openAPI.url}
	for _, u := range nodes {
		warm(b, u, 1)
	}
	// Interleaved, so that all see the same machine.
	lat := make([][]time.Duration, len(nodes))
	for range n {
		for i, u := range nodes {
			t0 := time.Now()
			runOnce(b, u, body)
			lat[i] = append(lat[i], time.Since(t0))
		}
	}
	p50 := make([]time.Duration, len(nodes))
	for i := range lat {
		slices.Sort(lat[i])
		p50[i] = lat[i][n/2]
	}
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	b.ReportMetric(ms(p50[0]), "ms-p50-single")
	b.ReportMetric(ms(p50[1]), "ms-p50-cluster")
	b.ReportMetric(ms(p50[1]-p50[0]), "ms-p50-added")
	b.ReportMetric(ms(p50[1]-p50[2]), "ms-p50-security")
}

// liveWorkers lists the cluster's workers (`cluster status`).
func liveWorkers(b testing.TB, urls string, env []string) []string {
	r := cliEnv(b, env, "", "cluster", "status", "--nats", urls, "--output-format", "json")
	var st struct{ Workers []struct{ ID string } }
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &st) != nil {
		b.Fatalf("cluster status: %d %s %s", r.code, r.stdout, r.stderr)
	}
	var ids []string
	for _, w := range st.Workers {
		ids = append(ids, w.ID)
	}
	return ids
}

// warm runs a few runs on every slot, so that measures start warm.
func warm(b testing.TB, url string, clients int) {
	runConcurrently(b, url, clients, 3, `{"language": "bash", "code": "true"}`)
}

// runConcurrently has clients each make n sync runs of body; every run
// must succeed.
func runConcurrently(b testing.TB, url string, clients, n int, body string) {
	var wg sync.WaitGroup
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range n {
				runOnce(b, url, body)
			}
		}()
	}
	wg.Wait()
}

func runOnce(b testing.TB, url, body string) {
	st, r, _ := post(b, url+"/api/sandbox/execute", json.RawMessage(body))
	if st != http.StatusOK || r["status"] != "completed" {
		b.Errorf("run: %d %v", st, r)
	}
}
