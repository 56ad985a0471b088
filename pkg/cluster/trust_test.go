package cluster

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sandbox-run/sandbox-run/pkg/jobs"
	"github.com/sandbox-run/sandbox-run/pkg/wire"
)

// TestSealOpen: a message opens only as the kind, from the role and for
// what it was sealed; anything else is forged or replayed.
func TestSealOpen(t *testing.T) {
	api, worker := testKeys(t, "api"), testKeys(t, "worker")
	payload := []byte(`{"result":{"stdout":"hi"}}`)
	sealed := worker.Seal(kindReply, "exec-1@7", payload)
	if got, err := api.Open(kindReply, "exec-1@7", sealed); err != nil || string(got) != string(payload) {
		t.Fatalf("a worker's reply: %q, %v", got, err)
	}
	reason := func(err error) string {
		if de, ok := err.(*dropError); ok {
			return de.reason
		}
		return "accepted"
	}
	for _, c := range []struct {
		name, kind, bind string
		data             []byte
		want             string
	}{
		{"unsigned", kindReply, "exec-1@7", payload, DropForged},
		{"signed by an API node", kindReply, "exec-1@7", api.Seal(kindReply, "exec-1@7", payload), DropForged},
		{"another kind", kindEvent, "exec-1@7", sealed, DropForged},
		{"another run", kindReply, "exec-2@7", sealed, DropReplayed},
		{"another delivery of the job", kindReply, "exec-1@8", sealed, DropReplayed},
		{"changed", kindReply, "exec-1@7", []byte(strings.Replace(string(sealed), "hi", "ho", 1)), DropForged},
		{"a job from a worker", kindJob, "exec-1", worker.Seal(kindJob, "exec-1", payload), DropForged},
		{"a key of no node", kindReply, "exec-1@7", otherKeys(t).Seal(kindReply, "exec-1@7", payload), DropForged},
	} {
		if _, err := api.Open(c.kind, c.bind, c.data); reason(err) != c.want {
			t.Errorf("%s: %v, want %s", c.name, err, c.want)
		}
	}
	// Both roles write job entries.
	for _, k := range []*Keys{api, worker} {
		if _, err := api.Open(kindEntry, "exec-1", k.Seal(kindEntry, "exec-1", payload)); err != nil {
			t.Errorf("an entry by a %s: %v", k.Role, err)
		}
	}
	// Without keys nothing is checked (a cluster set up without init).
	var none *Keys
	if got, err := none.Open(kindReply, "x", sealed); err != nil || string(got) != string(payload) {
		t.Fatalf("no keys, sealed: %q %v", got, err)
	}
	if got := none.Seal(kindReply, "x", payload); string(got) != string(payload) {
		t.Fatalf("no keys sealed %q", got)
	}
}

