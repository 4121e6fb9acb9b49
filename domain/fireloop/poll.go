package fireloop

import (
	"context"
	"time"

	"github.com/loadreporter/loadreporter/domain"
	"github.com/loadreporter/loadreporter/domain/session"
)

// Poll answers a polling router: the latest report when it is younger than
// maxAge, otherwise the report of the next fire, joined as a one-shot
// session. Any number of concurrent pollers therefore cost the engine at
// most one pull per fire.
func (l *Loop) Poll(ctx context.Context, maxAge time.Duration) (*domain.Report, error) {
	if l.stopping.Err() != nil {
		// A poller told now would route on a worker about to go.
		return nil, domain.Errorf(domain.CodeShuttingDown, "the reporter is shutting down")
	}
	l.mu.Lock()
	latest := l.latest
	fresh := latest != nil && l.clock.Now().Sub(latest.ReportTime) < maxAge
	l.mu.Unlock()
	if fresh {
		return latest, nil
	}
	sub, err := l.Subscribe(session.Options{
		Kind: session.KindPoll, Name: "poll",
		// The interval is never used: the session ends after one report.
		Config: session.Config{Interval: l.table.Limits().MaxInterval}, NoLease: true, OneShot: true,
	})
	if err != nil {
		return nil, err
	}
	defer sub.Close()
	select {
	case rep := <-sub.Reports():
		return rep, nil
	case <-sub.Done():
		// A one-shot ends right after its report was offered: take it.
		select {
		case rep := <-sub.Reports():
			return rep, nil
		default:
		}
		if err := sub.Err(); err != nil {
			return nil, err
		}
		return nil, domain.Errorf(domain.CodeUnavailable, "the poll ended without a report")
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}
