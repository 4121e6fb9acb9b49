package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/loadreporter/loadreporter/domain"
)

// Partitioned tables, and the prefix of their daily partitions' names.
var partitioned = []string{"history_reports", "history_ranks"}

const dayFormat = "20060102"

// partitionLock is the first key of the advisory lock partition changes
// take (the second is a hash of the schema), so that two processes never
// create or drop the same partition at once.
const partitionLock = 0x6c727074 // "lrpt"

// ddlLockTimeout bounds how long partition changes wait for the tables'
// locks, so a long audit query never makes writers queue behind them.
const ddlLockTimeout = "5s"

func utcDay(t time.Time) time.Time {
	t = t.UTC()
	return time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
}

// ensureDays makes sure the partitions of every day in reports exist, and
// the next day's, so that writing after midnight finds its partition.
func (s *Store) ensureDays(ctx context.Context, reports []*domain.Report) error {
	var want []time.Time
	s.mu.Lock()
	seen := map[time.Time]bool{}
	var last time.Time
	for _, r := range reports {
		d := utcDay(r.ReportTime)
		if d.After(last) {
			last = d
		}
		if !s.days[d] && !seen[d] {
			seen[d] = true
			want = append(want, d)
		}
	}
	if next := last.AddDate(0, 0, 1); !s.days[next] && !seen[next] {
		want = append(want, next)
	}
	s.mu.Unlock()
	for _, d := range want {
		if err := s.ensurePartition(ctx, d); err != nil {
			return err
		}
		s.mu.Lock()
		s.days[d] = true
		s.mu.Unlock()
	}
	return nil
}

// ensurePartition creates and attaches day's partitions unless they exist.
// A new partition is created as a plain table, given the rows of its day
// that the default partition caught, and attached: ATTACH takes a weaker
// lock on the parent than CREATE TABLE … PARTITION OF, so reads and writes
// of other days go on.
func (s *Store) ensurePartition(ctx context.Context, day time.Time) error {
	tx, err := s.db.Begin(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, `SET LOCAL lock_timeout = '`+ddlLockTimeout+`'`); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1, hashtext(current_schema()))`, partitionLock); err != nil {
		return err
	}
	from, to := day, day.AddDate(0, 0, 1)
	// Bounds are literals (DDL takes no parameters) made from a day this
	// function formats itself.
	bounds := fmt.Sprintf(`FOR VALUES FROM ('%s 00:00:00+00') TO ('%s 00:00:00+00')`,
		from.Format(time.DateOnly), to.Format(time.DateOnly))
	for _, parent := range partitioned {
		name := parent + "_p" + day.Format(dayFormat)
		var exists bool
		if err := tx.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, name).Scan(&exists); err != nil {
			return err
		}
		if exists {
			continue
		}
		p, def, id := ident(parent), ident(parent+"_default"), ident(name)
		stmts := []string{
			`CREATE TABLE ` + id + ` (LIKE ` + p + ` INCLUDING DEFAULTS)`,
			`WITH moved AS (DELETE FROM ` + def + ` WHERE report_time >= $1 AND report_time < $2 RETURNING *)
			 INSERT INTO ` + id + ` SELECT * FROM moved`,
			`ALTER TABLE ` + p + ` ATTACH PARTITION ` + id + ` ` + bounds,
		}
		for i, q := range stmts {
			var args []any
			if i == 1 {
				args = []any{from, to}
			}
			if _, err := tx.Exec(ctx, q, args...); err != nil {
				return err
			}
		}
	}
	return tx.Commit(ctx)
}

func ident(name string) string { return pgx.Identifier{name}.Sanitize() }
