// Package live is live sandboxes: sandboxes that stay up between calls,
// with processes running in them and files read and written while they
// run (what E2B's SDKs drive). Each runs our agent (pkg/live/agent) as its
// first program; the host speaks to it over the sandbox's stdin and result
// pipe (Client). The package knows no HTTP.
package live

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sandbox-run/sandbox-run/pkg/live/agent"
	"github.com/sandbox-run/sandbox-run/pkg/wire"
)

// ErrGone is a call on a sandbox whose agent is gone (the sandbox ended).
var ErrGone = errors.New("live: the sandbox is gone")

// Error is what the agent refused or failed, with its code
// (agent.CodeNotFound, ...).
type Error struct{ Code, Msg string }

func (e *Error) Error() string { return e.Msg }

// Kind is the kind of refusal e's code is, which says its HTTP status
// (wire.ErrorKind.HTTPStatus) to every door: not found, exists, invalid,
// denied (forbidden), no space (full); anything else is internal.
func (e *Error) Kind() wire.ErrorKind {
	switch e.Code {
	case agent.CodeNotFound:
		return wire.KindNotFound
	case agent.CodeExists:
		return wire.KindExists
	case agent.CodeInvalid:
		return wire.KindInvalid
	case agent.CodeDenied:
		return wire.KindForbidden
	case agent.CodeNoSpace:
		return wire.KindFull
	}
	return wire.KindInternal
}

// Client is the host's end of one sandbox's agent: requests go to w, the
// agent's events come from r. Safe for concurrent use.
type Client struct {
	wmu sync.Mutex
	enc atomic.Pointer[json.Encoder] // to the agent's connection now

	mu      sync.Mutex
	next    uint64
	calls   map[uint64]chan agent.Event // waiting for their answer
	streams map[uint64]func(agent.Event)
	orphan  func(agent.Event) // events of no request of this client's
	done    chan struct{}
	err     error
	// wake, when set, runs before each request: it resumes a paused
	// sandbox, whose agent would not answer.
	wake atomic.Pointer[func() error]
	// redial, while held (Hold), gives the agent's next connection once
	// the one it speaks on ends; redialed is signalled when it has.
	redial   atomic.Pointer[func() (io.Writer, io.Reader, error)]
	redialed chan bool
}

// NewClient starts reading the agent's events from r. Its requests' ids
// start from the clock, above those of an earlier client of the same agent
// (a restarted server's), whose processes' events may still come.
func NewClient(w io.Writer, r io.Reader) *Client { return newClient(w, r, nil) }

// newClient is NewClient with SetOrphan(orphan) from its first event.
func newClient(w io.Writer, r io.Reader, orphan func(agent.Event)) *Client {
	c := &Client{calls: map[uint64]chan agent.Event{}, orphan: orphan, redialed: make(chan bool, 1),
		streams: map[uint64]func(agent.Event){}, done: make(chan struct{}), next: uint64(time.Now().UnixNano())}
	c.enc.Store(json.NewEncoder(w))
	go c.read(r)
	return c
}

// suspendedClient is a client with no connection yet: it waits for next
// to give the agent's first (a sandbox evicted to disk), and is gone when
// next fails.
func suspendedClient(orphan func(agent.Event), next func() (io.Writer, io.Reader, error)) *Client {
	c := &Client{calls: map[uint64]chan agent.Event{}, orphan: orphan, redialed: make(chan bool, 1),
		streams: map[uint64]func(agent.Event){}, done: make(chan struct{}), next: uint64(time.Now().UnixNano())}
	c.enc.Store(json.NewEncoder(io.Discard))
	c.redial.Store(&next)
	go c.read(strings.NewReader(""))
	return c
}

