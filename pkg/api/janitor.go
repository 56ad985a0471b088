package api

import (
	"context"
	"time"

	"github.com/sandbox-run/sandbox-run/internal/lib/records"
)

// janitor runs sweep every records.JanitorInterval(lifetime) while the server runs.
func (s *Server) janitor(lifetime time.Duration, sweep func(now time.Time)) {
	s.background = append(s.background, func(ctx context.Context) {
		t := time.NewTicker(records.JanitorInterval(lifetime))
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case now := <-t.C:
				sweep(now)
			}
		}
	})
}
