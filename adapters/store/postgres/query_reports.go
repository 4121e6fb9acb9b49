package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/loadreporter/loadreporter/domain"
	"github.com/loadreporter/loadreporter/domain/audit"
)

// Every filter, here and in the other queries, is "empty array = no
// filter", so each query is one fixed, parameterized statement.
const reportColumns = `worker_addr, report_time, source_instance_id, sequence_id, status,
       coalesce(last_error, ''), worker_type, coalesce(model, ''), coalesce(zone, '')`

const reportsWhere = `
WHERE report_time >= $1 AND report_time < $2
  AND (cardinality($3::text[]) = 0 OR worker_addr = ANY($3::text[]))
  AND (cardinality($4::smallint[]) = 0 OR status = ANY($4::smallint[]))`

const reportsAsc = `SELECT ` + reportColumns + ` FROM history_reports` + reportsWhere + `
  AND (NOT $5::boolean OR (report_time, worker_addr, source_instance_id, sequence_id) > ($6::timestamptz, $7::text, $8::text, $9::bigint))
ORDER BY report_time, worker_addr, source_instance_id, sequence_id
LIMIT $10`

const reportsDesc = `SELECT ` + reportColumns + ` FROM history_reports` + reportsWhere + `
  AND (NOT $5::boolean OR (report_time, worker_addr, source_instance_id, sequence_id) < ($6::timestamptz, $7::text, $8::text, $9::bigint))
ORDER BY report_time DESC, worker_addr DESC, source_instance_id DESC, sequence_id DESC
LIMIT $10`

const ranksOfReports = `
SELECT k.worker_addr, k.report_time, k.source_instance_id, k.sequence_id, k.dp_rank, k.snapshot_time,
       k.num_running_reqs, k.num_waiting_reqs, k.num_waiting_uncached_tokens, k.num_used_tokens,
       k.num_total_tokens, k.max_total_num_tokens, k.max_running_requests,
       k.token_usage, k.gen_throughput, k.cache_hit_rate, k.utilization
FROM history_ranks k
JOIN unnest($1::text[], $2::timestamptz[], $3::text[], $4::bigint[]) AS p(w, t, s, q)
  ON k.worker_addr = p.w AND k.report_time = p.t AND k.source_instance_id = p.s AND k.sequence_id = p.q
WHERE k.report_time >= $5 AND k.report_time <= $6
  AND (cardinality($7::integer[]) = 0 OR k.dp_rank = ANY($7::integer[]))
ORDER BY k.dp_rank`

type rowKey struct {
	worker, source string
	micros         int64
	seq            int64
}

// Reports returns one page of reports. See ports.HistoryQuery.
func (s *Store) Reports(ctx context.Context, q audit.ReportsQuery) (audit.ReportsPage, error) {
	if err := q.Validate(); err != nil {
		return audit.ReportsPage{}, err
	}
	after, hasAfter, _ := q.After()
	size := q.PageSize()
	statuses := make([]int16, len(q.Statuses))
	for i, st := range q.Statuses {
		statuses[i] = int16(st)
	}
	ranks := ranks32(q.Ranks)
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
		page.Reports = reports
		return s.attachRanks(ctx, tx, reports, ranks)
	})
	if err != nil {
		return audit.ReportsPage{}, err
	}
	return page, nil
}

func scanReport(row pgx.CollectableRow) (*domain.Report, error) {
	var (
		r       domain.Report
		seq     int64
		st, wt  int16
		reptime time.Time
	)
	if err := row.Scan(&r.Worker.Addr, &reptime, &r.SourceInstanceID, &seq, &st,
		&r.LastError, &wt, &r.Worker.Model, &r.Worker.Zone); err != nil {
		return nil, err
	}
	r.ReportTime = reptime.UTC()
	r.SequenceID = uint64(seq)
	r.Status = domain.Status(st)
	r.Worker.Type = domain.WorkerType(wt)
	return &r, nil
}

// attachRanks loads the ranks of reports (only the dp_ranks in keep, when
// set) in one statement.
func (s *Store) attachRanks(ctx context.Context, tx pgx.Tx, reports []*domain.Report, keep []int32) error {
	var (
		ws, ss []string
		ts     []time.Time
		qs     []int64
		lo, hi time.Time
	)
	byKey := map[rowKey]*domain.Report{}
	for _, r := range reports {
		if r.Status == domain.StatusUnreachable {
			continue
		}
		ws = append(ws, r.Worker.Addr)
		ts = append(ts, r.ReportTime)
		ss = append(ss, r.SourceInstanceID)
		qs = append(qs, int64(r.SequenceID))
		if lo.IsZero() || r.ReportTime.Before(lo) {
			lo = r.ReportTime
		}
		if r.ReportTime.After(hi) {
			hi = r.ReportTime
		}
		byKey[rowKey{r.Worker.Addr, r.SourceInstanceID, r.ReportTime.UnixMicro(), int64(r.SequenceID)}] = r
	}
	if len(ws) == 0 {
		return nil
	}
	rows, err := tx.Query(ctx, ranksOfReports, ws, ts, ss, qs, lo, hi, keep)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var (
			k        rowKey
			t, snap  time.Time
			dp       int32
			rk       domain.RankLoad
			worker   string
			source   string
			sequence int64
		)
		if err := rows.Scan(&worker, &t, &source, &sequence, &dp, &snap,
			&rk.NumRunningReqs, &rk.NumWaitingReqs, &rk.NumWaitingUncachedTokens, &rk.NumUsedTokens,
			&rk.NumTotalTokens, &rk.MaxTotalNumTokens, &rk.MaxRunningRequests,
			&rk.TokenUsage, &rk.GenThroughput, &rk.CacheHitRate, &rk.Utilization); err != nil {
			return err
		}
		k = rowKey{worker, source, t.UnixMicro(), sequence}
		rk.DPRank = int64(dp)
		rk.SnapshotTime = snap.UTC()
		if r := byKey[k]; r != nil {
			r.Ranks = append(r.Ranks, rk)
		}
	}
	return rows.Err()
}
