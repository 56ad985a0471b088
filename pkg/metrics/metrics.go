// Package metrics holds the server's Prometheus collectors: what the run
// service counts (executions, queue wait, limit kills) and what the HTTP
// layer counts (requests, refusals), served at /metrics. The engine and the
// executor know nothing of it: the run service observes them from above.
package metrics

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Metrics are the server's Prometheus collectors, on a registry of their own.
type Metrics struct {
	registry   *prometheus.Registry
	Executions *prometheus.CounterVec   // by language and status
	Duration   *prometheus.HistogramVec // wall time of executions, by language
	QueueWait  prometheus.Histogram     // time from admission to a free worker
	InFlight   prometheus.Gauge
	LimitKills *prometheus.CounterVec // runs ended by a limit, by limit
	Requests   *prometheus.CounterVec // HTTP requests by route and code
	Rejected   *prometheus.CounterVec // requests refused before running, by reason
	// Network counts what runs with network access tried (connections,
	// name lookups, datagrams), by verdict (allowed, denied); NetworkBytes
	// the bytes they moved, by direction (out, in).
	Network      *prometheus.CounterVec
	NetworkBytes *prometheus.CounterVec
}

// NewMetrics builds the collectors; queueDepth reports executions waiting
// for a worker.
func NewMetrics(queueDepth func() float64) *Metrics {
	m := &Metrics{
		registry: prometheus.NewRegistry(),
		Executions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sandbox_run_executions_total", Help: "Executions finished, by language and status.",
		}, []string{"language", "status"}),
		Duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "sandbox_run_execution_duration_seconds", Help: "Wall time of executions (compile and run).",
			Buckets: prometheus.ExponentialBuckets(0.001, 2.5, 14),
		}, []string{"language"}),
		QueueWait: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "sandbox_run_queue_wait_seconds", Help: "Time executions waited for a worker.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 3, 14),
		}),
		InFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "sandbox_run_executions_in_flight", Help: "Executions running now.",
		}),
		LimitKills: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sandbox_run_limit_kills_total", Help: "Runs ended by a limit, by limit.",
		}, []string{"limit"}),
		Requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sandbox_run_http_requests_total", Help: "HTTP requests by route and status code.",
		}, []string{"route", "code"}),
		Rejected: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sandbox_run_rejected_total", Help: "Requests refused before running, by reason.",
		}, []string{"reason"}),
		Network: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sandbox_run_network_attempts_total", Help: "Connections, name lookups and datagrams of runs with network access, by verdict.",
		}, []string{"verdict"}),
		NetworkBytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sandbox_run_network_bytes_total", Help: "Bytes runs with network access moved, by direction.",
		}, []string{"direction"}),
	}
	m.registry.MustRegister(m.Executions, m.Duration, m.QueueWait, m.InFlight, m.LimitKills, m.Requests, m.Rejected, m.Network, m.NetworkBytes,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "sandbox_run_queue_depth", Help: "Executions waiting for a worker.",
		}, queueDepth),
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	return m
}

// CountDropped adds sandbox_run_cluster_messages_dropped_total: the
// cluster's messages this node dropped (not signed by a node of the
// cluster, or replayed), by kind and reason, as read() counts them.
func (m *Metrics) CountDropped(read func() map[[2]string]uint64) {
	m.registry.MustRegister(droppedCollector{read})
}

var droppedDesc = prometheus.NewDesc("sandbox_run_cluster_messages_dropped_total",
	"Cluster messages dropped: not signed by a node of the cluster (forged) or signed for another job (replayed), by kind and reason.",
	[]string{"kind", "reason"}, nil)

type droppedCollector struct{ read func() map[[2]string]uint64 }

func (d droppedCollector) Describe(ch chan<- *prometheus.Desc) { ch <- droppedDesc }

func (d droppedCollector) Collect(ch chan<- prometheus.Metric) {
	for k, n := range d.read() {
		ch <- prometheus.MustNewConstMetric(droppedDesc, prometheus.CounterValue, float64(n), k[0], k[1])
	}
}

// Handler serves the metrics in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{})
}
