package postgres_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/loadreporter/loadreporter/adapters/store/postgres"
	"github.com/loadreporter/loadreporter/domain"
	"github.com/loadreporter/loadreporter/domain/audit"
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

// schemaState describes what Migrate must leave alone: the relations of
// the schema other than goose's own, and what the store answers.
func schemaState(ctx context.Context, t *testing.T, s *postgres.Store) []string {
	t.Helper()
	tx, err := s.DB().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	rows, err := tx.Query(ctx, `SELECT relkind::text || ' ' || relname FROM pg_class
		WHERE relnamespace = current_schema()::regnamespace AND relname NOT LIKE 'goose\_db\_version%'
		ORDER BY relname`)
	if err != nil {
		t.Fatal(err)
	}
	state, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	page, err := s.Reports(ctx, audit.ReportsQuery{Window: audit.Window{Since: time.Unix(0, 0), Until: time.Now().Add(time.Hour)}})
	if err != nil {
		t.Fatalf("Reports: %v", err)
	}
	for _, r := range page.Reports {
		state = append(state, fmt.Sprintf("%s#%d %s %s", r.SourceInstanceID, r.SequenceID, r.ReportTime, r.Status))
		for _, k := range r.Ranks {
			state = append(state, fmt.Sprintf("  rank %d usage %g", k.DPRank, k.TokenUsage))
		}
	}
	return state
}

func TestMigrateTakesOverTheOldRunnersSchema(t *testing.T) {
	dbURL, _ := freshSchema(t)
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
	r := &domain.Report{SourceInstanceID: "old", SequenceID: 1, ReportTime: time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC),
		Worker: domain.Worker{Addr: "w"}, Status: domain.StatusHealthy,
		Ranks: []domain.RankLoad{{DPRank: 0, TokenUsage: .5}, {DPRank: 1, TokenUsage: .25}}}
	if err := s.Append(ctx, []*domain.Report{r}); err != nil {
		t.Fatalf("Append: %v", err)
	}
	before := schemaState(ctx, t, s)

	// Three processes start on the old schema together.
	var wg sync.WaitGroup
	for range 3 {
		p, err := postgres.Open(dbURL, postgres.Options{MaxConns: 1})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		wg.Go(func() {
			if names, err := postgres.Migrate(ctx, p.DB()); err != nil || len(names) != 0 {
				t.Errorf("Migrate on the old schema applied %v, %v; want nothing", names, err)
			}
		})
	}
	wg.Wait()
	equalState(t, "after the take-over", schemaState(ctx, t, s), before)
	goose := func() int64 { return queryInt(t, s, `SELECT count(*) FROM goose_db_version`) }
	if n := queryInt(t, s, `SELECT count(*) FROM goose_db_version WHERE version_id = 1 AND is_applied`); n != 1 || goose() != 2 {
		t.Errorf("goose_db_version holds version 1 %d times in %d rows; want once, beside version 0", n, goose())
	}
	if v, err := postgres.AppliedMigrations(ctx, s.DB()); err != nil || !slices.Equal(v, []int{1}) {
		t.Errorf("AppliedMigrations after the take-over = %v, %v; want [1]", v, err)
	}
	if n := queryInt(t, s, `SELECT count(*) FROM loadreporter_migrations`); n != 1 {
		t.Errorf("the old version table holds %d rows, want its 1 left in place", n)
	}

	names, err := postgres.Migrate(ctx, s.DB())
	if err != nil || len(names) != 0 {
		t.Errorf("second Migrate applied %v, %v; want nothing", names, err)
	}
	if goose() != 2 {
		t.Errorf("second Migrate left %d rows in goose_db_version, want 2", goose())
	}
	equalState(t, "after a second Migrate", schemaState(ctx, t, s), before)
}

func equalState(t *testing.T, what string, got, want []string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("%s the schema changed:\n got %q\nwant %q", what, got, want)
	}
}

func TestMigrateOnOneConnection(t *testing.T) {
	dbURL, _ := freshSchema(t)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close(ctx) }()
	names, err := postgres.Migrate(ctx, conn)
	if err != nil || !slices.Equal(names, []string{"0001_history.sql"}) {
		t.Errorf("Migrate(*pgx.Conn) = %v, %v", names, err)
	}
	if v, err := postgres.AppliedMigrations(ctx, conn); err != nil || !slices.Equal(v, []int{1}) {
		t.Errorf("AppliedMigrations(*pgx.Conn) = %v, %v", v, err)
	}
}