func otherKeys(t *testing.T) *Keys {
	seed, pub, err := NewSeed()
	if err != nil {
		t.Fatal(err)
	}
	k, err := NewKeys(RoleWorker, seed, map[string][]string{RoleAPI: {pub}, RoleWorker: {pub}})
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// TestReplayCache: a job delivered again at its sequence is not a replay;
// the same job at another sequence, or sent straight twice, is.
func TestReplayCache(t *testing.T) {
	var r replayCache
	until := time.Now().Add(time.Minute)
	if r.check("n1", 5, until) || r.check("n1", 5, until) {
		t.Fatal("a redelivery counted as a replay")
	}
	if !r.check("n1", 6, until) {
		t.Fatal("the job published again was not a replay")
	}
	if r.check("n2", 0, until) || !r.check("n2", 0, until) {
		t.Fatal("a run sent straight twice")
	}
	if r.check("n3", 1, time.Now().Add(-time.Second)) || r.check("n3", 2, until) {
		t.Fatal("a nonce past its time was remembered")
	}
}

// TestCredentialsFile: what FormatCredentials writes, ReadCredentials
// reads back; a bare NKey seed file logs in without signing keys.
func TestCredentialsFile(t *testing.T) {
	dir := t.TempDir()
	natsSeed, _, _ := NewSeed()
	path := filepath.Join(dir, "worker.creds")
	if err := os.WriteFile(path, FormatCredentials(RoleWorker, natsSeed, keysSeeds[1], keysPubs[RoleAPI][0], keysPubs[RoleWorker][0], nil), 0o600); err != nil {
		t.Fatal(err)
	}
	cr, err := ReadCredentials(path)
	if err != nil || cr.Seed != natsSeed || cr.Keys == nil || cr.Keys.Role != RoleWorker {
		t.Fatalf("%+v, %v", cr, err)
	}
	if _, err := testKeys(t, "api").Open(kindReply, "a@1", cr.Keys.Seal(kindReply, "a@1", []byte("{}"))); err != nil {
		t.Fatalf("the file's key does not sign as the worker: %v", err)
	}
	bare := filepath.Join(dir, "user.nk")
	_ = os.WriteFile(bare, []byte(natsSeed+"\n"), 0o600)
	if cr, err := ReadCredentials(bare); err != nil || cr.Seed != natsSeed || cr.Keys != nil {
		t.Fatalf("bare seed: %+v, %v", cr, err)
	}
	_ = os.WriteFile(bare, []byte("nothing here"), 0o600)
	if _, err := ReadCredentials(bare); err == nil {
		t.Fatal("a file with no seed was read")
	}
}

// forger is a connection with no keys that publishes on the cluster's
// subjects: what any client NATS lets in could do.
func (e *env) forger() *nats.Conn {
	nc, err := nats.Connect(e.nc.URLs())
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(nc.Close)
	return nc
}

// heldWorker makes wk work with one slot: a run says it started, and
// answers "genuine" once release is closed.
func (e *env) heldWorker(wk *Conn) (started chan struct{}, release chan struct{}) {
	started, release = make(chan struct{}, 1), make(chan struct{})
	e.work(wk, 1, func(ctx context.Context, j Job, emit func(wire.Event)) (*wire.Result, error) {
		started <- struct{}{}
		<-release
		return result(j.ID, "genuine"), nil
	})
	return started, release
}

func dropped(c *Conn, kind, reason string) uint64 { return c.Drops()[[2]string{kind, reason}] }

// TestForgedReplyDropped: a reply published on a live run's subject by
// anything but its worker (unsigned, or a worker's reply to another run)
// does not reach the caller, which gets the worker's result; the API node
// counts what it dropped.
func TestForgedReplyDropped(t *testing.T) {
	e := newEnv(t)
	api, wk := e.conn("api"), e.conn("worker")
	started, release := e.heldWorker(wk)
	ctx, cancel := context.WithTimeout(context.Background(), bounded)
	defer cancel()
	out := goRun(ctx, api, job("exec-forged"))
	wait(t, started, "the run started")
	forged, _ := json.Marshal(replyMsg{Result: result("exec-forged", "FORGED"), Worker: "w"})
	nc := e.forger()
	// Unsigned; and signed by a worker, but for another run (replayed).
	if _, err := nc.Request(replyPrefix+"exec-forged", forged, time.Second); err == nil {
		t.Error("the API node answered a forged reply")
	}
	_ = nc.Publish(replyPrefix+"exec-forged", testKeys(t, "worker").Seal(kindReply, bindSeq("exec-other", 1), forged))
	_ = nc.Publish(outPrefix+"exec-forged", []byte(`{"seq":1,"event":{"type":"stdout","data":"FORGED"}}`))
	_ = nc.Flush()
	eventually(t, "the forgeries counted", func() (bool, string) {
		return dropped(api, kindReply, DropForged) >= 1 && dropped(api, kindReply, DropReplayed) >= 1 &&
			dropped(api, kindEvent, DropForged) >= 1, ""
	})
	close(release)
	o := wait(t, out, "the result")
	if o.err != nil || o.res.Stdout != "genuine" || o.res.Worker == "" {
		t.Fatalf("%+v, %v", o.res, o.err)
	}
	for _, ev := range o.events {
		if ev.Data == "FORGED" {
			t.Fatal("a forged event reached the caller")
		}
	}
}

// TestInjectedAndReplayedJobs: a job no API node signed is not run, nor is
// a signed job published again (captured off the wire); both are counted.
func TestInjectedAndReplayedJobs(t *testing.T) {
	e := newEnv(t)
	api, wk := e.conn("api"), e.conn("worker")
	var runs atomic.Int32
	e.work(wk, 2, func(ctx context.Context, j Job, emit func(wire.Event)) (*wire.Result, error) {
		runs.Add(1)
		return result(j.ID, "ran "+j.ID), nil
	})
	nc := e.forger()
	captured := make(chan []byte, 1)
	sub, err := nc.Subscribe(syncSubject, func(m *nats.Msg) {
		select {
		case captured <- m.Data:
		default:
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	_ = nc.Flush()
	ctx, cancel := context.WithTimeout(context.Background(), bounded)
	defer cancel()
	if res, err := api.Run(ctx, job("exec-genuine"), nil); err != nil || res.Stdout != "ran exec-genuine" {
		t.Fatalf("%+v, %v", res, err)
	}
	_ = sub.Unsubscribe()
	js, _ := jetstream.New(nc)
	injected, _ := json.Marshal(Job{ID: "exec-injected", Request: wire.ExecuteRequest{Language: "bash", Code: "id"}})
	if _, err := js.Publish(ctx, syncSubject, injected); err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(ctx, syncSubject, wait(t, captured, "the job on the wire")); err != nil {
		t.Fatal(err)
	}
	eventually(t, "both dropped", func() (bool, string) {
		return dropped(wk, kindJob, DropForged) >= 1 && dropped(wk, kindJob, DropReplayed) >= 1, ""
	})
	waitEmpty(t, api)
	if n := runs.Load(); n != 1 {
		t.Fatalf("%d runs, want the genuine one alone", n)
	}
}

// TestForgedJobEntryIgnored: an entry of SR_JOBS no node wrote (a `done`
// with a forged result) is passed over: the job's answers stay its own,
// and its worker's result replaces it.
func TestForgedJobEntryIgnored(t *testing.T) {
	e := newEnv(t)
	api, wk := e.conn("api"), e.conn("worker")
	started, release := e.heldWorker(wk)
	ctx, cancel := context.WithTimeout(context.Background(), bounded)
	defer cancel()
	js := api.Jobs(JobsConfig{ResultTTL: time.Hour})
	st, err := js.SubmitWith(ctx, "t1", "python", &wire.ExecuteRequest{Language: "python", Code: "1"}, jobs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	wait(t, started, "the job started")
	e2, _, err := api.loadJob(ctx, st.ExecutionID)
	if err != nil {
		t.Fatal(err)
	}
	e2.Finish(json.RawMessage(`{"execution_id":"` + st.ExecutionID + `","status":"completed","stdout":"FORGED"}`))
	forged, _ := json.Marshal(e2)
	fjs, err := jetstream.New(e.forger())
	if err != nil {
		t.Fatal(err)
	}
	kv, err := fjs.KeyValue(ctx, JobsBucket)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx, st.ExecutionID, forged); err != nil {
		t.Fatal(err)
	}
	a, err := js.Get(ctx, st.ExecutionID, "t1", 0)
	if err != nil || a.Status.Status == "completed" {
		t.Fatalf("after the forgery: %+v, %v", a.Status, err)
	}
	close(release)
	a, err = js.Get(ctx, st.ExecutionID, "t1", bounded)
	if err != nil || !strings.Contains(string(a.Result), "genuine") {
		t.Fatalf("final: %s, %v", a.Result, err)
	}
	if dropped(api, kindEntry, DropForged) == 0 {
		t.Fatal("the forged entry was not counted")
	}
}

// TestGivenUpWithNoAPINode: a job whose last delivery's worker died while
// no API node heard JetStream give it up is ended by the sweep of an API
// node that comes later.
func TestGivenUpWithNoAPINode(t *testing.T) {
	e := newEnv(t)
	api := e.conn("api")
	ctx, cancel := context.WithTimeout(context.Background(), bounded)
	defer cancel()
	js := api.Jobs(JobsConfig{ResultTTL: time.Hour})
	st, err := js.SubmitWith(ctx, "t1", "python", &wire.ExecuteRequest{Language: "python", Code: "1"}, jobs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// A worker takes it (its last delivery) and dies: never acknowledged.
	wk := e.conn("worker")
	seq := fetchJob(t, wk)
	if _, _, err := wk.updateJob(ctx, st.ExecutionID, func(en *jobEntry) bool {
		en.Start()
		en.Worker, en.Attempt, en.AttemptAt, en.Seq = "worker-dead", maxDeliver, time.Now().Add(-time.Hour), seq
		return true
	}); err != nil {
		t.Fatal(err)
	}
	var sweeps sync.WaitGroup
	sctx, stop := context.WithCancel(ctx)
	sweeps.Go(func() { js.Serve(sctx, func() bool { return false }) })
	a, err := js.Get(ctx, st.ExecutionID, "t1", bounded)
	stop()
	sweeps.Wait()
	if err != nil || a.Status.Status == "running" || !strings.Contains(string(a.Result), "given up") {
		t.Fatalf("%+v %s, %v", a.Status, a.Result, err)
	}
}

// BenchmarkSealOpen is what signing costs a run's message: one seal by the
// sender and one open by the receiver (a 1 KiB reply).
func BenchmarkSealOpen(b *testing.B) {
	api, worker := testKeys(b, "api"), testKeys(b, "worker")
	payload := []byte(strings.Repeat("x", 1024))
	for b.Loop() {
		if _, err := api.Open(kindReply, "exec-1@1", worker.Seal(kindReply, "exec-1@1", payload)); err != nil {
			b.Fatal(err)
		}
	}
}

// fetchJob takes an async job as a worker that will die does (never
// acknowledged), and returns its stream sequence.
func fetchJob(t *testing.T, wk *Conn) uint64 {
	t.Helper()
	// A fetch may come back empty (a fresh cluster's consumer settling):
	// it is asked again until the bound.
	for deadline := time.Now().Add(bounded); time.Now().Before(deadline); {
		batch, err := wk.acons.Fetch(1, jetstream.FetchMaxWait(time.Until(deadline)))
		if err != nil {
			t.Fatal(err)
		}
		for m := range batch.Messages() {
			if md, err := m.Metadata(); err == nil {
				return md.Sequence.Stream
			}
		}
	}
	t.Fatal("no job fetched")
	return 0
}

// TestSweepKeepsPendingCallback: a job whose worker stored its result and
// died while sending its callback stays in the stream through an API
// node's sweep, so its next delivery sends the callback; without a
// callback still to send, the sweep removes it.
func TestSweepKeepsPendingCallback(t *testing.T) {
	e := newEnv(t)
	api := e.conn("api")
	ctx, cancel := context.WithTimeout(context.Background(), bounded)
	defer cancel()
	js := api.Jobs(JobsConfig{ResultTTL: time.Hour})
	wk := e.conn("worker")
	// take submits a job and has a worker take it, finish it and die.
	take := func(hook string) (string, uint64) {
		t.Helper()
		st, err := js.SubmitWith(ctx, "t1", "python", &wire.ExecuteRequest{Language: "python", Code: "1", CallbackURL: hook}, jobs.Options{})
		if err != nil {
			t.Fatal(err)
		}
		seq := fetchJob(t, wk)
		if _, _, err := wk.updateJob(ctx, st.ExecutionID, func(en *jobEntry) bool {
			en.Start()
			en.Worker, en.Attempt, en.AttemptAt, en.Seq = "worker-dead", 1, time.Now().Add(-time.Hour), seq
			en.Finish(json.RawMessage(`{"status":"completed","stdout":"done\n"}`))
			if hook != "" {
				en.Sender = "worker-dead"
			}
			return true
		}); err != nil {
			t.Fatal(err)
		}
		return st.ExecutionID, seq
	}
	hooked, hookSeq := take("http://127.0.0.1:9/hook")
	plain, plainSeq := take("")
	js.sweep(ctx)
	if _, err := api.stream.GetMsg(ctx, plainSeq); err == nil {
		t.Errorf("the finished job %s without a callback is still in the stream after a sweep", plain)
	}
	if _, err := api.stream.GetMsg(ctx, hookSeq); err != nil {
		t.Fatalf("the job %s whose callback was not sent left the stream in a sweep: %v", hooked, err)
	}
	notify := &recordingNotifier{}
	e.workWith(e.conn("worker2"), WorkOptions{Slots: 1, Run: asyncRunFunc(nil), Notify: notify})
	// Sent once, and its delivery stored (after the receiver took it).
	eventually(t, "the callback sent by the next delivery", func() (bool, string) {
		a, err := js.Get(ctx, hooked, "t1", bounded)
		if err != nil {
			return false, err.Error()
		}
		return strings.Contains(string(a.Result), `"status":"delivered"`), string(a.Result)
	})
	if n := len(notify.callsFor(hooked)); n != 1 {
		t.Errorf("the callback was sent %d times", n)
	}
	if a, err := js.Get(ctx, hooked, "t1", bounded); err != nil || !strings.Contains(string(a.Result), `"stdout":"done\n"`) {
		t.Fatalf("%s, %v", a.Result, err)
	}
}
