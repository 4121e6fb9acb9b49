package fireloop

import (
	"context"
	"errors"
	"time"

	"github.com/loadreporter/loadreporter/domain"
	"github.com/loadreporter/loadreporter/ports"
)

func (l *Loop) waitPulls() {
	done := make(chan struct{})
	go func() { l.pulls.Wait(); close(done) }()
	t := l.clock.NewTimer(l.clock.Now().Add(l.budget))
	defer t.Stop()
	select {
	case <-done:
	case <-t.C():
		l.log.Warn("snapshot source ignored cancellation; leaving its pull behind")
	}
}

type pullResult struct {
	snap     domain.Snapshot
	err      error
	outcome  ports.PullOutcome
	attempts int
}

// pull runs the source in its own goroutine so that a source that hangs
// cannot hold the loop past the budget. A pull left behind at its budget
// that has not returned yet, although cancelled, means the source ignores
// cancellation: no new pull starts beside it (each would leave another
// goroutine behind), and the fire reports the source unreachable.
func (l *Loop) pull(ctx context.Context, start time.Time, expected domain.RankSet) pullResult {
	if l.pullRunning.Load() {
		return pullResult{
			err: domain.Errorf(domain.CodePullTimeout,
				"the pull left behind at its %s budget has not returned: the snapshot source ignores cancellation", l.budget),
			outcome: ports.PullTimeout,
		}
	}
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	results := make(chan pullResult, 1)
	l.pulls.Add(1)
	l.pullRunning.Store(true)
	go func() {
		defer l.pulls.Done()
		res := l.attempt(pctx, expected)
		l.pullRunning.Store(false) // before the result: the next fire may start at once
		results <- res
	}()
	timer := l.clock.NewTimer(start.Add(l.budget))
	defer timer.Stop()
	select {
	case res := <-results:
		return res
	case <-timer.C():
		return pullResult{
			// the words of docs/routers.md exactly: alert rules match them. The
			// budget is --pull-budget, which the operator knows.
			err:     domain.Errorf(domain.CodePullTimeout, "load snapshot pull timed out"),
			outcome: ports.PullTimeout, attempts: 1,
		}
	case <-ctx.Done():
		return pullResult{err: ctx.Err(), outcome: ports.PullCancelled}
	}
}

// attempt pulls once, and once more when the rank set differs from the
// expected one (the engine may be mid-reconfiguration).
func (l *Loop) attempt(ctx context.Context, expected domain.RankSet) pullResult {
	snap, err := l.source.Pull(ctx)
	if err != nil || expected.Empty() || domain.CheckRankSet(expected, snap.RankSet()) == nil || ctx.Err() != nil {
		return classify(snap, err, 1)
	}
	snap, err = l.source.Pull(ctx)
	return classify(snap, err, 2)
}

func classify(snap domain.Snapshot, err error, attempts int) pullResult {
	switch {
	case err == nil:
		return pullResult{snap: snap, outcome: ports.PullOK, attempts: attempts}
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return pullResult{err: err, outcome: ports.PullTimeout, attempts: attempts}
	default:
		return pullResult{err: err, outcome: ports.PullError, attempts: attempts}
	}
}
