package sandbox

import (
	"context"
	"errors"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"
)

// TestFreeze: a frozen live run uses no CPU however long it stays frozen
// and goes on when thawed, held by its Process and once adopted (a frozen
// run detached is handed on thawed); a frozen run is killed as any other (v1's freezer leaves a killed task frozen:
// Kill thaws it); a run that is not Detachable is not frozen.
func TestFreeze(t *testing.T) {
	e := detachEngine(t, 23)
	if e.cg.v2 == false && e.cg.parents["freezer"] == "" {
		t.Skip("no freezer hierarchy")
	}
	spec := withDefaults(&Spec{Args: []string{"/bin/sh", "-c", "while :; do :; done"}})
	spec.Detachable, spec.Stream, spec.PTY, spec.Home = true, true, true, "/home/user"
	p, err := e.Start(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() {
		_, err := p.Wait()
		waited <- err
	}()
	cpu := func(s interface{ Stats() (Stats, error) }) time.Duration {
		t.Helper()
		st, err := s.Stats()
		if err != nil {
			t.Fatal(err)
		}
		return time.Duration(st.CPU)
	}
	// burns waits until the run has used 50 ms more CPU than it had.
	burns := func(s interface{ Stats() (Stats, error) }, what string) {
		t.Helper()
		from := cpu(s)
		deadline := time.Now().Add(30 * time.Second)
		for cpu(s) < from+50*time.Millisecond {
			if time.Now().After(deadline) {
				t.Fatalf("%s: the run does not burn CPU", what)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	// still checks that a frozen run used no CPU over 300 ms.
	still := func(s interface{ Stats() (Stats, error) }, what string) {
		t.Helper()
		from := cpu(s)
		time.Sleep(300 * time.Millisecond)
		if used := cpu(s) - from; used > 5*time.Millisecond {
			t.Errorf("%s: a frozen run used %v of CPU in 300 ms", what, used)
		}
	}
	burns(p, "started")
	if err := p.Freeze(context.Background()); err != nil {
		t.Fatal(err)
	}
	still(p, "frozen")
	if err := p.Thaw(); err != nil {
		t.Fatal(err)
	}
	burns(p, "thawed")

	// Detached frozen, it is handed on thawed.
	if err := p.Freeze(context.Background()); err != nil {
		t.Fatal(err)
	}
	d, err := p.Detach()
	if err != nil {
		p.Kill()
		t.Fatal(err)
	}
	killAtEnd(t, e, d)
	<-waited
	a, err := e.Adopt(d)
	if err != nil {
		t.Fatal(err)
	}
	burns(a, "adopted after a frozen detach")
	if err := a.Freeze(context.Background()); err != nil {
		t.Fatal(err)
	}
	still(a, "adopted and frozen")
	if err := a.Thaw(); err != nil {
		t.Fatal(err)
	}
	burns(a, "adopted and thawed")
	if err := a.Freeze(context.Background()); err != nil {
		t.Fatal(err)
	}
	a.Kill()
	if err := awaitEnd(t, a); err != nil && !errors.Is(err, ErrRunEnded) {
		t.Logf("Wait: %v", err)
	}
	checkGone(t, d, e)

	// A frozen Process killed ends too; an ordinary run is not frozen.
	p, err = e.Start(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	burns(p, "the second run")
	if err := p.Freeze(context.Background()); err != nil {
		t.Fatal(err)
	}
	p.Kill()
	done := make(chan *Result, 1)
	go func() {
		res, _ := p.Wait()
		done <- res
	}()
	select {
	case res := <-done:
		if res == nil || res.Limit != LimitCanceled {
			t.Errorf("a frozen run killed: %+v", res)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("a frozen run killed did not end")
	}
	plain, err := e.Start(context.Background(), withDefaults(&Spec{Args: []string{"sleep", "10"}}))
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Wait()
	defer plain.Kill()
	if err := plain.Freeze(context.Background()); err == nil {
		t.Error("a run that is not Detachable was frozen")
	}
}

// TestFreezerGone: a sandbox whose cgroup is gone (it ended, and its engine
// removed it, perhaps while a thaw was waiting) is thawed without an
// error and cannot be frozen: ErrRunEnded, not a file's error.
func TestFreezerGone(t *testing.T) {
	for _, v2 := range []bool{false, true} {
		f := freezer{v2: v2, dir: filepath.Join(t.TempDir(), "ct-gone"), frozen: new(atomic.Bool)}
		f.frozen.Store(true)
		if err := f.set(context.Background(), false); err != nil || f.frozen.Load() {
			t.Errorf("v2=%v: thawing a sandbox that is gone: %v (frozen %v)", v2, err, f.frozen.Load())
		}
		if err := f.set(context.Background(), true); !errors.Is(err, ErrRunEnded) {
			t.Errorf("v2=%v: freezing a sandbox that is gone: %v", v2, err)
		}
	}
}
