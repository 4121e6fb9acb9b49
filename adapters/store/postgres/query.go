package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/loadreporter/loadreporter/domain"
	"github.com/loadreporter/loadreporter/domain/audit"
)

// readTx runs fn in one read-only transaction with a stable snapshot, so a
// query made of several statements sees one state of the tables.
func (s *Store) readTx(ctx context.Context, op string, fn func(tx pgx.Tx) error) error {
	tx, err := s.db.Begin(ctx)
	if err != nil {
		return wrapErr(ctx, op, err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	// Custom plans always: the filters are "empty array or match", which
	// only a plan made for the actual values turns into an index condition.
	// No arguments, so pgx sends both statements in one simple query.
	if _, err := tx.Exec(ctx, `SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY;
		SET LOCAL plan_cache_mode = force_custom_plan`); err != nil {
		return wrapErr(ctx, op, err)
	}
	if err := fn(tx); err != nil {
		return wrapErr(ctx, op, err)
	}
	return wrapErr(ctx, op, tx.Commit(ctx))
}

// Every filter below is "empty array = no filter", so each query is one
// fixed, parameterized statement.
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
	ranks := make([]int32, len(q.Ranks))
	for i, r := range q.Ranks {
		ranks[i] = int32(r)
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

// runKey orders a worker's reports for runs and gaps.
const runOrder = `PARTITION BY worker_addr ORDER BY report_time, source_instance_id, sequence_id`

const windowAndWorkers = `report_time >= $1 AND report_time < $2
  AND (cardinality($3::text[]) = 0 OR worker_addr = ANY($3::text[]))`

// Outages finds runs of non-HEALTHY reports (gaps and islands: a run
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

const rankStatsSQL = `
SELECT worker_addr, dp_rank, count(*), avg(token_usage), max(token_usage),
       percentile_cont(0.95) WITHIN GROUP (ORDER BY token_usage),
       max(num_waiting_reqs), avg(gen_throughput)
FROM history_ranks
WHERE ` + windowAndWorkers + `
  AND (cardinality($4::integer[]) = 0 OR dp_rank = ANY($4::integer[]))
GROUP BY worker_addr, dp_rank
ORDER BY worker_addr, dp_rank
LIMIT $5`

// RankStats returns per-rank statistics. See ports.HistoryQuery.
func (s *Store) RankStats(ctx context.Context, q audit.RankStatsQuery) (audit.RankStatsResult, error) {
	if err := q.Validate(); err != nil {
		return audit.RankStatsResult{}, err
	}
	ranks := make([]int32, len(q.Ranks))
	for i, r := range q.Ranks {
		ranks[i] = int32(r)
	}
	limit := q.MaxResults()
	var res audit.RankStatsResult
	err := s.readTx(ctx, "rank stats", func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, rankStatsSQL, q.Since, q.Until, nonNil(q.Workers), ranks, limit+1)
		if err != nil {
			return err
		}
		res.Stats, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (audit.RankStat, error) {
			var (
				st audit.RankStat
				dp int32
			)
			err := row.Scan(&st.WorkerAddr, &dp, &st.Reports, &st.AvgTokenUsage, &st.MaxTokenUsage,
				&st.P95TokenUsage, &st.MaxWaitingReqs, &st.MeanGenThroughput)
			st.DPRank = int64(dp)
			return st, err
		})
		return err
	})
	if err != nil {
		return audit.RankStatsResult{}, err
	}
	if len(res.Stats) > limit {
		res.Stats, res.Truncated = res.Stats[:limit], true
	}
	return res, nil
}

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

// nonNil makes an empty filter an empty array, never NULL (cardinality of
// NULL is NULL, which would filter everything out).
func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
