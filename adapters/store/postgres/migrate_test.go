package postgres_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/loadreporter/loadreporter/adapters/store/postgres"
	"github.com/loadreporter/loadreporter/adapters/store/postgres/pgtest"
	"github.com/loadreporter/loadreporter/domain"
	"github.com/loadreporter/loadreporter/domain/audit"
	"github.com/loadreporter/loadreporter/ports"
	"github.com/loadreporter/loadreporter/ports/porttest"
)

// answers describes what a store answers about the contract's fixture:
// every report with its ranks, and each audit query.
func answers(ctx context.Context, t *testing.T, s ports.HistoryQuery) []string {
	t.Helper()
	w := audit.Window{Since: time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC), Until: time.Date(2026, 3, 2, 11, 0, 0, 0, time.UTC)}
	cut := audit.Window{Since: time.Date(2026, 3, 2, 10, 0, 3, 0, time.UTC), Until: time.Date(2026, 3, 2, 10, 0, 22, 0, time.UTC)}
	var out []string
	add := func(v any, err error) {
		if err != nil {
			t.Fatalf("query: %v", err)
		}
		out = append(out, fmt.Sprintf("%+v", v))
	}
	page, err := s.Reports(ctx, audit.ReportsQuery{Window: w, Limit: audit.MaxLimit})
	if err != nil {
		t.Fatalf("Reports: %v", err)
	}
	for _, r := range page.Reports {
		out = append(out, fmt.Sprintf("%+v", *r))
	}
	add(s.Outages(ctx, audit.OutagesQuery{Window: w}))
	add(s.Outages(ctx, audit.OutagesQuery{Window: cut}))
	add(s.RankStats(ctx, audit.RankStatsQuery{Window: w}))
	add(s.RankStats(ctx, audit.RankStatsQuery{Window: cut}))
	add(s.Gaps(ctx, audit.GapsQuery{Window: w, Interval: time.Second}))
	add(s.Imbalance(ctx, audit.ImbalanceQuery{Window: w}))
	add(s.Imbalance(ctx, audit.ImbalanceQuery{Window: cut, Threshold: .5}))
	return out
}

func TestMigrateOnOneConnection(t *testing.T) {
	t.Parallel()
	dbURL, _ := pgtest.FreshSchema(t)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close(ctx) }()
	names, err := postgres.Migrate(ctx, conn)
	if err != nil || !slices.Equal(names, []string{"0001_history.sql", "0002_history_scale.sql", "0003_rank_usage_apart.sql"}) {
		t.Errorf("Migrate(*pgx.Conn) = %v, %v", names, err)
	}
	if v, err := postgres.AppliedMigrations(ctx, conn); err != nil || !slices.Equal(v, []int{1, 2, 3}) {
		t.Errorf("AppliedMigrations(*pgx.Conn) = %v, %v", v, err)
	}
}

func equalState(t *testing.T, what string, got, want []string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("%s the answers changed:\n got %q\nwant %q", what, got, want)
	}
}

