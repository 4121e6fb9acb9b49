package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/loadreporter/loadreporter/domain"
	"github.com/loadreporter/loadreporter/domain/audit"
)

// Chart counts the minutes wholly inside the window from their rollups, a
// narrow row of history_minutes (the minute's reports) and of
// history_minute_ranks (each rank's sums) per worker and minute, and reads
// from history_reports only the reports of the two minutes the window cuts;
// the buckets are then whole minutes (audit.ChartQuery.Bounds). A chart of
// buckets under a minute reads its reports. Either way history_minutes
// first says where the chart's budget runs out.

// chartThroughSQL finds the first minute whose cost takes the total past
// the budget ($4), counting from the minute that holds the window's start
// ($1): spentSQL is a minute's cost.
func chartThroughSQL(spentSQL string) string {
	return `
SELECT minute FROM (
    SELECT minute, sum(` + spentSQL + `) OVER (ORDER BY minute) AS spent
    FROM history_minutes
    WHERE minute >= $1 AND minute < $2
      AND (cardinality($3::text[]) = 0 OR worker_addr = ANY($3::text[]))
    GROUP BY minute
) m
WHERE spent > $4
ORDER BY minute
LIMIT 1`
}

var (
	chartThroughByMinuteSQL = chartThroughSQL(`count(*)`)
	chartThroughByReportSQL = chartThroughSQL(`sum(reports)`)
)

// chartMinutesSQL reads the rollups of the minutes in [$1, $2): a minute
// of UNREACHABLE reports alone has no ranks.
const chartMinutesSQL = `
SELECT m.minute, m.reports, r.ranks
FROM history_minutes m
LEFT JOIN history_minute_ranks r
    ON r.worker_addr = m.worker_addr AND r.minute = m.minute AND r.minute >= $1 AND r.minute < $2
WHERE m.minute >= $1 AND m.minute < $2
  AND (cardinality($3::text[]) = 0 OR m.worker_addr = ANY($3::text[]))`

// chartReportsSQL reads the reports of two spans, [$1, $2) and [$3, $4).
const chartReportsSQL = `
SELECT report_time, ranks FROM history_reports
WHERE ((report_time >= $1 AND report_time < $2) OR (report_time >= $3 AND report_time < $4))
  AND (cardinality($5::text[]) = 0 OR worker_addr = ANY($5::text[]))`

// Chart summarises the reports of a window in buckets, for the history
// page's charts. See audit.ChartQuery.
func (s *Store) Chart(ctx context.Context, q audit.ChartQuery) (audit.ChartResult, error) {
	if err := q.Validate(); err != nil {
		return audit.ChartResult{}, err
	}
	// The buckets, and the minute the budget starts at, are the window's
	// as given; SQL reads it rounded to the microsecond.
	b, byMinute, budget, from := audit.NewChartBuilder(q), q.ByMinute(), q.MaxCost(), minuteOf(q.Since.UTC())
	q.Window = heldWindow(q.Window)
	workers := nonNil(q.Workers)
	var through time.Time
	err := s.readTx(ctx, "chart", func(tx pgx.Tx) error {
		sql := chartThroughByReportSQL
		if byMinute {
			sql = chartThroughByMinuteSQL
		}
		err := tx.QueryRow(ctx, sql, from, q.Until, workers, budget).Scan(&through)
		end := q.Until
		switch {
		case errors.Is(err, pgx.ErrNoRows):
		case err != nil:
			return err
		default:
			through = through.UTC()
			end = through
		}
		none := audit.Window{Since: end, Until: end}
		first, last := ceilMinute(q.Since), minuteOf(end.UTC())
		if !byMinute || !first.Before(last) {
			return readChartReports(ctx, tx, b, audit.Window{Since: q.Since, Until: end}, none, workers)
		}
		if err := readChartMinutes(ctx, tx, b, first, last, workers); err != nil {
			return err
		}
		return readChartReports(ctx, tx, b, audit.Window{Since: q.Since, Until: first}, audit.Window{Since: last, Until: end}, workers)
	})
	if err != nil {
		return audit.ChartResult{}, err
	}
	return b.Result(through), nil
}

func readChartMinutes(ctx context.Context, tx pgx.Tx, b *audit.ChartBuilder, first, last time.Time, workers []string) error {
	rows, err := tx.Query(ctx, chartMinutesSQL, first, last, workers)
	if err != nil {
		return err
	}
	var (
		minute  time.Time
		reports int64
		packed  []byte
		ranks   []audit.ChartRank
	)
	_, err = pgx.ForEachRow(rows, []any{&minute, &reports, &packed}, func() error {
		ranks = ranks[:0]
		if err := unpackMinuteRanks(packed, func(k minuteRank) {
			ranks = append(ranks, audit.ChartRank{DPRank: int64(k.dp), Reports: k.reports, UsageSum: k.usageSum, MaxWaitingReqs: k.waitingMax})
		}); err != nil {
			return err
		}
		b.Minute(minute, reports, ranks)
		return nil
	})
	return err
}

// readChartReports counts the reports of two spans of the window.
func readChartReports(ctx context.Context, tx pgx.Tx, b *audit.ChartBuilder, x, y audit.Window, workers []string) error {
	if !x.Since.Before(x.Until) && !y.Since.Before(y.Until) {
		return nil
	}
	rows, err := tx.Query(ctx, chartReportsSQL, x.Since, x.Until, y.Since, y.Until, workers)
	if err != nil {
		return err
	}
	var (
		t      time.Time
		packed []byte
		ranks  []domain.RankLoad
	)
	_, err = pgx.ForEachRow(rows, []any{&t, &packed}, func() error {
		var err error
		if ranks, err = unpackRanksInto(ranks[:0], packed); err != nil {
			return err
		}
		b.Report(t, ranks)
		return nil
	})
	return err
}
