package cluster

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/sandbox-run/sandbox-run/pkg/wire"
)

// TestAdmissionBounds: with live workers of slots slots and a queue of
// queue, Admit lets slots+queue sync runs in and refuses the next one
// with a *FullError; async jobs do not count; once the runs are over it
// admits again.
func TestAdmissionBounds(t *testing.T) {
	e := newEnv(t)
	api, wk := e.conn("api"), e.conn("worker")
	ctx, cancel := context.WithTimeout(context.Background(), bounded)
	defer cancel()

	// No worker yet: the cluster has no slot, and a negative queue is none.
	_, err := api.Admission(-3).Admit(ctx)
	var full *FullError
	if !errors.As(err, &full) || full.Slots != 0 || full.Queued != 0 {
		t.Fatalf("Admit with no worker and no queue: %v", err)
	}

	const slots, queue = 2, 1
	started := make(chan string, slots+queue+1)
	release := make(chan struct{})
	var releaseOnce sync.Once
	releaseAll := func() { releaseOnce.Do(func() { close(release) }) }
	defer releaseAll() // before the worker is stopped at cleanup
	e.work(wk, slots, func(ctx context.Context, j Job, emit func(wire.Event)) (*wire.Result, error) {
		if j.Async {
			return result(j.ID, "async"), nil
		}
		started <- j.ID
		select {
		case <-release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return result(j.ID, "done "+j.ID), nil
	})
	eventually(t, "the worker announced", func() (bool, string) {
		ws, err := api.Workers(ctx)
		return err == nil && len(ws) == 1 && ws[0].Slots == slots, fmt.Sprint(ws, err)
	})

	adm := api.Admission(queue)
	var outs []chan runOut
	for i := range slots + queue {
		sent, err := adm.Admit(ctx)
		if err != nil {
			t.Fatalf("run %d of %d refused: %v", i+1, slots+queue, err)
		}
		if i == 0 {
			// Until sent is called the next admission waits its turn.
			sctx, scancel := context.WithTimeout(ctx, 300*time.Millisecond)
			_, err := adm.Admit(sctx)
			scancel()
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("Admit while the previous run was not sent: %v", err)
			}
		}
		j := job(fmt.Sprintf("exec-adm-%d", i))
		j.OnSubmitted = sent
		outs = append(outs, goRun(ctx, api, j))
	}
	for range slots {
		wait(t, started, "a run started")
	}

	// refused waits until Admit refuses (the consumer's count can lag the
	// stream by a moment) and returns its error.
	refused := func(what string) *FullError {
		t.Helper()
		var got *FullError
		eventually(t, what, func() (bool, string) {
			sent, err := adm.Admit(ctx)
			if err == nil {
				sent()
				return false, "admitted"
			}
			if !errors.As(err, &got) {
				t.Fatalf("Admit: %v", err)
			}
			return true, ""
		})
		return got
	}
	full = refused("the cluster full")
	if full.Slots != slots || full.Queued != queue {
		t.Fatalf("FullError %+v, want %d slots and %d queued", full, slots, queue)
	}
	if want := "all 2 worker slots of the cluster are busy and 1 executions are queued; retry later"; full.Error() != want {
		t.Fatalf("FullError says %q, want %q", full.Error(), want)
	}

	// An async job waiting too does not count: Pending is sync runs only.
	jb := api.Jobs(JobsConfig{ResultTTL: time.Hour})
	st, err := jb.Submit(ctx, "", "python", &wire.ExecuteRequest{Language: "python", Code: "print(1)"})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the async job queued", func() (bool, string) {
		n, err := api.PendingJobs(ctx)
		return err == nil && n == 1, fmt.Sprint(n, err)
	})
	if n, err := api.Pending(ctx); err != nil || n != slots+queue {
		t.Fatalf("Pending = %d, %v; want %d", n, err, slots+queue)
	}
	if full = refused("the cluster still full"); full.Queued != queue {
		t.Fatalf("with an async job waiting: %+v", full)
	}

	releaseAll()
	for i, ch := range outs {
		o := wait(t, ch, "a run's result")
		if o.err != nil || o.res.Stdout != fmt.Sprintf("done exec-adm-%d", i) {
			t.Fatalf("run %d: %+v, %v", i, o.res, o.err)
		}
	}
	a, err := jb.Get(ctx, st.ExecutionID, "", bounded)
	if err != nil || !a.Done {
		t.Fatalf("the async job: %+v, %v", a, err)
	}
	waitEmpty(t, api)

	// Room again.
	sent, err := adm.Admit(ctx)
	if err != nil {
		t.Fatalf("Admit once the runs are over: %v", err)
	}
	j := job("exec-adm-after")
	j.OnSubmitted = sent
	if res, err := api.Run(ctx, j, nil); err != nil || res.Stdout != "done exec-adm-after" {
		t.Fatalf("a run admitted after: %+v, %v", res, err)
	}
	sent() // again: harmless
	if sent, err := adm.Admit(ctx); err != nil {
		t.Fatalf("Admit after sent was called twice: %v", err)
	} else {
		sent()
	}

	// A node that cannot count says why, and is no FullError.
	closed := e.conn("closed")
	closed.Close()
	if _, err := closed.Admission(queue).Admit(ctx); err == nil || errors.As(err, &full) {
		t.Fatalf("Admit on a closed connection: %v", err)
	}
}
