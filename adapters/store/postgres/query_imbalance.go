package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/loadreporter/loadreporter/domain/audit"
)

// imbalanceSQL reads the minutes with their reports where the spread
// crosses the threshold ($5); of the minutes wholly below it, only those
// after a minute with a spread above it matter (they may end a run).
var imbalanceSQL = timelineSQL(`min_spread <= $5 AND max_spread > $5`, `min_spread > $5 OR lag_max_spread > $5`)

// Imbalance returns runs of reports whose token_usage spread exceeds the
// threshold. See ports.HistoryQuery.
func (s *Store) Imbalance(ctx context.Context, q audit.ImbalanceQuery) (audit.ImbalanceResult, error) {
	if err := q.Validate(); err != nil {
		return audit.ImbalanceResult{}, err
	}
	q.Window = heldWindow(q.Window)
	var res audit.ImbalanceResult
	err := s.readTx(ctx, "imbalance", func(tx pgx.Tx) error {
		return readTimeline(ctx, tx, imbalanceSQL, q.Window, q.Workers, []any{q.Threshold}, func(worker string, ms []minuteRead) {
			in := func(m *minuteRead) bool { return m.minSpread > q.Threshold }
			hot := func(e entry) bool { return e.spread > q.Threshold }
			for _, e := range runsOf(worker, ms, in, hot) {
				res.Spans = append(res.Spans, audit.Imbalance{Episode: e.Episode, PeakSpread: e.peak, PeakTime: e.peakTime})
			}
		})
	})
	if err != nil {
		return audit.ImbalanceResult{}, err
	}
	res.Finish(q.MaxResults())
	return res, nil
}
