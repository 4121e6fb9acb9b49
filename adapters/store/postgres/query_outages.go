package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/loadreporter/loadreporter/domain"
	"github.com/loadreporter/loadreporter/domain/audit"
)

// outagesSQL reads the minutes with their reports where some but not all
// are HEALTHY; the others are wholly in an outage or wholly out of one,
// and of the latter only those after a minute with an outage matter (they
// may end it).
var outagesSQL = timelineSQL(`unhealthy > 0 AND unhealthy < reports`, `unhealthy > 0 OR lag_unhealthy > 0`)

// Outages returns the maximal runs of non-HEALTHY reports. See
// ports.HistoryQuery.
func (s *Store) Outages(ctx context.Context, q audit.OutagesQuery) (audit.OutagesResult, error) {
	if err := q.Validate(); err != nil {
		return audit.OutagesResult{}, err
	}
	q.Window = heldWindow(q.Window)
	var res audit.OutagesResult
	err := s.readTx(ctx, "outages", func(tx pgx.Tx) error {
		return readTimeline(ctx, tx, outagesSQL, q.Window, q.Workers, nil, func(worker string, ms []minuteRead) {
			runs := runsOf(worker, ms, func(m *minuteRead) bool { return m.unhealthy > 0 }, entry.bad)
			for _, e := range runs {
				o := audit.Outage{Episode: e.Episode, LastError: e.lastError}
				for st := range domain.Status(32) {
					if e.statusMask&(1<<st) != 0 && st != domain.StatusHealthy {
						o.Statuses = append(o.Statuses, st)
					}
				}
				res.Outages = append(res.Outages, o)
			}
		})
	})
	if err != nil {
		return audit.OutagesResult{}, err
	}
	res.Finish(q.MaxResults())
	return res, nil
}
