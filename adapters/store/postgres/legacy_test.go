package postgres_test

// The layout of migration 0001 (a row per report in history_reports, a
// row per rank in history_ranks) and the store code that wrote and read it
// before migration 0002, kept for tests only: the benchmark measures it
// side by side with today's layout, and the migration test writes history
// the old way before migrating it.

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/loadreporter/loadreporter/adapters/store/postgres"
	"github.com/loadreporter/loadreporter/adapters/store/postgres/pgtest"
	"github.com/loadreporter/loadreporter/domain"
	"github.com/loadreporter/loadreporter/domain/audit"
)

// legacyStore is the store as it was with migration 0001 only.
type legacyStore struct{ db *pgxpool.Pool }

// legacySchema applies testdata/legacy_0001_history.sql (0001 as
// released) to the schema of pool, with daily partitions for days.
func legacySchema(ctx context.Context, pool *pgxpool.Pool, days ...time.Time) error {
	sql, err := os.ReadFile("testdata/legacy_0001_history.sql")
	if err != nil {
		return err
	}
	if _, err := pool.Exec(ctx, string(sql)); err != nil {
		return err
	}
	return legacyPartitions(ctx, pool, days...)
}

// legacyPartitions creates the daily partitions of 0001's tables for days.
func legacyPartitions(ctx context.Context, pool *pgxpool.Pool, days ...time.Time) error {
	for _, d := range days {
		for _, t := range []string{"history_reports", "history_ranks"} {
			name := pgx.Identifier{t + "_p" + d.Format("20060102")}.Sanitize()
			if _, err := pool.Exec(ctx, `CREATE TABLE `+name+` PARTITION OF `+t+` FOR VALUES FROM ('`+
				d.Format(time.DateOnly)+` 00:00:00+00') TO ('`+d.AddDate(0, 0, 1).Format(time.DateOnly)+` 00:00:00+00')`); err != nil {
				return err
			}
		}
	}
	return nil
}

// newLegacyStore returns a legacyStore on a fresh schema with 0001's
// tables and the daily partitions of the benchmark's reports.
func newLegacyStore(ctx context.Context, t testing.TB) *legacyStore {
	t.Helper()
	dbURL, _ := pgtest.FreshSchema(t)
	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	first, last := benchReport(0, benchStart).ReportTime, benchReport(max(*benchReports-1, 0), benchStart).ReportTime
	var days []time.Time
	for d := first.Truncate(24 * time.Hour); !d.After(last); d = d.AddDate(0, 0, 1) {
		days = append(days, d)
	}
	if err := legacySchema(ctx, pool, days...); err != nil {
		t.Fatalf("0001 schema: %v", err)
	}
	return &legacyStore{db: pool}
}

// DB returns the store's pool.
func (s *legacyStore) DB() postgres.DB { return s.db }

// copyLegacy writes the benchmark's reports [from, to) into s's tables
// with COPY (untimed: only to have the whole data set in 0001's layout).
func copyLegacy(ctx context.Context, t testing.TB, s *legacyStore, from, to int) {
	t.Helper()
	const chunk = 50000
	for lo := from; lo < to; lo += chunk {
		hi := min(lo+chunk, to)
		var rs []*domain.Report
		for i := lo; i < hi; i++ {
			rs = append(rs, benchReport(i, benchStart))
		}
		if err := pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error { return copyLegacyRows(ctx, tx, rs) }); err != nil {
			t.Fatalf("copy into 0001's layout: %v", err)
		}
	}
}

func copyLegacyRows(ctx context.Context, tx pgx.Tx, rs []*domain.Report) error {
	var b batch
	b.add(rs)
	reports := make([][]any, len(b.rw))
	for i := range reports {
		reports[i] = []any{b.rw[i], b.rt[i], b.rs[i], b.rq[i], b.rst[i], nullable(b.re[i]), b.rwt[i], nullable(b.rm[i]),
			nullable(b.rz[i]), b.rsp[i]}
	}
	if _, err := tx.CopyFrom(ctx, pgx.Identifier{"history_reports"}, []string{"worker_addr", "report_time",
		"source_instance_id", "sequence_id", "status", "last_error", "worker_type", "model", "zone", "token_usage_spread"},
		pgx.CopyFromRows(reports)); err != nil {
		return err
	}
	ranks := make([][]any, len(b.kw))
	for i := range ranks {
		ranks[i] = []any{b.kw[i], b.kt[i], b.ks[i], b.kq[i], b.kd[i], b.kst[i], b.krun[i], b.kwait[i], b.kunc[i], b.kused[i],
			b.ktot[i], b.kmax[i], b.kmr[i], b.kusage[i], b.kgen[i], b.kcache[i], b.kutil[i]}
	}
	_, err := tx.CopyFrom(ctx, pgx.Identifier{"history_ranks"}, []string{"worker_addr", "report_time", "source_instance_id",
		"sequence_id", "dp_rank", "snapshot_time", "num_running_reqs", "num_waiting_reqs", "num_waiting_uncached_tokens",
		"num_used_tokens", "num_total_tokens", "max_total_num_tokens", "max_running_requests", "token_usage", "gen_throughput",
		"cache_hit_rate", "utilization"}, pgx.CopyFromRows(ranks))
	return err
}

