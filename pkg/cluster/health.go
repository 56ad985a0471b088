package cluster

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Health is the cluster as one node sees it: its connection to NATS, the
// servers it knows, and the streams and buckets the cluster keeps.
type Health struct {
	// NATS is the server the node is connected to ("" while it is not).
	NATS          string   `json:"nats"`
	ServerName    string   `json:"server_name,omitempty"`
	ServerVersion string   `json:"server_version,omitempty"`
	ClusterName   string   `json:"cluster_name,omitempty"`
	Servers       []string `json:"servers"`
	// Signed says whether this node signs and checks the cluster's
	// messages (credentials from `sandbox-run cluster init`).
	Signed  bool           `json:"signed"`
	Streams []StreamHealth `json:"streams"`
}

// StreamHealth is one of the cluster's streams (or a bucket's).
type StreamHealth struct {
	Name     string `json:"name"`
	Leader   string `json:"leader,omitempty"`
	Replicas int    `json:"replicas"`
	// Current is how many of its replicas are caught up (the leader
	// included).
	Current  int    `json:"current"`
	Messages uint64 `json:"messages"`
	Bytes    uint64 `json:"bytes"`
	OK       bool   `json:"ok"`
	Error    string `json:"error,omitempty"`
}

// OK says whether the node is connected and the streams it needs
// (SR_RUNS and the buckets of workers and jobs) have a leader.
func (h Health) OK() bool {
	if h.NATS == "" {
		return false
	}
	need := map[string]bool{StreamName: true, "KV_" + WorkersBucket: true, "KV_" + JobsBucket: true}
	for _, s := range h.Streams {
		if need[s.Name] && s.OK {
			delete(need, s.Name)
		}
	}
	return len(need) == 0
}

// Problem says what keeps h from being OK ("" when it is).
func (h Health) Problem() string {
	if h.NATS == "" {
		return "not connected to NATS"
	}
	for _, s := range h.Streams {
		if !s.OK {
			return "stream " + s.Name + ": " + s.Error
		}
	}
	if !h.OK() {
		return "the cluster's streams are missing"
	}
	return ""
}

// streamNames are the streams and buckets of a cluster, in the order
// Health lists them.
var streamNames = []string{StreamName, "KV_" + WorkersBucket, "KV_" + JobsBucket, "KV_" + SessionsBucket, "KV_" + LiveBucket,
	"KV_" + SecretsBucket, "OBJ_" + FilesBucket, "OBJ_" + LargeBucket, "OBJ_" + SessionFilesBucket}

// Health reads the cluster's health (bounded by ctx). Buckets not made yet
// (their first use makes them) are left out.
func (c *Conn) Health(ctx context.Context) Health {
	h := Health{NATS: c.nc.ConnectedUrl(), Signed: c.keys != nil, Servers: c.nc.Servers(), Streams: []StreamHealth{}}
	if h.NATS != "" {
		h.ServerName, h.ServerVersion, h.ClusterName = c.nc.ConnectedServerName(), c.nc.ConnectedServerVersion(), c.nc.ConnectedClusterName()
	}
	slices.Sort(h.Servers)
	if h.NATS == "" {
		return h
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, name := range streamNames {
		wg.Go(func() {
			sh, found := c.streamHealth(ctx, name)
			if !found {
				return
			}
			mu.Lock()
			h.Streams = append(h.Streams, sh)
			mu.Unlock()
		})
	}
	wg.Wait()
	slices.SortFunc(h.Streams, func(a, b StreamHealth) int {
		return slices.Index(streamNames, a.Name) - slices.Index(streamNames, b.Name)
	})
	return h
}

func (c *Conn) streamHealth(ctx context.Context, name string) (StreamHealth, bool) {
	sh := StreamHealth{Name: name}
	actx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	s, err := c.js.Stream(actx, name)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		sh.Error = "missing"
		return sh, slices.Contains(streamNames[:3], name) // the others are made at their first use
	}
	if err != nil {
		sh.Error = err.Error()
		return sh, true
	}
	info := s.CachedInfo()
	sh.Replicas, sh.Messages, sh.Bytes = info.Config.Replicas, info.State.Msgs, info.State.Bytes
	if cl := info.Cluster; cl != nil {
		sh.Leader = cl.Leader
		if cl.Leader != "" {
			sh.Current = 1
		}
		for _, p := range cl.Replicas {
			if p.Current {
				sh.Current++
			}
		}
	} else {
		sh.Current = 1 // a single server
	}
	sh.OK = info.Cluster == nil || info.Cluster.Leader != ""
	if !sh.OK {
		sh.Error = "no leader"
	}
	return sh, true
}
