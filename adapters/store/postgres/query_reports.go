package postgres

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/loadreporter/loadreporter/domain"
	"github.com/loadreporter/loadreporter/domain/audit"
)

// Every filter, here and in the other queries, is "empty array = no
// filter", so each query is one fixed, parameterized statement.
var reportSelect = `SELECT ` + strings.Join(reportColumns, ", ") + ` FROM history_reports`

const reportsWhere = `
WHERE report_time >= $1 AND report_time < $2
  AND (cardinality($3::text[]) = 0 OR worker_addr = ANY($3::text[]))
  AND (cardinality($4::smallint[]) = 0 OR status = ANY($4::smallint[]))`

var reportsAsc = reportSelect + reportsWhere + `
  AND (NOT $5::boolean OR (report_time, worker_addr, source_instance_id, sequence_id) > ($6::timestamptz, $7::text, $8::text, $9::bigint))
ORDER BY report_time, worker_addr, source_instance_id, sequence_id
LIMIT $10`

var reportsDesc = reportSelect + reportsWhere + `
  AND (NOT $5::boolean OR (report_time, worker_addr, source_instance_id, sequence_id) < ($6::timestamptz, $7::text, $8::text, $9::bigint))
ORDER BY report_time DESC, worker_addr DESC, source_instance_id DESC, sequence_id DESC
LIMIT $10`

// Reports returns one page of reports. See ports.HistoryQuery.
func (s *Store) Reports(ctx context.Context, q audit.ReportsQuery) (audit.ReportsPage, error) {
	if err := q.Validate(); err != nil {
		return audit.ReportsPage{}, err
	}
	q.Window = heldWindow(q.Window)
	after, hasAfter, _ := q.After()
	size := q.PageSize()
	statuses := make([]int16, len(q.Statuses))
	for i, st := range q.Statuses {
		statuses[i] = int16(st)
	}
	sql := reportsAsc
	if q.Descending {
		sql = reportsDesc
	}
	var page audit.ReportsPage
	err := s.readTx(ctx, "reports", func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, sql, q.Since, q.Until, nonNil(q.Workers), statuses,
			hasAfter, after.Time, after.WorkerAddr, after.SourceInstanceID, int64(after.SequenceID), size+1)
		if err != nil {
			return err
		}
		reports, err := pgx.CollectRows(rows, scanReport)
		if err != nil {
			return err
		}
		if len(reports) > size {
			reports = reports[:size]
			page.NextCursor = audit.KeyOf(reports[size-1]).Cursor(q.Descending)
		}
		if len(q.Ranks) > 0 {
			for _, r := range reports {
				r.Ranks = keepRanks(r.Ranks, q.Ranks)
			}
		}
		page.Reports = reports
		return nil
	})
	if err != nil {
		return audit.ReportsPage{}, err
	}
	return page, nil
}

func keepRanks(ranks []domain.RankLoad, keep []int64) []domain.RankLoad {
	var out []domain.RankLoad
	for _, k := range ranks {
		if slices.Contains(keep, k.DPRank) {
			out = append(out, k)
		}
	}
	return out
}

// scanReport reads a row of reportColumns.
func scanReport(row pgx.CollectableRow) (*domain.Report, error) {
	var (
		r                    domain.Report
		seq                  int64
		st, wt               int16
		reptime              time.Time
		lastErr, model, zone *string
		spread               float64
		ranks                []byte
	)
	if err := row.Scan(&r.Worker.Addr, &reptime, &r.SourceInstanceID, &seq, &st, &lastErr, &wt, &model, &zone,
		&spread, &ranks); err != nil {
		return nil, err
	}
	r.ReportTime = reptime.UTC()
	r.SequenceID = uint64(seq)
	r.Status = domain.Status(st)
	r.Worker.Type = domain.WorkerType(wt)
	r.LastError, r.Worker.Model, r.Worker.Zone = deref(lastErr), deref(model), deref(zone)
	var err error
	r.Ranks, err = unpackRanks(ranks)
	return &r, err
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