func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// Append is the old Append: one INSERT … SELECT FROM unnest for reports and
// ranks.
func (s *legacyStore) Append(ctx context.Context, reports []*domain.Report) error {
	var b batch
	b.add(reports)
	tx, err := s.db.Begin(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, insertReportsAndRanks, b.args()...); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

func (s *legacyStore) readTx(ctx context.Context, _ string, fn func(tx pgx.Tx) error) error {
	tx, err := s.db.Begin(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, `SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY;
		SET LOCAL plan_cache_mode = force_custom_plan`); err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func ranks32(ranks []int64) []int32 {
	out := make([]int32, len(ranks))
	for i, r := range ranks {
		out[i] = int32(r)
	}
	return out
}

// batch holds reports and their ranks as the column arrays that
// insertReportsAndRanks unnests: one element per report (r…) and one per
// rank (k…).
type batch struct {
	rw, rs, re, rm, rz []string
	rt                 []time.Time
	rq                 []int64
	rst, rwt           []int16
	rsp                []float64

	kw, ks                                    []string
	kt, kst                                   []time.Time
	kq                                        []int64
	kd                                        []int32
	krun, kwait, kunc, kused, ktot, kmax, kmr []int64
	kusage, kgen, kcache, kutil               []float64
}

// add appends reports to the batch. A report twice in one batch is
// written once (its ranks too).
func (b *batch) add(reports []*domain.Report) {
	type identity struct {
		source string
		seq    uint64
	}
	seen := make(map[identity]bool, len(reports))
	for _, r := range reports {
		id := identity{r.SourceInstanceID, r.SequenceID}
		if seen[id] {
			continue
		}
		seen[id] = true
		t := r.ReportTime.UTC()
		b.addReport(r, t)
		for _, k := range r.Ranks {
			b.addRank(r, t, k)
		}
	}
}

func (b *batch) addReport(r *domain.Report, t time.Time) {
	b.rw = append(b.rw, r.Worker.Addr)
	b.rt = append(b.rt, t)
	b.rs = append(b.rs, r.SourceInstanceID)
	b.rq = append(b.rq, int64(r.SequenceID))
	b.rst = append(b.rst, int16(r.Status))
	b.re = append(b.re, r.LastError)
	b.rwt = append(b.rwt, int16(r.Worker.Type))
	b.rm = append(b.rm, r.Worker.Model)
	b.rz = append(b.rz, r.Worker.Zone)
	b.rsp = append(b.rsp, audit.Spread(r))
}

// addRank appends one rank of r, reported at t (UTC); a rank without a
// snapshot time takes the report's.
func (b *batch) addRank(r *domain.Report, t time.Time, k domain.RankLoad) {
	snap := k.SnapshotTime
	if snap.IsZero() {
		snap = t
	}
	b.kw = append(b.kw, r.Worker.Addr)
	b.kt = append(b.kt, t)
	b.ks = append(b.ks, r.SourceInstanceID)
	b.kq = append(b.kq, int64(r.SequenceID))
	b.kd = append(b.kd, int32(k.DPRank))
	b.kst = append(b.kst, snap.UTC())
	b.krun = append(b.krun, k.NumRunningReqs)
	b.kwait = append(b.kwait, k.NumWaitingReqs)
	b.kunc = append(b.kunc, k.NumWaitingUncachedTokens)
	b.kused = append(b.kused, k.NumUsedTokens)
	b.ktot = append(b.ktot, k.NumTotalTokens)
	b.kmax = append(b.kmax, k.MaxTotalNumTokens)
	b.kmr = append(b.kmr, k.MaxRunningRequests)
	b.kusage = append(b.kusage, k.TokenUsage)
	b.kgen = append(b.kgen, k.GenThroughput)
	b.kcache = append(b.kcache, k.CacheHitRate)
	b.kutil = append(b.kutil, k.Utilization)
}

// args are the parameters of insertReportsAndRanks, $1 to $27 in order.
func (b *batch) args() []any {
	return []any{b.rw, b.rt, b.rs, b.rq, b.rst, b.re, b.rwt, b.rm, b.rz, b.rsp,
		b.kw, b.kt, b.ks, b.kq, b.kd, b.kst, b.krun, b.kwait, b.kunc, b.kused, b.ktot, b.kmax, b.kmr,
		b.kusage, b.kgen, b.kcache, b.kutil}
}

// insertReportsAndRanks writes a batch in one statement. Reports already
// stored are skipped by the primary key (ON CONFLICT DO NOTHING), and only
// the ranks of the reports actually inserted are written: rank rows exist
// only together with their report (Append, retention and the default
// partition clean-up change both in one transaction), so the rank insert
// needs no conflict check, which makes it markedly cheaper.
const insertReportsAndRanks = `
WITH new AS (
    INSERT INTO history_reports
        (worker_addr, report_time, source_instance_id, sequence_id, status, last_error, worker_type, model, zone,
         token_usage_spread)
    SELECT w, t, s, q, st, NULLIF(e, ''), wt, NULLIF(m, ''), NULLIF(z, ''), sp
    FROM unnest($1::text[], $2::timestamptz[], $3::text[], $4::bigint[], $5::smallint[],
                $6::text[], $7::smallint[], $8::text[], $9::text[], $10::float8[]) AS u(w, t, s, q, st, e, wt, m, z, sp)
    ON CONFLICT DO NOTHING
    RETURNING worker_addr, report_time, source_instance_id, sequence_id
)
INSERT INTO history_ranks
    (worker_addr, report_time, source_instance_id, sequence_id, dp_rank, snapshot_time,
     num_running_reqs, num_waiting_reqs, num_waiting_uncached_tokens, num_used_tokens,
     num_total_tokens, max_total_num_tokens, max_running_requests,
     token_usage, gen_throughput, cache_hit_rate, utilization)
SELECT k.* FROM unnest($11::text[], $12::timestamptz[], $13::text[], $14::bigint[], $15::integer[], $16::timestamptz[],
                       $17::bigint[], $18::bigint[], $19::bigint[], $20::bigint[], $21::bigint[], $22::bigint[], $23::bigint[],
                       $24::float8[], $25::float8[], $26::float8[], $27::float8[])
         AS k(w, t, s, q, dp, snap, run, wait, unc, used, tot, maxt, maxr, usage, gen, hit, util)
JOIN new ON new.worker_addr = k.w AND new.report_time = k.t
        AND new.source_instance_id = k.s AND new.sequence_id = k.q`

// runOrder orders a worker's reports for runs (outages, imbalance) and
// gaps.
const runOrder = `PARTITION BY worker_addr ORDER BY report_time, source_instance_id, sequence_id`

// windowAndWorkers filters reports by the window ($1, $2) and the workers
// ($3, empty for all), as every query but Reports does.
const windowAndWorkers = `report_time >= $1 AND report_time < $2
  AND (cardinality($3::text[]) = 0 OR worker_addr = ANY($3::text[]))`

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
func (s *legacyStore) Reports(ctx context.Context, q audit.ReportsQuery) (audit.ReportsPage, error) {
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
func (s *legacyStore) attachRanks(ctx context.Context, tx pgx.Tx, reports []*domain.Report, keep []int32) error {
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
func (s *legacyStore) Outages(ctx context.Context, q audit.OutagesQuery) (audit.OutagesResult, error) {
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
func (s *legacyStore) RankStats(ctx context.Context, q audit.RankStatsQuery) (audit.RankStatsResult, error) {
	if err := q.Validate(); err != nil {
		return audit.RankStatsResult{}, err
	}
	ranks := ranks32(q.Ranks)
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
func (s *legacyStore) Gaps(ctx context.Context, q audit.GapsQuery) (audit.GapsResult, error) {
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
func (s *legacyStore) Imbalance(ctx context.Context, q audit.ImbalanceQuery) (audit.ImbalanceResult, error) {
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
