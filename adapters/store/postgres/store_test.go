package postgres_test

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/loadreporter/loadreporter/adapters/store/postgres"
	"github.com/loadreporter/loadreporter/adapters/store/postgres/pgtest"
	"github.com/loadreporter/loadreporter/domain"
	"github.com/loadreporter/loadreporter/domain/audit"
	"github.com/loadreporter/loadreporter/ports/porttest"
)

// Run with a database: go test ./adapters/store/postgres (DATABASE_URL,
// default postgres://postgres@127.0.0.1:5432/test). Each test works in its
// own schema.
func TestHistoryContract(t *testing.T) {
	t.Parallel()
	pgtest.Require(t)
	porttest.HistoryStore(t, func(t *testing.T) porttest.Store {
		s, _ := newStore(t)
		return s
	})
}

func TestMigrateIsIdempotentAndSafeToRace(t *testing.T) {
	t.Parallel()
	dbURL, _ := pgtest.FreshSchema(t)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	ms, err := postgres.Migrations()
	if err != nil || len(ms) == 0 {
		t.Fatalf("Migrations() = %d, %v", len(ms), err)
	}
	var (
		mu      sync.Mutex
		applied []string
		wg      sync.WaitGroup
	)
	for range 4 {
		s, err := postgres.Open(dbURL, postgres.Options{MaxConns: 1})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		wg.Go(func() {
			names, err := postgres.Migrate(ctx, s.DB())
			if err != nil {
				t.Errorf("Migrate: %v", err)
			}
			mu.Lock()
			applied = append(applied, names...)
			mu.Unlock()
		})
	}
	wg.Wait()
	var want []string
	for _, m := range ms {
		want = append(want, m.Name)
	}
	slices.Sort(applied)
	if !slices.Equal(applied, want) {
		t.Errorf("four racing migrators applied %v, want each of %v once", applied, want)
	}
	s, err := postgres.Open(dbURL, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	again, err := postgres.Migrate(ctx, s.DB())
	if err != nil || len(again) != 0 {
		t.Errorf("second Migrate applied %v, %v; want nothing", again, err)
	}
	versions, err := postgres.AppliedMigrations(ctx, s.DB())
	if err != nil || len(versions) != len(ms) || versions[0] != ms[0].Version {
		t.Errorf("AppliedMigrations = %v, %v", versions, err)
	}
}

func TestPartitionsAndDefaultSafetyNet(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	if err := s.Ping(ctx); err != nil {
		t.Fatalf("Ping: %v", err)
	}
	day := time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)
	// Someone else wrote a row for a day with no partition yet: it lands in
	// the default partition.
	execIn(t, s, `INSERT INTO history_reports (worker_addr, report_time, source_instance_id, sequence_id, status, worker_type)
		VALUES ('w', $1, 'other', 1, 1, 1)`, day.Add(time.Hour))
	if n := queryInt(t, s, `SELECT count(*) FROM history_reports_default`); n != 1 {
		t.Fatalf("default partition holds %d rows, want 1", n)
	}
	r := &domain.Report{SourceInstanceID: "src", SequenceID: 1, ReportTime: day.Add(2 * time.Hour),
		Worker: domain.Worker{Addr: "w"}, Status: domain.StatusHealthy,
		Ranks: []domain.RankLoad{{DPRank: 0, TokenUsage: .5}}}
	if err := s.Append(ctx, []*domain.Report{r}); err != nil {
		t.Fatalf("Append: %v", err)
	}
	// The day's partition was created, took the stray row, and the next
	// day's partition exists ahead of time.
	if n := queryInt(t, s, `SELECT count(*) FROM history_reports_default`); n != 0 {
		t.Errorf("default partition still holds %d rows", n)
	}
	if n := queryInt(t, s, `SELECT count(*) FROM history_reports_p20260501`); n != 2 {
		t.Errorf("partition of 2026-05-01 holds %d rows, want 2", n)
	}
	// The stray row was rolled up with the day's reports.
	if n := queryInt(t, s, `SELECT count(*) FROM history_minutes_p20260501`); n != 2 {
		t.Errorf("minute rollups of 2026-05-01 hold %d rows, want 2", n)
	}
	if n := queryInt(t, s, `SELECT count(*) FROM history_minute_ranks_p20260501`); n != 1 {
		t.Errorf("rank rollups of 2026-05-01 hold %d rows, want 1", n)
	}
	if n := queryInt(t, s, `SELECT count(*) FROM pg_class WHERE relname = 'history_minute_ranks_p20260502' AND relnamespace = current_schema()::regnamespace`); n != 1 {
		t.Errorf("next day's partition missing")
	}

	if n := queryInt(t, s, `SELECT count(*) FROM history_rank_minute_usage_p20260501`); n != 1 {
		t.Errorf("rank values of 2026-05-01 hold %d rows, want 1", n)
	}
	// Every table has the day's partition: reports, minutes, their
	// entries, rank minutes and their values.
	if n := queryInt(t, s, `SELECT count(*) FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
		WHERE c.relname LIKE 'history%_p20260501' AND c.relnamespace = current_schema()::regnamespace`); n != 5 {
		t.Errorf("%d partitions of 2026-05-01, want 5", n)
	}

	// Retention deletes stray rows of the default partition in bounded
	// steps, and drops whole partitions.
	for i := range 3 {
		execIn(t, s, `INSERT INTO history_reports (worker_addr, report_time, source_instance_id, sequence_id, status, worker_type)
			VALUES ('w', $1, 'other', $2, 1, 1)`, time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC), 10+i)
	}
	n, err := s.DeleteBefore(ctx, time.Date(2026, 4, 2, 0, 0, 0, 0, time.UTC), 2)
	if err != nil || n != 2 {
		t.Errorf("DeleteBefore(limit 2) = %d, %v; want 2", n, err)
	}
	n, err = s.DeleteBefore(ctx, time.Date(2026, 5, 3, 0, 0, 0, 0, time.UTC), 2)
	if err != nil || n != 3 { // 1 stray row + the 2 reports of 2026-05-01; 2026-05-02 was empty
		t.Errorf("DeleteBefore(2026-05-03) = %d, %v; want 3", n, err)
	}
	if n := queryInt(t, s, `SELECT count(*) FROM pg_class WHERE relname LIKE 'history_%_p2026050%' AND relnamespace = current_schema()::regnamespace`); n != 0 {
		t.Errorf("%d dropped partitions remain", n)
	}
	// Writing to a dropped day again recreates its partition.
	if err := s.Append(ctx, []*domain.Report{r}); err != nil {
		t.Fatalf("Append after drop: %v", err)
	}
	page, err := s.Reports(ctx, audit.ReportsQuery{Window: audit.Window{Since: day, Until: day.Add(24 * time.Hour)}})
	if err != nil || len(page.Reports) != 1 {
		t.Errorf("Reports after re-append = %v, %v", page.Reports, err)
	}
}