// TestMigrate0003MovesRankValues gives 0003 the history 0002 made (from
// 0001's rows, in a daily partition) and checks that the rank minutes keep
// every sum, bound and value (history_minute_rank_stats unpacks what Go
// packs), that they sit in the day's partitions, that every query answers
// as the same reports written by today's store do, and that 0003's Down
// gives back 0002's rows.
func TestMigrate0003MovesRankValues(t *testing.T) {
	t.Parallel()
	dbURL, _ := pgtest.FreshSchema(t)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if err := postgres.MigrateTo(ctx, pool, 1); err != nil {
		t.Fatalf("migrate to 0001: %v", err)
	}
	day := time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)
	if err := partitions0001(ctx, pool, day); err != nil {
		t.Fatal(err)
	}
	for _, r := range porttest.Fixture() {
		if err := insert0001(ctx, pool, r); err != nil {
			t.Fatalf("write in 0001's layout: %v", err)
		}
	}
	fresh, _ := newStore(t)
	if err := fresh.Append(ctx, porttest.Fixture()); err != nil {
		t.Fatalf("Append: %v", err)
	}
	before := answers(ctx, t, fresh)
	if err := postgres.MigrateTo(ctx, pool, 2); err != nil {
		t.Fatalf("migrate to 0002: %v", err)
	}
	rows0002 := rankMinutes0002(ctx, t, pool, `SELECT worker_addr, minute, dp_rank, reports, usage_sum, usage_max, waiting_max, gen_sum, usage
		FROM history_rank_minutes ORDER BY 1, 2, 3`)
	if len(rows0002) == 0 {
		t.Fatal("0002 rolled up no rank minutes")
	}

	s := postgres.New(pool)
	if names, err := postgres.Migrate(ctx, s.DB()); err != nil || !slices.Equal(names, []string{"0003_rank_usage_apart.sql"}) {
		t.Fatalf("Migrate = %v, %v; want 0003 applied", names, err)
	}
	joined := `SELECT m.worker_addr, m.minute, k.dp_rank, k.reports, k.usage_sum, k.usage_max, k.waiting_max, k.gen_sum, u.usage
		FROM history_minute_ranks m, history_minute_rank_stats(m.ranks) k, history_rank_minute_usage u
		WHERE u.worker_addr = m.worker_addr AND u.minute = m.minute AND u.dp_rank = k.dp_rank ORDER BY 1, 2, 3`
	equalState(t, "0003's rank minutes joined to their values:", rankMinutes0002(ctx, t, pool, joined), rows0002)
	if n := queryInt(t, s, `SELECT count(*) FROM history_minute_ranks m, history_minute_rank_stats(m.ranks) k, history_rank_minute_usage u
		WHERE u.worker_addr = m.worker_addr AND u.minute = m.minute AND u.dp_rank = k.dp_rank
		  AND k.usage_min IS DISTINCT FROM history_float8(u.usage, 0)`); n != 0 {
		t.Errorf("%d rank minutes whose usage_min is not their smallest value", n)
	}
	if n := queryInt(t, s, `SELECT count(*) FROM history_rank_minute_usage_p20260302`); n != int64(len(rows0002)) {
		t.Errorf("the day's partition of history_rank_minute_usage holds %d rows, want %d", n, len(rows0002))
	}
	if n := queryInt(t, s, `SELECT count(*) FROM history_minute_ranks_default`) + queryInt(t, s, `SELECT count(*) FROM history_rank_minute_usage_default`); n != 0 {
		t.Errorf("%d migrated rank rows in default partitions", n)
	}
	equalState(t, "after 0003", answers(ctx, t, s), before)

	if err := postgres.MigrateTo(ctx, pool, 2); err != nil {
		t.Fatalf("0003 down: %v", err)
	}
	equalState(t, "after 0003's Down, history_rank_minutes:", rankMinutes0002(ctx, t, pool, `SELECT worker_addr, minute, dp_rank, reports,
		usage_sum, usage_max, waiting_max, gen_sum, usage FROM history_rank_minutes ORDER BY 1, 2, 3`), rows0002)
	if _, err := postgres.Migrate(ctx, s.DB()); err != nil {
		t.Fatalf("0003 again: %v", err)
	}
	equalState(t, "after 0003 down and up again", answers(ctx, t, s), before)

	// What the store writes, SQL unpacks: a report appended into a
	// migrated minute is merged with it and packed again by Go.
	extra := porttest.Fixture()[0]
	again := *extra
	again.SequenceID, again.ReportTime = 999, extra.ReportTime.Add(500*time.Millisecond)
	if err := s.Append(ctx, []*domain.Report{&again}); err != nil {
		t.Fatalf("Append: %v", err)
	}
	want := queryInt(t, s, `SELECT count(*) FROM history_reports r, history_report_ranks(r.ranks) k`)
	if n := queryInt(t, s, `SELECT sum(k.reports) FROM history_minute_ranks m, history_minute_rank_stats(m.ranks) k`); n != want {
		t.Errorf("history_minute_rank_stats counts %d rank reports, history_reports holds %d", n, want)
	}
	if n := queryInt(t, s, `SELECT count(*) FROM history_minute_ranks m, history_minute_rank_stats(m.ranks) k, history_rank_minute_usage u
		WHERE u.worker_addr = m.worker_addr AND u.minute = m.minute AND u.dp_rank = k.dp_rank
		  AND (k.usage_min IS DISTINCT FROM history_float8(u.usage, 0) OR k.usage_max IS DISTINCT FROM history_float8(u.usage, length(u.usage) - 8)
		       OR length(u.usage) <> 8 * k.reports)`); n != 0 {
		t.Errorf("%d rank minutes written by Go whose bounds or counts SQL reads differently", n)
	}
}

// rankMinutes0002 lists the rows of sql, rank minutes as 0002 kept them.
func rankMinutes0002(ctx context.Context, t *testing.T, pool *pgxpool.Pool, sql string) []string {
	t.Helper()
	rows, err := pool.Query(ctx, sql)
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	vs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (string, error) {
		v, err := row.Values()
		return fmt.Sprintf("%v", v), err
	})
	if err != nil {
		t.Fatal(err)
	}
	return vs
}

// partitions0001 creates the daily partitions of 0001's tables for days.
func partitions0001(ctx context.Context, pool *pgxpool.Pool, days ...time.Time) error {
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

// insert0001 writes r in 0001's layout (a row per report in
// history_reports, a row per rank in history_ranks), as history was kept
// before 0002 carried it over.
func insert0001(ctx context.Context, pool *pgxpool.Pool, r *domain.Report) error {
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO history_reports
		(worker_addr, report_time, source_instance_id, sequence_id, status, last_error, worker_type, model, zone, token_usage_spread)
		VALUES ($1, $2, $3, $4, $5, NULLIF($6, ''), $7, NULLIF($8, ''), NULLIF($9, ''), $10) ON CONFLICT DO NOTHING`,
			r.Worker.Addr, r.ReportTime, r.SourceInstanceID, int64(r.SequenceID), int16(r.Status), r.LastError,
			int16(r.Worker.Type), r.Worker.Model, r.Worker.Zone, audit.Spread(r)); err != nil {
			return err
		}
		for _, k := range r.Ranks {
			snap := k.SnapshotTime
			if snap.IsZero() {
				snap = r.ReportTime
			}
			if _, err := tx.Exec(ctx, `INSERT INTO history_ranks
			(worker_addr, report_time, source_instance_id, sequence_id, dp_rank, snapshot_time,
			 num_running_reqs, num_waiting_reqs, num_waiting_uncached_tokens, num_used_tokens,
			 num_total_tokens, max_total_num_tokens, max_running_requests,
			 token_usage, gen_throughput, cache_hit_rate, utilization)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17) ON CONFLICT DO NOTHING`,
				r.Worker.Addr, r.ReportTime, r.SourceInstanceID, int64(r.SequenceID), int32(k.DPRank), snap,
				k.NumRunningReqs, k.NumWaitingReqs, k.NumWaitingUncachedTokens, k.NumUsedTokens,
				k.NumTotalTokens, k.MaxTotalNumTokens, k.MaxRunningRequests,
				k.TokenUsage, k.GenThroughput, k.CacheHitRate, k.Utilization); err != nil {
				return err
			}
		}
		return nil
	})
}
