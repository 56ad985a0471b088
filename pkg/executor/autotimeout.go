package executor

import (
	"container/list"
	"math"
	"slices"
	"sync"
	"time"
)

// Adaptive timeouts: the executor keeps, in memory and per tenant
// (Request.Tenant: one tenant's runs never change another's timeouts), the
// wall times of the last successful runs of each language (scripts) and of
// each entry point (language + class.method or function), and a request
// with AutoTimeout gets
//
//	clamp(AutoTimeoutFactor × p90 + AutoTimeoutSlack, AutoTimeoutMin, maximum)
//
// where p90 is the 90th percentile of the tenant's last AutoTimeoutWindow
// successful runs and maximum is the server's maximum timeout
// (Config.MaxWallTime; the default timeout when none is set). With fewer
// than AutoTimeoutMinSamples successful runs it gets the default timeout.
//
// Memory is bounded: at most maxDurationTenants tenants (the least recently
// used is forgotten first) of at most maxDurationKeys keys each (likewise).
const (
	AutoTimeoutFactor     = 3
	AutoTimeoutSlack      = time.Second
	AutoTimeoutMin        = time.Second
	AutoTimeoutWindow     = 50
	AutoTimeoutMinSamples = 3
	maxDurationTenants    = 256
	maxDurationKeys       = 256
)

// durationStats holds the recent wall times of successful runs per tenant
// and key.
type durationStats struct {
	mu      sync.Mutex
	tenants map[string]*list.Element // of *tenantDurations
	lru     *list.List               // most recently used first
}

// tenantDurations is one tenant's windows.
type tenantDurations struct {
	tenant string
	runs   map[string]*list.Element // of *durationWindow
	lru    *list.List               // most recently used first
}

type durationWindow struct {
	key     string
	samples []time.Duration // a ring of at most AutoTimeoutWindow
	next    int
}

// tenantLocked finds a tenant's windows, making them (and forgetting the
// least recently used tenant past the bound) when create is set.
func (s *durationStats) tenantLocked(tenant string, create bool) *tenantDurations {
	if s.tenants == nil {
		if !create {
			return nil
		}
		s.tenants, s.lru = map[string]*list.Element{}, list.New()
	}
	if el, ok := s.tenants[tenant]; ok {
		s.lru.MoveToFront(el)
		return el.Value.(*tenantDurations)
	}
	if !create {
		return nil
	}
	for len(s.tenants) >= maxDurationTenants {
		back := s.lru.Back()
		s.lru.Remove(back)
		delete(s.tenants, back.Value.(*tenantDurations).tenant)
	}
	td := &tenantDurations{tenant: tenant, runs: map[string]*list.Element{}, lru: list.New()}
	s.tenants[tenant] = s.lru.PushFront(td)
	return td
}

func (s *durationStats) record(tenant, key string, d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	td := s.tenantLocked(tenant, true)
	var w *durationWindow
	if el, ok := td.runs[key]; ok {
		td.lru.MoveToFront(el)
		w = el.Value.(*durationWindow)
	} else {
		for len(td.runs) >= maxDurationKeys {
			back := td.lru.Back()
			td.lru.Remove(back)
			delete(td.runs, back.Value.(*durationWindow).key)
		}
		w = &durationWindow{key: key}
		td.runs[key] = td.lru.PushFront(w)
	}
	if len(w.samples) < AutoTimeoutWindow {
		w.samples = append(w.samples, d)
		return
	}
	w.samples[w.next] = d
	w.next = (w.next + 1) % AutoTimeoutWindow
}

// p90 returns the 90th percentile (nearest rank) of a tenant's samples
// for a key and their number.
func (s *durationStats) p90(tenant, key string) (time.Duration, int) {
	s.mu.Lock()
	var samples []time.Duration
	if td := s.tenantLocked(tenant, false); td != nil {
		if el, ok := td.runs[key]; ok {
			samples = slices.Clone(el.Value.(*durationWindow).samples)
		}
	}
	s.mu.Unlock()
	if len(samples) == 0 {
		return 0, 0
	}
	slices.Sort(samples)
	rank := int(math.Ceil(0.9*float64(len(samples)))) - 1
	return samples[max(rank, 0)], len(samples)
}

// autoTimeout is the wall-time limit for a request with AutoTimeout, or 0
// (the default timeout) without enough history. ceiling is the largest it
// may be.
func (s *durationStats) autoTimeout(tenant, key string, ceiling time.Duration) time.Duration {
	p, n := s.p90(tenant, key)
	if n < AutoTimeoutMinSamples {
		return 0
	}
	t := AutoTimeoutFactor*p + AutoTimeoutSlack
	t = t.Round(time.Millisecond)
	t = max(t, AutoTimeoutMin)
	if ceiling > 0 {
		t = min(t, ceiling)
	}
	return t
}

// AutoTimeout is the wall-time limit "timeout_seconds": "auto" would give
// a tenant now for a language (and entry point, or nil for scripts), and
// whether there is enough history for it; without, the default applies.
func (x *Executor) AutoTimeout(tenant, language string, ep *Entrypoint) (time.Duration, bool) {
	lang, _, err := x.resolve(language, "")
	if err != nil {
		return 0, false
	}
	t := x.durations.autoTimeout(tenant, entryKey(lang.Name, ep), x.autoCeiling(lang))
	return t, t > 0
}

// autoCeiling is the largest automatic timeout: the server's maximum, or
// else the default timeout of the language.
func (x *Executor) autoCeiling(lang *Language) time.Duration {
	if x.maxWallTime > 0 {
		return x.maxWallTime
	}
	return x.limits(Limits{}, lang.Limits, x.defaults).WallTime
}