func TestUnreachableDatabaseIsUnavailable(t *testing.T) {
	t.Parallel()
	s, err := postgres.Open("postgres://postgres@127.0.0.1:1/test?connect_timeout=2", postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	r := &domain.Report{SourceInstanceID: "s", SequenceID: 1, ReportTime: time.Now(), Worker: domain.Worker{Addr: "w"}}
	err = s.Append(ctx, []*domain.Report{r})
	if domain.ErrorCode(err) != domain.CodeUnavailable {
		t.Errorf("Append to a closed port = %v, want %s", err, domain.CodeUnavailable)
	}
	_, err = s.Outages(ctx, audit.OutagesQuery{Window: audit.Window{Since: time.Unix(0, 0), Until: time.Now()}})
	if domain.ErrorCode(err) != domain.CodeUnavailable {
		t.Errorf("Outages on a closed port = %v, want %s", err, domain.CodeUnavailable)
	}
	if err := s.Ping(ctx); domain.ErrorCode(err) != domain.CodeUnavailable {
		t.Errorf("Ping on a closed port = %v, want %s", err, domain.CodeUnavailable)
	}
	if _, err := postgres.Open("postgres://%zz", postgres.Options{}); domain.ErrorCode(err) != domain.CodeInvalidArgument {
		t.Errorf("Open(bad url) = %v, want %s", err, domain.CodeInvalidArgument)
	}
}

// TestRanksUnpackInSQL: history_report_ranks(ranks) gives back in SQL
// exactly the ranks the store packed, extreme values included.
func TestRanksUnpackInSQL(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	at := time.Date(2026, 5, 1, 12, 0, 0, 123456000, time.UTC)
	floats := []float64{0, math.Copysign(0, -1), 5e-324, -2.2250738585072014e-308, math.MaxFloat64, 0.1, -1.5,
		math.Inf(1), math.Inf(-1), math.NaN(), 0.625, 1 / 3.0}
	r := &domain.Report{SourceInstanceID: "src", SequenceID: 1, ReportTime: at, Worker: domain.Worker{Addr: "w"}, Status: domain.StatusHealthy}
	for i := range len(floats) / 4 * 4 {
		if i%4 != 0 {
			continue
		}
		r.Ranks = append(r.Ranks, domain.RankLoad{
			DPRank: int64(math.MaxInt32 - i), SnapshotTime: at.Add(-time.Duration(i) * time.Hour),
			NumRunningReqs: math.MinInt64, NumWaitingReqs: math.MaxInt64, NumWaitingUncachedTokens: -1,
			NumUsedTokens: int64(i), NumTotalTokens: 1 << 40, MaxTotalNumTokens: 7, MaxRunningRequests: 0,
			TokenUsage: floats[i], GenThroughput: floats[i+1], CacheHitRate: floats[i+2], Utilization: floats[i+3],
		})
	}
	if err := s.Append(ctx, []*domain.Report{r}); err != nil {
		t.Fatalf("Append: %v", err)
	}
	tx, err := s.DB().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	rows, err := tx.Query(ctx, `SELECT k.* FROM history_reports, history_report_ranks(ranks) k ORDER BY k.dp_rank`)
	if err != nil {
		t.Fatal(err)
	}
	got, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (domain.RankLoad, error) {
		var (
			k  domain.RankLoad
			dp int32
		)
		err := row.Scan(&dp, &k.SnapshotTime, &k.NumRunningReqs, &k.NumWaitingReqs, &k.NumWaitingUncachedTokens,
			&k.NumUsedTokens, &k.NumTotalTokens, &k.MaxTotalNumTokens, &k.MaxRunningRequests,
			&k.TokenUsage, &k.GenThroughput, &k.CacheHitRate, &k.Utilization)
		k.DPRank, k.SnapshotTime = int64(dp), k.SnapshotTime.UTC()
		return k, err
	})
	if err != nil {
		t.Fatal(err)
	}
	want := slices.Clone(r.Ranks)
	slices.Reverse(want) // ascending dp_rank
	bits := func(f float64) string {
		if math.IsNaN(f) {
			return "NaN" // any payload
		}
		return fmt.Sprintf("%x", math.Float64bits(f))
	}
	describe := func(ks []domain.RankLoad) []string {
		var out []string
		for _, k := range ks {
			out = append(out, fmt.Sprintf("%d %s %d %d %d %d %d %d %d %s %s %s %s", k.DPRank, k.SnapshotTime.Format(time.RFC3339Nano),
				k.NumRunningReqs, k.NumWaitingReqs, k.NumWaitingUncachedTokens, k.NumUsedTokens, k.NumTotalTokens,
				k.MaxTotalNumTokens, k.MaxRunningRequests, bits(k.TokenUsage), bits(k.GenThroughput),
				bits(k.CacheHitRate), bits(k.Utilization)))
		}
		return out
	}
	if g, w := describe(got), describe(want); !slices.Equal(g, w) {
		t.Errorf("history_report_ranks:\n got %q\nwant %q", g, w)
	}
}
