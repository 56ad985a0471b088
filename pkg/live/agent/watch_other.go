//go:build !linux

package agent

// watcher is Linux's (inotify): newWatcher refuses elsewhere.
type watcher struct{}

func newWatcher(string, bool) (*watcher, error) {
	return nil, invalid("no file watches on this system")
}

func (*watcher) close() {}

func (*watcher) run(func(name, op string)) error { return nil }
