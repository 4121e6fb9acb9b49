package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/loadreporter/loadreporter/domain/audit"
)

const neighboursSQL = `
WITH r AS (
    SELECT worker_addr, report_time, source_instance_id,
           lag(report_time) OVER (` + runOrder + `) AS prev_time,
           lag(source_instance_id) OVER (` + runOrder + `) AS prev_source
    FROM history_reports WHERE ` + windowAndWorkers + `
)`

const gapsSQL = neighboursSQL + `
SELECT worker_addr, prev_time, report_time FROM r
WHERE report_time - prev_time > $4::bigint * interval '1 microsecond'
ORDER BY prev_time, worker_addr
LIMIT $5`

const restartsSQL = neighboursSQL + `
SELECT worker_addr, source_instance_id, report_time, prev_source, prev_time FROM r
WHERE prev_source IS NOT NULL AND source_instance_id <> prev_source
ORDER BY report_time, worker_addr
LIMIT $4`

// Gaps returns recording gaps and restarts. See ports.HistoryQuery.
func (s *Store) Gaps(ctx context.Context, q audit.GapsQuery) (audit.GapsResult, error) {
	if err := q.Validate(); err != nil {
		return audit.GapsResult{}, err
	}
	limit := q.MaxResults()
	var res audit.GapsResult
	err := s.readTx(ctx, "gaps", func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, gapsSQL, q.Since, q.Until, nonNil(q.Workers), (2 * q.Interval).Microseconds(), limit+1)
		if err != nil {
			return err
		}
		res.Gaps, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (audit.Gap, error) {
			var g audit.Gap
			err := row.Scan(&g.WorkerAddr, &g.Start, &g.End)
			g.Start, g.End = g.Start.UTC(), g.End.UTC()
			g.Duration = g.End.Sub(g.Start)
			return g, err
		})
		if err != nil {
			return err
		}
		rows, err = tx.Query(ctx, restartsSQL, q.Since, q.Until, nonNil(q.Workers), limit+1)
		if err != nil {
			return err
		}
		res.Restarts, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (audit.Restart, error) {
			var r audit.Restart
			err := row.Scan(&r.WorkerAddr, &r.SourceInstanceID, &r.FirstTime, &r.PreviousSourceInstanceID, &r.PreviousLastTime)
			r.FirstTime, r.PreviousLastTime = r.FirstTime.UTC(), r.PreviousLastTime.UTC()
			return r, err
		})
		return err
	})
	if err != nil {
		return audit.GapsResult{}, err
	}
	if len(res.Gaps) > limit {
		res.Gaps, res.Truncated = res.Gaps[:limit], true
	}
	if len(res.Restarts) > limit {
		res.Restarts, res.Truncated = res.Restarts[:limit], true
	}
	return res, nil
}
