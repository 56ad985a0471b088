package executor

import (
	"context"
	"os"
	"strings"
	"sync"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// FollowHost watches the host for what would change the toolchains found
// (see above) until ctx ends, refreshing the registry after each change.
// onRefresh, if set, hears of each refresh. It returns when ctx ends; an
// error when the host cannot be watched (no inotify).
func (x *Executor) FollowHost(ctx context.Context, onRefresh func()) error {
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return err
	}
	f := os.NewFile(uintptr(fd), "inotify") // on the runtime's poller: Read blocks a goroutine, not a thread
	defer f.Close()
	const mask = unix.IN_CREATE | unix.IN_DELETE | unix.IN_MOVED_TO | unix.IN_MOVED_FROM | unix.IN_ATTRIB | unix.IN_DELETE_SELF | unix.IN_MOVE_SELF
	var mu sync.Mutex
	watched := map[int]string{} // wd → directory
	names := watchSet{}
	watch := func() {
		w := x.reg.hostWatches()
		mu.Lock()
		defer mu.Unlock()
		names = w
		for dir := range w {
			if wd, err := unix.InotifyAddWatch(fd, dir, mask); err == nil {
				watched[wd] = dir
			}
		}
	}
	watch()
	if testHookWatching != nil {
		testHookWatching()
	}
	changed := make(chan struct{}, 1)
	go func() {
		<-ctx.Done()
		f.SetReadDeadline(time.Now()) // ends the reader
	}()
	go func() {
		buf := make([]byte, 64<<10)
		for {
			n, err := f.Read(buf)
			if err != nil {
				// The deadline set as ctx ended, or a descriptor gone bad:
				// either way nothing more will come (no spinning on it).
				return
			}
			relevant := false
			for off := 0; off+unix.SizeofInotifyEvent <= n; {
				ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
				nameBytes := buf[off+unix.SizeofInotifyEvent : off+unix.SizeofInotifyEvent+int(ev.Len)]
				name := strings.TrimRight(string(nameBytes), "\x00")
				off += unix.SizeofInotifyEvent + int(ev.Len)
				mu.Lock()
				dir := watched[int(ev.Wd)]
				if ev.Mask&(unix.IN_DELETE_SELF|unix.IN_MOVE_SELF|unix.IN_Q_OVERFLOW) != 0 || names.matches(dir, name) {
					relevant = true
				}
				mu.Unlock()
			}
			if relevant {
				select {
				case changed <- struct{}{}:
				default:
				}
			}
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-changed:
		}
		// Quiet for hostQuiet (an install touches many files), then find
		// the toolchains again and watch what they now depend on.
		for quiet := false; !quiet; {
			select {
			case <-ctx.Done():
				return nil
			case <-changed:
			case <-time.After(hostQuiet):
				quiet = true
			}
		}
		x.reg.Refresh()
		watch()
		if onRefresh != nil {
			onRefresh()
		}
	}
}

// testHookWatching, when set (by tests), runs once FollowHost watches.
var testHookWatching func()
