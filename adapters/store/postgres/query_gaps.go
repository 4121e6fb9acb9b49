package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/loadreporter/loadreporter/domain/audit"
)

// gapsSQL reads the minutes with their reports that hold a step longer
// than the gap threshold ($5, µs) or more than one source instance; the
// steps and source changes between minutes come from their first and last
// reports, so of the other minutes only those that start with a gap or a
// restart matter, and the one after the window's first, cut minute.
var gapsSQL = timelineSQL(`max_step > $5 OR source_count > 1`,
	`lag_minute < $1 OR first_time - lag_last_time > $5 * interval '1 microsecond' OR first_source <> lag_last_source`)

// Gaps returns recording gaps and restarts. See ports.HistoryQuery.
func (s *Store) Gaps(ctx context.Context, q audit.GapsQuery) (audit.GapsResult, error) {
	if err := q.Validate(); err != nil {
		return audit.GapsResult{}, err
	}
	q.Window = heldWindow(q.Window)
	threshold := 2 * q.Interval
	var res audit.GapsResult
	err := s.readTx(ctx, "gaps", func(tx pgx.Tx) error {
		return readTimeline(ctx, tx, gapsSQL, q.Window, q.Workers, []any{threshold.Microseconds()}, func(worker string, ms []minuteRead) {
			var (
				prevTime   time.Time
				prevSource string
				processed  time.Time // the minute prevTime is from
			)
			step := func(t time.Time, source string) {
				if !prevTime.IsZero() {
					if d := t.Sub(prevTime); d > threshold {
						res.Gaps = append(res.Gaps, audit.Gap{Span: audit.Span{WorkerAddr: worker, Start: prevTime, End: t, Duration: d}})
					}
					if source != prevSource {
						res.Restarts = append(res.Restarts, audit.Restart{WorkerAddr: worker, SourceInstanceID: source,
							FirstTime: t, PreviousSourceInstanceID: prevSource, PreviousLastTime: prevTime})
					}
				}
			}
			for i := range ms {
				m := &ms[i]
				if !m.lagMinute.IsZero() && !m.lagMinute.Equal(processed) {
					// The previous minute was left out: it lies wholly
					// inside the window, its last report is the one before.
					prevTime, prevSource = m.lagLastTime, m.lagLastSource
				}
				processed = m.minute
				if !m.detailed {
					step(m.firstTime, m.firstSource)
					prevTime, prevSource = m.lastTime, m.lastSource
					continue
				}
				for _, e := range m.entries {
					step(e.t, e.source)
					prevTime, prevSource = e.t, e.source
				}
			}
		})
	})
	if err != nil {
		return audit.GapsResult{}, err
	}
	res.Finish(q.MaxResults())
	return res, nil
}
