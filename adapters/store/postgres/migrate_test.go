package postgres_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
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

// migrateTheOldWay does what the runner before goose did to an empty
// schema: in one transaction under its advisory lock, create its version
// table, run 0001 as released (testdata holds the file as it was, without
// goose annotations) and record version 1.
func migrateTheOldWay(ctx context.Context, t *testing.T, dbURL string) {
	t.Helper()
	sql, err := os.ReadFile("testdata/legacy_0001_history.sql")
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer func() { _ = conn.Close(ctx) }()
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	for _, step := range []struct {
		sql  string
		args []any
	}{
		{`SELECT pg_advisory_xact_lock($1, hashtext(current_schema()))`, []any{0x6c726d67}},
		{`CREATE TABLE IF NOT EXISTS loadreporter_migrations (
			version    integer     PRIMARY KEY,
			name       text        NOT NULL,
			applied_at timestamptz NOT NULL DEFAULT now())`, nil},
		{string(sql), nil},
		{`INSERT INTO loadreporter_migrations (version, name) VALUES ($1, $2)`, []any{1, "0001_history.sql"}},
	} {
		if _, err := tx.Exec(ctx, step.sql, step.args...); err != nil {
			t.Fatalf("old runner: %v", err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
}

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

func TestMigrateTakesOverTheOldRunnersSchema(t *testing.T) {
	t.Parallel()
	dbURL, _ := pgtest.FreshSchema(t)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	migrateTheOldWay(ctx, t, dbURL)
	s, err := postgres.Open(dbURL, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if v, err := postgres.AppliedMigrations(ctx, s.DB()); err != nil || !slices.Equal(v, []int{1}) {
		t.Fatalf("AppliedMigrations before the take-over = %v, %v; want [1] (from the old table)", v, err)
	}
	// History written the old way (no daily partitions: all of it in the
	// default partitions).
	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	old := &legacyStore{db: pool}
	if err := old.Append(ctx, porttest.Fixture()); err != nil {
		t.Fatalf("old Append: %v", err)
	}
	before := answers(ctx, t, old)

	// Three processes start on the old schema together: 0001 is not
	// applied again, and each later migration once.
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		applied []string
	)
	for range 3 {
		p, err := postgres.Open(dbURL, postgres.Options{MaxConns: 1})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		wg.Go(func() {
			names, err := postgres.Migrate(ctx, p.DB())
			if err != nil {
				t.Errorf("Migrate on the old schema: %v", err)
			}
			mu.Lock()
			applied = append(applied, names...)
			mu.Unlock()
		})
	}
	wg.Wait()
	if !slices.Equal(applied, []string{"0002_history_scale.sql", "0003_rank_usage_apart.sql"}) {
		t.Errorf("migrating the old schema applied %v, want 0002 and 0003 once", applied)
	}
	equalState(t, "after the take-over", answers(ctx, t, s), before)
	goose := func() int64 { return queryInt(t, s, `SELECT count(*) FROM goose_db_version`) }
	if n := queryInt(t, s, `SELECT count(*) FROM goose_db_version WHERE version_id = 1 AND is_applied`); n != 1 || goose() != 4 {
		t.Errorf("goose_db_version holds version 1 %d times in %d rows; want once, beside versions 0, 2 and 3", n, goose())
	}
	if v, err := postgres.AppliedMigrations(ctx, s.DB()); err != nil || !slices.Equal(v, []int{1, 2, 3}) {
		t.Errorf("AppliedMigrations after the take-over = %v, %v; want [1 2 3]", v, err)
	}
	if n := queryInt(t, s, `SELECT count(*) FROM loadreporter_migrations`); n != 1 {
		t.Errorf("the old version table holds %d rows, want its 1 left in place", n)
	}

	names, err := postgres.Migrate(ctx, s.DB())
	if err != nil || len(names) != 0 {
		t.Errorf("second Migrate applied %v, %v; want nothing", names, err)
	}
	// Writing another worker's report on that day creates the day's
	// partitions, which take the migrated rows and their minutes' rollups
	// (made again from the reports, not counted twice).
	other := &domain.Report{SourceInstanceID: "new", SequenceID: 1, ReportTime: time.Date(2026, 3, 2, 10, 30, 0, 0, time.UTC),
		Worker: domain.Worker{Addr: "10.0.0.3:30000"}, Status: domain.StatusHealthy}
	if err := s.Append(ctx, []*domain.Report{other}); err != nil {
		t.Fatalf("Append: %v", err)
	}
	after := slices.DeleteFunc(answers(ctx, t, s), func(l string) bool { return strings.Contains(l, "SourceInstanceID:new") })
	equalState(t, "after writing to the migrated day", after, before)
	if n := queryInt(t, s, `SELECT count(*) FROM history_minutes_default`); n != 0 {
		t.Errorf("%d minute rollups left in the default partition", n)
	}
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
// as 0001's code did, and that 0003's Down gives back 0002's rows.
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
	if err := legacyPartitions(ctx, pool, day); err != nil {
		t.Fatal(err)
	}
	old := &legacyStore{db: pool}
	if err := old.Append(ctx, porttest.Fixture()); err != nil {
		t.Fatalf("0001 Append: %v", err)
	}
	before := answers(ctx, t, old)
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