// Hold makes the client's requests wait, unsent, until release, and
// returns once the agent has read every request sent before it (it
// answered one sent after them): for a checkpoint of the sandbox, which
// ends the agent's connection (the agent connects again). While held, when
// the connection ends the client goes on over the one redial gives, its
// calls and streams kept (the agent sends again what it could not send).
// release waits up to wait for that (it reports whether it came), then
// lets the requests go.
func (c *Client) Hold(ctx context.Context, redial func() (io.Writer, io.Reader, error)) (release func(wait time.Duration) bool, err error) {
	c.wmu.Lock()
	select {
	case <-c.redialed: // an earlier hold's, late
	default:
	}
	id, ch, err := c.register(nil)
	if err == nil {
		err = c.enc.Load().Encode(agent.Request{ID: id, Op: agent.OpList})
		if err == nil {
			select {
			case <-ch:
			case <-c.done:
				err = c.err
			case <-ctx.Done():
				err = ctx.Err()
			}
		}
		c.forget(id)
	}
	if err != nil {
		c.wmu.Unlock()
		return nil, err
	}
	c.redial.Store(&redial)
	return func(wait time.Duration) bool {
		defer c.wmu.Unlock()
		ok := c.awaitRedial(wait)
		if !ok {
			c.redial.Store(nil) // too late: not to be taken by a later end
		}
		return ok
	}, nil
}

// SetOrphan gives on the events that answer no request of this client's:
// those of processes an earlier client started. Like Start's, on must not
// block for long.
func (c *Client) SetOrphan(on func(agent.Event)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.orphan = on
}

func (c *Client) read(r io.Reader) {
	err := c.scan(r)
	for {
		rd := c.redial.Swap(nil)
		if rd == nil {
			break
		}
		w, next, rerr := (*rd)()
		if rerr != nil {
			c.redialed <- false
			break
		}
		c.enc.Store(json.NewEncoder(w))
		c.redialed <- true
		err = c.scan(next)
	}
	c.mu.Lock()
	c.err = ErrGone
	if err != nil {
		c.err = fmt.Errorf("%w: %v", ErrGone, err)
	}
	streams := c.streams
	c.streams, c.calls = nil, nil
	c.mu.Unlock()
	close(c.done)
	for id, s := range streams {
		s(agent.Event{ID: id, Type: agent.EvError, Code: agent.CodeInternal, Error: ErrGone.Error()})
	}
}

// scan hands on the events of one connection of the agent's until it ends
// (a line cut short by its end is dropped).
func (c *Client) scan(r io.Reader) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), agent.MaxFrame)
	for sc.Scan() {
		var ev agent.Event
		if json.Unmarshal(sc.Bytes(), &ev) != nil {
			continue
		}
		c.mu.Lock()
		call, stream, orphan := c.calls[ev.ID], c.streams[ev.ID], c.orphan
		if call != nil {
			delete(c.calls, ev.ID)
		}
		if stream != nil && (ev.Type == agent.EvExit || ev.Type == agent.EvError) {
			delete(c.streams, ev.ID)
		}
		c.mu.Unlock()
		switch {
		case call != nil:
			call <- ev
		case stream != nil:
			stream(ev)
		case orphan != nil:
			orphan(ev)
		}
	}
	return sc.Err()
}

// Done is closed once the agent is gone.
func (c *Client) Done() <-chan struct{} { return c.done }

// setWake makes wake run before each request: an error fails the
// request (the sandbox could not be resumed).
func (c *Client) setWake(wake func() error) { c.wake.Store(&wake) }

// awake runs the wake hook.
func (c *Client) awake() error {
	if w := c.wake.Load(); w != nil {
		return (*w)()
	}
	return nil
}

// suspend makes the client outlive the agent's connection (its sandbox
// is evicted to disk): once that ends, the client waits for next to give
// the agent's next connection (its calls and streams kept), and is gone
// when next fails.
func (c *Client) suspend(next func() (io.Writer, io.Reader, error)) {
	c.redial.Store(&next)
}

// awaitRedial waits up to wait for the client to go on over the
// connection its redial gave, and says whether it did.
func (c *Client) awaitRedial(wait time.Duration) bool {
	select {
	case ok := <-c.redialed:
		return ok
	case <-c.done:
		return false
	case <-time.After(wait):
		return false
	}
}

// streamIDs are the ids of the streams open now.
func (c *Client) streamIDs() []uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Collect(maps.Keys(c.streams))
}

