package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/loadreporter/loadreporter/domain/audit"
)

// readTx runs fn in one read-only transaction with a stable snapshot, so a
// query made of several statements sees one state of the tables.
func (s *Store) readTx(ctx context.Context, op string, fn func(tx pgx.Tx) error) error {
	if s.reads != nil {
		select {
		case s.reads <- struct{}{}:
			defer func() { <-s.reads }()
		case <-ctx.Done():
			return wrapErr(ctx, op, ctx.Err())
		}
	}
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

// nonNil makes an empty filter an empty array, never NULL (cardinality of
// NULL is NULL, which would filter everything out).
func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// ranks32 is a rank filter as the database's integer array.
func ranks32(ranks []int64) []int32 {
	out := make([]int32, len(ranks))
	for i, r := range ranks {
		out[i] = int32(r)
	}
	return out
}

// heldWindow rounds w's bounds up to the microsecond, timestamptz's
// precision: pgx would truncate them, moving a bound that lies between two
// microseconds back by one, so that a report there was in the window in
// SQL but not in Go (or the other store). Stored times are whole
// microseconds, so the rounded window selects the same reports as w.
func heldWindow(w audit.Window) audit.Window {
	return audit.Window{Since: ceilMicro(w.Since), Until: ceilMicro(w.Until)}
}

func ceilMicro(t time.Time) time.Time {
	c := t.Truncate(time.Microsecond)
	if c.Before(t) {
		c = c.Add(time.Microsecond)
	}
	return c
}
