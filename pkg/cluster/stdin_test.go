package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sandbox-run/sandbox-run/pkg/wire"
)

// endlessReader is a stdin that never ends; it counts what was read of
// it.
type endlessReader struct{ read atomic.Int64 }

func (r *endlessReader) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'a'
	}
	r.read.Add(int64(len(p)))
	return len(p), nil
}

// TestInteractiveStdin sends interactive runs' stdin from the API side
// to the worker's RunFunc.
func TestInteractiveStdin(t *testing.T) {
	e := newEnv(t)
	api, wk := e.conn("api"), e.conn("worker")
	ctx, cancel := context.WithTimeout(context.Background(), bounded)
	defer cancel()

	// An interactive run delivered again (its first worker died with its
	// stdin) is refused, not run. Here the first "worker" takes it and
	// never acknowledges it.
	j := job("exec-stdin-again")
	j.Interactive, j.Stdin = true, strings.NewReader("lost with the worker")
	again := goRun(ctx, api, j)
	taken := 0
	eventually(t, "the job taken once", func() (bool, string) {
		batch, err := api.cons.Fetch(1, jetstream.FetchMaxWait(time.Second))
		if err != nil {
			return false, err.Error()
		}
		for range batch.Messages() {
			taken++
		}
		return taken > 0, fmt.Sprint("taken ", taken)
	})
	if taken != 1 {
		t.Fatalf("taken %d times", taken)
	}

	var runs atomic.Int32
	e.work(wk, 2, func(ctx context.Context, j Job, emit func(wire.Event)) (*wire.Result, error) {
		runs.Add(1)
		if !j.Interactive || j.Stdin == nil {
			return nil, Invalid("not an interactive run")
		}
		if j.Request.Code == "head" {
			buf := make([]byte, 10)
			n, err := io.ReadFull(j.Stdin, buf)
			if err != nil {
				return nil, err
			}
			return result(j.ID, string(buf[:n])), nil
		}
		data, err := io.ReadAll(j.Stdin)
		if err != nil {
			return nil, err
		}
		return result(j.ID, string(data)), nil
	})
	o := wait(t, again, "the redelivered interactive run's answer")
	var re *RunError
	if !errors.As(o.err, &re) || re.Kind != KindInternal || !strings.Contains(re.Msg, "interactive") {
		t.Fatalf("the redelivered interactive run: %+v, %v", o.res, o.err)
	}
	if n := runs.Load(); n != 0 {
		t.Fatalf("the redelivered interactive run was run (%d runs)", n)
	}
	waitEmpty(t, api)

	// A large stdin, in many chunks, arrives whole and in order; the
	// result, as large, comes back through the object store.
	var in strings.Builder
	for i := 0; in.Len() < 1200<<10; i++ {
		fmt.Fprintf(&in, "line %07d\n", i)
	}
	if in.Len() < 4*stdinChunkBytes {
		t.Fatal("the input is too small to need several chunks")
	}
	j = job("exec-stdin-all")
	j.Interactive, j.Stdin = true, strings.NewReader(in.String())
	res, err := api.Run(ctx, j, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Stdout != in.String() {
		got := res.Stdout
		i := 0
		for i < len(got) && i < in.Len() && got[i] == in.String()[i] {
			i++
		}
		t.Fatalf("the worker read %d bytes of %d, the same up to byte %d", len(got), in.Len(), i)
	}

	// An empty stdin is an immediate EOF.
	j = job("exec-stdin-empty")
	j.Interactive, j.Stdin = true, strings.NewReader("")
	if res, err := api.Run(ctx, j, nil); err != nil || res.Stdout != "" {
		t.Fatalf("empty stdin: %+v, %v", res, err)
	}

	// A run that reads only part of an endless stdin and ends: the API
	// side stops sending, Run returns.
	endless := &endlessReader{}
	j = job("exec-stdin-head")
	j.Request.Code = "head"
	j.Interactive, j.Stdin = true, endless
	res, err = api.Run(ctx, j, nil)
	if err != nil || res.Stdout != "aaaaaaaaaa" {
		t.Fatalf("a run reading 10 bytes: %+v, %v", res, err)
	}
	last := int64(-1)
	eventually(t, "the stdin no longer read", func() (bool, string) {
		n := endless.read.Load()
		stopped := n == last
		last = n
		time.Sleep(200 * time.Millisecond)
		return stopped, fmt.Sprint(n, " bytes read")
	})
	// One chunk in flight at a time: the sender got no further than a few.
	if n := endless.read.Load(); n > 4*stdinChunkBytes {
		t.Fatalf("%d bytes of stdin read for a run that took 10", n)
	}
	waitEmpty(t, api)
}