// endStreams ends the streams ids (the processes and watches of a sandbox
// that came back from disk without them) with an error saying why.
func (c *Client) endStreams(ids []uint64, why string) {
	c.mu.Lock()
	ended := map[uint64]func(agent.Event){}
	for _, id := range ids {
		if s := c.streams[id]; s != nil {
			ended[id] = s
			delete(c.streams, id)
		}
	}
	c.mu.Unlock()
	for id, s := range ended {
		s(agent.Event{ID: id, Type: agent.EvError, Code: agent.CodeInternal, Error: why})
	}
}

func (c *Client) send(r agent.Request) error {
	if err := c.awake(); err != nil {
		return err
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if err := c.enc.Load().Encode(r); err != nil {
		return fmt.Errorf("%w: %v", ErrGone, err)
	}
	return nil
}

// register gives a request its id, with a channel for its answer or (with
// stream) a function for its events.
func (c *Client) register(stream func(agent.Event)) (uint64, chan agent.Event, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.calls == nil {
		return 0, nil, c.err
	}
	c.next++
	ch := make(chan agent.Event, 1)
	if stream != nil {
		c.streams[c.next] = stream
	} else {
		c.calls[c.next] = ch
	}
	return c.next, ch, nil
}

func (c *Client) forget(id uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.calls != nil {
		delete(c.calls, id)
		delete(c.streams, id)
	}
}

// Call sends r (not a start) and waits for its answer: an agent.EvOK
// event, or an *Error.
func (c *Client) Call(ctx context.Context, r agent.Request) (agent.Event, error) {
	if r.Op == agent.OpStart {
		return agent.Event{}, errors.New("live: Call of a start: use Start")
	}
	id, ch, err := c.register(nil)
	if err != nil {
		return agent.Event{}, err
	}
	r.ID = id
	if err := c.send(r); err != nil {
		c.forget(id)
		return agent.Event{}, err
	}
	select {
	case ev := <-ch:
		if ev.Type == agent.EvError {
			return ev, &Error{Code: ev.Code, Msg: ev.Error}
		}
		return ev, nil
	case <-c.done:
		return agent.Event{}, c.err
	case <-ctx.Done():
		c.forget(id)
		return agent.Event{}, ctx.Err()
	}
}

// Start starts the process r describes and returns its pid; on gets its
// output events and, last, its agent.EvExit (or an agent.EvError if the
// sandbox went away first), each from the client's reader: it must not
// block for long.
func (c *Client) Start(ctx context.Context, r agent.Request, on func(agent.Event)) (int, error) {
	r.Op = agent.OpStart
	_, ev, err := c.Stream(ctx, r, on)
	return ev.PID, err
}

// Watch watches dir (and, if recursive, its subdirectories) for changes:
// on gets each agent.EvFS event, and last an agent.EvExit once stop was
// called (or an agent.EvError if the sandbox went away). Like Start's, on
// must not block for long.
func (c *Client) Watch(ctx context.Context, dir string, recursive bool, on func(agent.Event)) (stop func(), err error) {
	id, _, err := c.Stream(ctx, agent.Request{Op: agent.OpWatch, Path: dir, Recursive: recursive}, on)
	if err != nil {
		return nil, err
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_, _ = c.Call(ctx, agent.Request{Op: agent.OpUnwatch, Watch: id})
		})
	}, nil
}

// Stream sends r, an op whose answer is a stream (a start, a watch), and
// waits for its first event: agent.EvStarted, returned with the request's
// id, or an *Error. The events after it go to on (see Start).
func (c *Client) Stream(ctx context.Context, r agent.Request, on func(agent.Event)) (uint64, agent.Event, error) {
	started := make(chan agent.Event, 1)
	var once sync.Once
	id, _, err := c.register(func(ev agent.Event) {
		first := false
		once.Do(func() { first = true; started <- ev })
		if !first {
			on(ev)
		}
	})
	if err != nil {
		return 0, agent.Event{}, err
	}
	r.ID = id
	if err := c.send(r); err != nil {
		c.forget(id)
		return 0, agent.Event{}, err
	}
	select {
	case ev := <-started:
		if ev.Type != agent.EvStarted {
			return 0, ev, &Error{Code: ev.Code, Msg: ev.Error}
		}
		return id, ev, nil
	case <-c.done:
		return 0, agent.Event{}, c.err
	case <-ctx.Done():
		return 0, agent.Event{}, ctx.Err() // it may start: its events go to on
	}
}
