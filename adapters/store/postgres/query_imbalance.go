package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/loadreporter/loadreporter/domain/audit"
)

// imbalanceSQL finds runs of reports whose stored spread exceeds the
// threshold, like outagesSQL.
const imbalanceSQL = `
WITH r AS (
    SELECT worker_addr, report_time, source_instance_id, sequence_id,
           token_usage_spread AS spread, token_usage_spread > $4 AS hot
    FROM history_reports WHERE ` + windowAndWorkers + `
), m AS (
    SELECT *, lag(hot) OVER (` + runOrder + `) AS prev_hot FROM r
), g AS (
    SELECT *, sum(CASE WHEN hot AND prev_hot IS NOT TRUE THEN 1 ELSE 0 END)
                  OVER (` + runOrder + ` ROWS UNBOUNDED PRECEDING) AS run
    FROM m
)
SELECT worker_addr,
       min(report_time) FILTER (WHERE hot) AS start,
       max(report_time) FILTER (WHERE hot),
       min(report_time) FILTER (WHERE NOT hot),
       count(*) FILTER (WHERE hot),
       max(spread) FILTER (WHERE hot),
       (array_agg(report_time ORDER BY spread DESC, report_time, source_instance_id, sequence_id)
            FILTER (WHERE hot))[1]
FROM g WHERE run > 0
GROUP BY worker_addr, run
ORDER BY start, worker_addr
LIMIT $5`

// Imbalance returns runs of reports whose token_usage spread exceeds the
// threshold. See ports.HistoryQuery.
func (s *Store) Imbalance(ctx context.Context, q audit.ImbalanceQuery) (audit.ImbalanceResult, error) {
	if err := q.Validate(); err != nil {
		return audit.ImbalanceResult{}, err
	}
	limit := q.MaxResults()
	var res audit.ImbalanceResult
	err := s.readTx(ctx, "imbalance", func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, imbalanceSQL, q.Since, q.Until, nonNil(q.Workers), q.Threshold, limit+1)
		if err != nil {
			return err
		}
		res.Spans, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (audit.Imbalance, error) {
			var (
				sp  audit.Imbalance
				end *time.Time
			)
			if err := row.Scan(&sp.WorkerAddr, &sp.Start, &sp.LastSeen, &end, &sp.Reports, &sp.PeakSpread, &sp.PeakTime); err != nil {
				return sp, err
			}
			sp.Start, sp.LastSeen, sp.PeakTime = sp.Start.UTC(), sp.LastSeen.UTC(), sp.PeakTime.UTC()
			if end != nil {
				sp.End = end.UTC()
				sp.Duration = sp.End.Sub(sp.Start)
			} else {
				sp.Ongoing = true
				sp.Duration = sp.LastSeen.Sub(sp.Start)
			}
			return sp, nil
		})
		return err
	})
	if err != nil {
		return audit.ImbalanceResult{}, err
	}
	if len(res.Spans) > limit {
		res.Spans, res.Truncated = res.Spans[:limit], true
	}
	return res, nil
}
