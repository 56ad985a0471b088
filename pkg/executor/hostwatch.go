package executor

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// Following the host: the toolchains and what their languages mount are
// found when first needed, and found again when the host changes where
// they are looked for, so that what is installed after a server started
// (a toolchain, matplotlib's /etc/matplotlibrc) is usable without a
// restart. inotify watches the directories the languages name (the search
// path for bare names, the directory above each pattern's first wildcard,
// or the nearest one that exists); an event whose name a pattern could
// match marks the toolchains found so far stale, and they are found again
// in the background once the host has been quiet for a moment. Nothing is
// checked on a run's path.

// hostQuiet is how long the host must be quiet after a change before the
// toolchains are found again (an install changes many files).
var hostQuiet = time.Second

// watchSet is what to watch: directory → the names in it that matter
// (patterns of one path component).
type watchSet map[string][]string

func (w watchSet) add(dir, name string) {
	for _, n := range w[dir] {
		if n == name {
			return
		}
	}
	w[dir] = append(w[dir], name)
}

// matches says whether a change to name in dir could change what is found.
func (w watchSet) matches(dir, name string) bool {
	for _, pat := range w[dir] {
		if ok, _ := filepath.Match(pat, name); ok {
			return true
		}
	}
	return false
}

// addPattern adds what a path pattern (a candidate or a mount) depends on:
// the directory above its first wildcard and the component there, or, when
// that directory does not exist yet, the nearest one above it that does.
func (w watchSet) addPattern(p string) {
	p = filepath.Clean(p)
	if !filepath.IsAbs(p) {
		return
	}
	parts := strings.Split(p, "/")[1:]
	dir := "/"
	for i, c := range parts {
		next := filepath.Join(dir, c)
		last := i == len(parts)-1
		if strings.ContainsAny(c, "*?[") || last {
			w.add(dir, c)
			return
		}
		if fi, err := os.Stat(next); err != nil || !fi.IsDir() {
			w.add(dir, c) // appears later: its parent says so
			return
		}
		dir = next
	}
}

// hostWatches are the directories and names the registry's toolchains and
// mounts depend on.
func (r *Registry) hostWatches() watchSet {
	w := watchSet{}
	for _, l := range r.langs {
		if l.Image != "" {
			continue
		}
		for _, c := range l.Toolchain {
			c = r.expandHome(c)
			if !strings.Contains(c, "/") {
				for _, d := range searchPath {
					w.add(d, c)
				}
				continue
			}
			w.addPattern(c)
		}
		for _, m := range l.Mounts {
			src, _, _ := strings.Cut(m, ":")
			if strings.Contains(src, "{") {
				// The toolchain's own directory ({home}), mounted as it is:
				// its candidates say when it changes.
				continue
			}
			w.addPattern(r.expandHome(src))
		}
	}
	return w
}

// Refresh finds again every toolchain found so far (and what its language
// mounts), replacing each once found: runs meanwhile use what was found
// before.
func (r *Registry) Refresh() {
	r.mu.Lock()
	var found []*Language
	for l, slot := range r.found {
		if slot.done.Load() {
			found = append(found, l)
		}
	}
	r.mu.Unlock()
	var wg sync.WaitGroup
	for _, l := range found {
		wg.Go(func() {
			slot := &toolchainSlot{}
			slot.once.Do(func() { slot.tc = r.discover(l) })
			slot.done.Store(true)
			r.mu.Lock()
			r.found[l] = slot
			r.mu.Unlock()
		})
	}
	wg.Wait()
	r.generation.Add(1)
}

// Generation counts the registry's refreshes: what was derived from its
// toolchains (a list of languages) is stale when it changed.
func (r *Registry) Generation() int64 { return r.generation.Load() }
