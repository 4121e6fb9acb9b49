package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/loadreporter/loadreporter/domain"
	"github.com/loadreporter/loadreporter/domain/audit"
)

// outagesSQL finds runs of non-HEALTHY reports (gaps and islands: a run
// number that grows at each run's first report, so the HEALTHY reports that
// follow a run share its number and the first of them is its end).
const outagesSQL = `
WITH r AS (
    SELECT worker_addr, report_time, source_instance_id, sequence_id, status, last_error, status <> 1 AS bad
    FROM history_reports WHERE ` + windowAndWorkers + `
), m AS (
    SELECT *, lag(bad) OVER (` + runOrder + `) AS prev_bad FROM r
), g AS (
    SELECT *, sum(CASE WHEN bad AND prev_bad IS NOT TRUE THEN 1 ELSE 0 END)
                  OVER (` + runOrder + ` ROWS UNBOUNDED PRECEDING) AS run
    FROM m
)
SELECT worker_addr,
       min(report_time) FILTER (WHERE bad) AS start,
       max(report_time) FILTER (WHERE bad),
       min(report_time) FILTER (WHERE NOT bad),
       count(*) FILTER (WHERE bad),
       array_agg(DISTINCT status ORDER BY status) FILTER (WHERE bad),
       (array_agg(last_error ORDER BY report_time DESC, source_instance_id DESC, sequence_id DESC)
            FILTER (WHERE bad AND last_error IS NOT NULL))[1]
FROM g WHERE run > 0
GROUP BY worker_addr, run
ORDER BY start, worker_addr
LIMIT $4`

// Outages returns the maximal runs of non-HEALTHY reports. See
// ports.HistoryQuery.
func (s *Store) Outages(ctx context.Context, q audit.OutagesQuery) (audit.OutagesResult, error) {
	if err := q.Validate(); err != nil {
		return audit.OutagesResult{}, err
	}
	limit := q.MaxResults()
	var res audit.OutagesResult
	err := s.readTx(ctx, "outages", func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, outagesSQL, q.Since, q.Until, nonNil(q.Workers), limit+1)
		if err != nil {
			return err
		}
		res.Outages, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (audit.Outage, error) {
			var (
				o         audit.Outage
				end       *time.Time
				statuses  []int16
				lastError *string
			)
			if err := row.Scan(&o.WorkerAddr, &o.Start, &o.LastSeen, &end, &o.Reports, &statuses, &lastError); err != nil {
				return o, err
			}
			o.Start, o.LastSeen = o.Start.UTC(), o.LastSeen.UTC()
			if end != nil {
				o.End = end.UTC()
				o.Duration = o.End.Sub(o.Start)
			} else {
				o.Ongoing = true
				o.Duration = o.LastSeen.Sub(o.Start)
			}
			for _, st := range statuses {
				o.Statuses = append(o.Statuses, domain.Status(st))
			}
			if lastError != nil {
				o.LastError = *lastError
			}
			return o, nil
		})
		return err
	})
	if err != nil {
		return audit.OutagesResult{}, err
	}
	if len(res.Outages) > limit {
		res.Outages, res.Truncated = res.Outages[:limit], true
	}
	return res, nil
}
