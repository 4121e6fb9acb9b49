package postgres_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/loadreporter/loadreporter/adapters/store/postgres"
	"github.com/loadreporter/loadreporter/adapters/store/postgres/pgtest"
	"github.com/loadreporter/loadreporter/domain"
	"github.com/loadreporter/loadreporter/domain/audit"
)

// TestSlowQueriesLeaveTheWriterAConnection: audits stuck on an old day
// (its partition locked by someone else) hold at most all but one of the
// pool's connections, so the history writer still appends today's reports.
func TestSlowQueriesLeaveTheWriterAConnection(t *testing.T) {
	t.Parallel()
	dbURL, schema := pgtest.FreshSchema(t)
	s, err := postgres.Open(dbURL, postgres.Options{MaxConns: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := postgres.Migrate(ctx, s.DB()); err != nil {
		t.Fatal(err)
	}
	old := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	report := func(seq uint64, at time.Time) *domain.Report {
		return &domain.Report{SourceInstanceID: "src", SequenceID: seq, ReportTime: at,
			Worker: domain.Worker{Addr: "w"}, Status: domain.StatusHealthy, Ranks: []domain.RankLoad{{DPRank: 0}}}
	}
	if err := s.Append(ctx, []*domain.Report{report(1, old.Add(time.Hour))}); err != nil {
		t.Fatal(err)
	}
	// Someone else holds the old day's partition.
	locker, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer locker.Close(context.Background())
	tx, err := locker.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	if _, err := tx.Exec(ctx, `LOCK TABLE history_reports_p20260101 IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	qctx, qcancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _ = s.Reports(qctx, audit.ReportsQuery{Window: audit.Window{Since: old, Until: old.Add(2 * time.Hour)}})
		}()
	}
	defer func() { qcancel(); wg.Wait() }()
	// The audits are waiting: one in the database, behind the lock (the
	// others for its connection).
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for queryInt(t, s, `SELECT count(*) FROM pg_stat_activity WHERE application_name = $1 AND wait_event_type = 'Lock'`, schema) == 0 {
		select {
		case <-tick.C:
		case <-ctx.Done():
			t.Fatal("no audit waits on the locked partition")
		}
	}
	actx, acancel := context.WithTimeout(ctx, 3*time.Second)
	defer acancel()
	if err := s.Append(actx, []*domain.Report{report(2, time.Now().UTC())}); err != nil {
		t.Fatalf("Append while audits wait on a lock: %v", err)
	}
}
