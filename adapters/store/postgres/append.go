package postgres

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/loadreporter/loadreporter/domain"
	"github.com/loadreporter/loadreporter/domain/audit"
)

// Append stores reports with their ranks, and the rollups of the minutes
// they fall in, in one transaction; reports that are already stored are
// skipped. See ports.HistoryStore.
func (s *Store) Append(ctx context.Context, reports []*domain.Report) error {
	if err := audit.ValidateReports(reports); err != nil {
		return err
	}
	if len(reports) == 0 {
		return nil
	}
	rs := normalized(reports)
	if err := s.ensureDays(ctx, rs); err != nil {
		return wrapErr(ctx, "create partitions", err)
	}
	tx, err := s.db.Begin(ctx)
	if err != nil {
		return wrapErr(ctx, "append", err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if err := s.limitWrite(ctx, tx); err != nil {
		return wrapErr(ctx, "append", err)
	}
	inserted, err := insertReports(ctx, tx, rs)
	if err != nil {
		return wrapErr(ctx, "append", err)
	}
	if err := lockWorkers(ctx, tx, inserted); err != nil {
		return wrapErr(ctx, "append: lock workers", err)
	}
	if err := rollUp(ctx, tx, inserted); err != nil {
		return wrapErr(ctx, "append: roll up", err)
	}
	return wrapErr(ctx, "append commit", tx.Commit(ctx))
}

// writeStatementTimeout bounds each statement of a write on the server
// when the caller's context has no deadline (the recorder cancels its
// writes itself): far above what a statement of a bounded batch takes, it
// only ends a statement that went on after its client left.
const writeStatementTimeout = time.Minute

// limitWrite bounds tx on the server: its lock waits by lockTimeout (a
// worker's lock held by a session whose client vanished is then named as
// the cause, and the write retried), and each of its statements by what
// is left of ctx, plus a second so that the caller's deadline, which says
// more, comes first.
func (s *Store) limitWrite(ctx context.Context, tx pgx.Tx) error {
	lock, stmt := s.lockTimeout, writeStatementTimeout
	if dl, ok := ctx.Deadline(); ok {
		stmt = max(time.Until(dl), 0) + time.Second
	}
	_, err := tx.Exec(ctx, `SELECT set_config('lock_timeout', $1, true), set_config('statement_timeout', $2, true)`,
		strconv.FormatInt(max(lock.Milliseconds(), 1), 10), strconv.FormatInt(stmt.Milliseconds(), 10))
	return err
}

// normalized copies reports the way the database keeps them
// (audit.Stored), drops repeats of a report within the batch,
// and orders the batch by worker and report order, so that concurrent
// batches take their locks and write their rows in one order.
func normalized(reports []*domain.Report) []*domain.Report {
	type identity struct {
		source string
		seq    uint64
	}
	seen := make(map[identity]bool, len(reports))
	out := make([]*domain.Report, 0, len(reports))
	for _, r := range reports {
		id := identity{r.SourceInstanceID, r.SequenceID}
		if seen[id] {
			continue
		}
		seen[id] = true
		out = append(out, audit.Stored(r))
	}
	slices.SortFunc(out, compareReports)
	return out
}

// compareReports orders reports by worker, then as a worker's reports are
// ordered (report time, source instance, sequence).
func compareReports(a, b *domain.Report) int {
	return cmp.Or(strings.Compare(a.Worker.Addr, b.Worker.Addr), a.ReportTime.Compare(b.ReportTime),
		strings.Compare(a.SourceInstanceID, b.SourceInstanceID), cmp.Compare(a.SequenceID, b.SequenceID))
}

// lockWorkers takes a transaction lock per worker of rs, in one order, so
// that appends for the same worker take turns to merge their reports into
// the rollups (a minute's rows are read, merged and written by one
// transaction at a time). Append takes them after its COPY: appends of the
// same workers copy their reports at the same time and only merge in turn.
func lockWorkers(ctx context.Context, tx pgx.Tx, rs []*domain.Report) error {
	var workers []string
	for _, r := range rs {
		if len(workers) == 0 || workers[len(workers)-1] != r.Worker.Addr {
			workers = append(workers, r.Worker.Addr)
		}
	}
	_, err := tx.Exec(ctx, `
		SELECT pg_advisory_xact_lock(k) FROM (
		    SELECT DISTINCT hashtextextended(current_schema() || '/' || w, $2) AS k
		    FROM unnest($1::text[]) AS w ORDER BY 1) s`, workers, workerLock)
	return err
}

// workerLock seeds the hash of the per-worker lock keys, so they stay
// apart from other users of 64-bit advisory locks.
const workerLock = 0x6c727772 // "lrwr"

// insertReports writes rs (normalized) and returns those it wrote. The
// usual batch is all new and goes in with one COPY. When a report is
// already stored (a retried batch, or another append of the same report
// that committed while this COPY waited for it), the COPY fails on the
// primary key, and the reports not stored yet are copied instead; each
// such failure means another transaction stored some of the batch, so the
// tries are bounded.
func insertReports(ctx context.Context, tx pgx.Tx, rs []*domain.Report) ([]*domain.Report, error) {
	for try := 1; ; try++ {
		if _, err := tx.Exec(ctx, `SAVEPOINT append_copy`); err != nil {
			return nil, err
		}
		err := copyReports(ctx, tx, rs)
		if err == nil {
			_, err = tx.Exec(ctx, `RELEASE SAVEPOINT append_copy`)
			return rs, err
		}
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != "23505" { // unique_violation
			return nil, err
		}
		if try == maxCopyTries {
			return nil, domain.Errorf(domain.CodeUnavailable, "history: reports of the batch kept being written concurrently; retry")
		}
		if _, err := tx.Exec(ctx, `ROLLBACK TO SAVEPOINT append_copy`); err != nil {
			return nil, err
		}
		if rs, err = notStored(ctx, tx, rs); err != nil || len(rs) == 0 {
			return nil, err
		}
	}
}

// maxCopyTries bounds the COPYs of one Append.
const maxCopyTries = 10

// notStored returns the reports of rs that the table does not hold.
func notStored(ctx context.Context, tx pgx.Tx, rs []*domain.Report) ([]*domain.Report, error) {
	ws, ss := make([]string, len(rs)), make([]string, len(rs))
	ts, qs := make([]time.Time, len(rs)), make([]int64, len(rs))
	lo, hi := rs[0].ReportTime, rs[0].ReportTime
	for i, r := range rs {
		ws[i], ts[i], ss[i], qs[i] = r.Worker.Addr, r.ReportTime, r.SourceInstanceID, int64(r.SequenceID)
		lo, hi = minTime(lo, r.ReportTime), maxTime(hi, r.ReportTime)
	}
	rows, err := tx.Query(ctx, `
		SELECT h.source_instance_id, h.sequence_id FROM history_reports h
		JOIN unnest($1::text[], $2::timestamptz[], $3::text[], $4::bigint[]) AS k(w, t, s, q)
		  ON h.worker_addr = k.w AND h.report_time = k.t AND h.source_instance_id = k.s AND h.sequence_id = k.q
		WHERE h.report_time >= $5 AND h.report_time <= $6`, ws, ts, ss, qs, lo, hi)
	if err != nil {
		return nil, err
	}
	type identity struct {
		source string
		seq    int64
	}
	stored := map[identity]bool{}
	var id identity
	if _, err := pgx.ForEachRow(rows, []any{&id.source, &id.seq}, func() error {
		stored[id] = true
		return nil
	}); err != nil {
		return nil, err
	}
	var fresh []*domain.Report
	for _, r := range rs {
		if !stored[identity{r.SourceInstanceID, int64(r.SequenceID)}] {
			fresh = append(fresh, r)
		}
	}
	return fresh, nil
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
