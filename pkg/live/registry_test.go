package live

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
)

// recorder is a Registry that keeps what it learns, and refuses ids in
// refuse.
type recorder struct {
	mu     sync.Mutex
	held   []string
	refuse string
}

func (r *recorder) Add(s *Sandbox) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if s.ID == r.refuse || r.refuse == "*" {
		return errors.New("the registry is down")
	}
	r.held = append(r.held, s.ID)
	return nil
}

func (r *recorder) Remove(s *Sandbox) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.held = slices.DeleteFunc(r.held, func(id string) bool { return id == s.ID })
}

func (r *recorder) ids() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.held)
}

// TestManagerRegistry: a Registry learns of each sandbox created and of
// its end; a create it refuses fails and leaves nothing; All lists every
// owner's sandboxes.
func TestManagerRegistry(t *testing.T) {
	reg := &recorder{}
	m := NewManager(&inProcess{}, Config{Registry: reg})
	defer m.Close()
	ctx := context.Background()
	a, err := m.Create(ctx, "k", CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := m.Create(ctx, "j", CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := reg.ids(); !slices.Equal(got, []string{a.ID, b.ID}) {
		t.Errorf("recorded %v, want %v", got, []string{a.ID, b.ID})
	}
	if all := m.All(); len(all) != 2 {
		t.Errorf("All: %d sandboxes", len(all))
	}
	if err := m.Kill("k", a.ID); err != nil {
		t.Fatal(err)
	}
	if got := reg.ids(); !slices.Equal(got, []string{b.ID}) {
		t.Errorf("recorded after a kill: %v", got)
	}
	reg.refuse = "*"
	if _, err := m.Create(ctx, "k", CreateOptions{}); err == nil {
		t.Fatal("a create the registry refused succeeded")
	}
	if got := m.List("k"); len(got) != 0 {
		t.Errorf("k has %d sandboxes after a refused create", len(got))
	}
}
