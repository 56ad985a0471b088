package natstest

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

func TestClusterR3SurvivesNodeKill(t *testing.T) {
	c := StartCluster(t, 3)
	if c.N() != 3 || c.PID(0) == 0 || c.PID(1) == 0 || c.PID(2) == 0 {
		t.Fatalf("nodes: %d, pids %d %d %d", c.N(), c.PID(0), c.PID(1), c.PID(2))
	}
	nc, err := nats.Connect(c.URLs(), nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "T", Subjects: []string{"t.>"}, Replicas: 3}); err != nil {
		t.Fatal(err)
	}
	// The new stream may have no leader yet: its first message is
	// published again (deduplicated by its id) until one takes it.
	publish(ctx, t, js, "t.a", "one")

	c.Kill(1)
	if c.PID(1) != 0 {
		t.Fatal("killed node still has a pid")
	}
	// The stream keeps a quorum (2 of 3): publishing and reading go on,
	// after a leader election if node 1 led it.
	publish(ctx, t, js, "t.b", "two")
	s, err := js.Stream(ctx, "T")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"one", "two"} {
		seq := uint64(1)
		if want == "two" {
			seq = 2
		}
		m, err := s.GetMsg(ctx, seq)
		if err != nil {
			t.Fatal(err)
		}
		if string(m.Data) != want {
			t.Fatalf("message %d = %q, want %q", seq, m.Data, want)
		}
	}

	c.Restart(1)
	if c.PID(1) == 0 {
		t.Fatal("restarted node has no pid")
	}
	// A client of the restarted node alone sees the stream too.
	nc1, err := nats.Connect(c.URL(1))
	if err != nil {
		t.Fatal(err)
	}
	defer nc1.Close()
	js1, _ := jetstream.New(nc1)
	deadline := time.Now().Add(30 * time.Second)
	for {
		info, err := js1.Stream(ctx, "T")
		if err == nil && info.CachedInfo().State.Msgs == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("restarted node: stream: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// publish publishes data to subj, again (deduplicated by data as its id)
// for a bounded time until the stream takes it: a stream just made, or
// whose leader was just killed, answers once it has elected one.
func publish(ctx context.Context, t *testing.T, js jetstream.JetStream, subj, data string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := js.Publish(pctx, subj, []byte(data), jetstream.WithMsgID(data))
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("publish %q: %v", data, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestSingleNode(t *testing.T) {
	c := StartCluster(t, 1)
	nc, err := nats.Connect(c.URLs())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := js.AccountInfo(ctx); err != nil {
		t.Fatal(err)
	}
}
