//go:build !linux

package executor

import (
	"context"
	"errors"
)

// FollowHost is Linux's (inotify): elsewhere toolchains installed after
// the start need a restart.
func (x *Executor) FollowHost(ctx context.Context, onRefresh func()) error {
	return errors.New("following the host needs Linux (inotify)")
}

// testHookWatching is Linux's.
var testHookWatching func()
