package runner

import (
	"context"
	"fmt"
	"time"

	"github.com/sandbox-run/sandbox-run/pkg/config"
	"github.com/sandbox-run/sandbox-run/pkg/jobs"
	"github.com/sandbox-run/sandbox-run/pkg/webhook"
	"github.com/sandbox-run/sandbox-run/pkg/wire"
)

// JobStore is where async work waits, runs and keeps its result, whichever
// transport submitted it (native jobs, Judge0 tokens and batches): pkg/jobs'
// Manager on a single node, pkg/cluster's Jobs on a cluster. One queue, one
// per-key queue limit, one result quota and one expiry for all of them.
type JobStore interface {
	Available(ctx context.Context) error
	SubmitWith(ctx context.Context, keyID, language string, req *wire.ExecuteRequest, opt jobs.Options) (wire.JobStatus, error)
	Get(ctx context.Context, id, keyID string, wait time.Duration) (jobs.Answer, error)
	Serve(ctx context.Context, draining func() bool)
}

// KindSetter is a JobStore whose jobs of a kind send their callbacks their
// transport's way (pkg/jobs' Manager).
type KindSetter interface {
	SetKind(kind string, hooks jobs.KindHooks)
}

// UseJobs makes js the service's job store (before any transport submits).
func (s *Service) UseJobs(js JobStore) { s.jobs = js }

// Jobs is the service's job store (nil when it keeps none).
func (s *Service) Jobs() JobStore { return s.jobs }

// RunAsync runs an async job's request through Run, on the pool every
// transport shares: the RunFunc of pkg/jobs. While the pool's queue is full
// (of synchronous requests, say) the job waits its turn without counting as
// refused (jobs.ErrNoRoom).
func (s *Service) RunAsync(ctx context.Context, req *wire.ExecuteRequest, keyID string, onRun func()) (*wire.Result, error) {
	if !s.HasRoom() {
		return nil, jobs.ErrNoRoom
	}
	res, err := s.Run(ctx, Run{Request: req, Tenant: keyID, Via: "job", OnStart: onRun, Session: req.SessionID})
	if KindOf(err).Retryable() {
		return nil, fmt.Errorf("%w: %w", jobs.ErrNoRoom, err)
	}
	return res, err
}

// CallbackSender is the callbacks' sender cfg describes (its secret,
// retries, timeout and allow-list), sending with method (POST when "").
func CallbackSender(cfg config.Config, method string) *webhook.Sender {
	allow, _ := config.ParseAllowList(cfg.CallbackAllow) // checked by Config.Validate
	return webhook.New(webhook.Config{Secret: cfg.CallbackSecret, Retries: cfg.CallbackRetries, Method: method,
		RetryDelay: seconds(cfg.CallbackRetryDelaySeconds), Timeout: seconds(cfg.CallbackTimeoutSeconds), Allow: allow})
}

// Notifier is s as the job store's callbacks' sender.
func Notifier(s *webhook.Sender) jobs.Notifier { return notifier{s} }

type notifier struct{ *webhook.Sender }

func (n notifier) Deliver(ctx context.Context, url, id string, body []byte, report func(jobs.Attempt)) (int, error) {
	return n.Sender.Deliver(ctx, url, id, body, func(a webhook.Attempt) {
		if report != nil {
			report(jobs.Attempt(a))
		}
	})
}
