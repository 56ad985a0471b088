package executor

import (
	"math"
	"slices"
	"sync"
	"time"
)

// Adaptive timeouts: the executor keeps, in memory, the wall times of the
// last successful runs of each language (scripts) and of each entry point
// (language + class.method or function), and a request with AutoTimeout
// gets
//
//	clamp(AutoTimeoutFactor × p90 + AutoTimeoutSlack, AutoTimeoutMin, maximum)
//
// where p90 is the 90th percentile of the last AutoTimeoutWindow successful
// runs and maximum is the server's maximum timeout (Config.MaxWallTime; the
// default timeout when none is set). With fewer than AutoTimeoutMinSamples
// successful runs it gets the default timeout.
const (
	AutoTimeoutFactor     = 3
	AutoTimeoutSlack      = time.Second
	AutoTimeoutMin        = time.Second
	AutoTimeoutWindow     = 50
	AutoTimeoutMinSamples = 3
	maxDurationKeys       = 4096
)

// durationStats holds the recent wall times of successful runs per key.
type durationStats struct {
	mu   sync.Mutex
	runs map[string]*durationWindow
}

type durationWindow struct {
	samples []time.Duration // a ring of at most AutoTimeoutWindow
	next    int
}

func (s *durationStats) record(key string, d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.runs == nil {
		s.runs = map[string]*durationWindow{}
	}
	w := s.runs[key]
	if w == nil {
		if len(s.runs) >= maxDurationKeys {
			for k := range s.runs { // forget one (random) key
				delete(s.runs, k)
				break
			}
		}
		w = &durationWindow{}
		s.runs[key] = w
	}
	if len(w.samples) < AutoTimeoutWindow {
		w.samples = append(w.samples, d)
		return
	}
	w.samples[w.next] = d
	w.next = (w.next + 1) % AutoTimeoutWindow
}

// p90 returns the 90th percentile (nearest rank) of a key's samples and
// their number.
func (s *durationStats) p90(key string) (time.Duration, int) {
	s.mu.Lock()
	w := s.runs[key]
	var samples []time.Duration
	if w != nil {
		samples = slices.Clone(w.samples)
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
func (s *durationStats) autoTimeout(key string, ceiling time.Duration) time.Duration {
	p, n := s.p90(key)
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
// now for a language (and entry point, or nil for scripts), and whether
// there is enough history for it; without, the default applies.
func (x *Executor) AutoTimeout(language string, ep *Entrypoint) (time.Duration, bool) {
	lang, _, err := x.resolve(language, "")
	if err != nil {
		return 0, false
	}
	t := x.durations.autoTimeout(entryKey(lang.Name, ep), x.autoCeiling(lang))
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
