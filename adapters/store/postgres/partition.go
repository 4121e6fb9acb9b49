package postgres

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/loadreporter/loadreporter/domain"
)

// partitionedTable is a table partitioned by day on column; its daily
// partitions are named <table>_pYYYYMMDD.
type partitionedTable struct{ table, column string }

// partitioned are the tables partitioned by day: the reports and their
// rollups, so that a day of history is created and dropped as a whole.
var partitioned = []partitionedTable{
	{"history_reports", "report_time"},
	{"history_minutes", "minute"},
	{"history_minute_entries", "minute"},
	{"history_minute_ranks", "minute"},
	{"history_rank_minute_usage", "minute"},
}

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
	var moved []*domain.Report
	for _, p := range partitioned {
		name := p.table + "_p" + day.Format(dayFormat)
		var exists bool
		if err := tx.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, name).Scan(&exists); err != nil {
			return err
		}
		if exists {
			continue
		}
		rs, err := createPartition(ctx, tx, p, name, from, to, bounds)
		if err != nil {
			return err
		}
		moved = append(moved, rs...)
	}
	// Reports someone else wrote into the default partition may lack
	// rollups (or have them, if a migration made them): their minutes are
	// rolled up again, in the same transaction.
	if len(moved) > 0 {
		slices.SortFunc(moved, compareReports)
		if err := lockWorkers(ctx, tx, moved); err != nil {
			return err
		}
		if err := rebuildRollups(ctx, tx, moved); err != nil {
			return err
		}
	}
	return tx.Commit(ctx)
}

// createPartition creates the partition name of p for [from, to), moves
// into it the rows of its day that the default partition caught, attaches
// it, and returns the reports it moved (none for the rollup tables).
func createPartition(ctx context.Context, tx pgx.Tx, p partitionedTable, name string, from, to time.Time, bounds string) ([]*domain.Report, error) {
	parent, def, id := ident(p.table), ident(p.table+"_default"), ident(name)
	if _, err := tx.Exec(ctx, `CREATE TABLE `+id+` (LIKE `+parent+` INCLUDING DEFAULTS)`); err != nil {
		return nil, err
	}
	move := `WITH moved AS (DELETE FROM ` + def + ` WHERE ` + ident(p.column) + ` >= $1 AND ` + ident(p.column) + ` < $2 RETURNING *)
		INSERT INTO ` + id + ` SELECT * FROM moved`
	var moved []*domain.Report
	if p.table == "history_reports" {
		rows, err := tx.Query(ctx, move+` RETURNING `+strings.Join(reportColumns, ", "), from, to)
		if err != nil {
			return nil, err
		}
		if moved, err = pgx.CollectRows(rows, scanReport); err != nil {
			return nil, err
		}
	} else if _, err := tx.Exec(ctx, move, from, to); err != nil {
		return nil, err
	}
	_, err := tx.Exec(ctx, `ALTER TABLE `+parent+` ATTACH PARTITION `+id+` `+bounds)
	return moved, err
}

func ident(name string) string { return pgx.Identifier{name}.Sanitize() }

// CanCreatePartitions reports whether db's role may create the daily
// partitions every write needs sooner or later: CREATE on the schema and
// the rights of the partitioned tables' owner (a role granted only
// INSERT and SELECT migrates nothing and writes nothing once a new day
// begins). It changes nothing.
func CanCreatePartitions(ctx context.Context, db DB) (bool, error) {
	tx, err := db.Begin(ctx)
	if err != nil {
		return false, err
	}
	defer func() { _ = tx.Rollback(ctx) }()
	names := make([]string, len(partitioned))
	for i, p := range partitioned {
		names[i] = p.table
	}
	var ok bool
	err = tx.QueryRow(ctx, `
		SELECT coalesce(has_schema_privilege(current_schema(), 'CREATE'), false)
		   AND coalesce(bool_and(pg_has_role(c.relowner, 'USAGE')), true) -- no tables yet: CREATE is what counts
		FROM pg_class c
		WHERE c.relnamespace = current_schema()::regnamespace AND c.relname = ANY($1)`, names).Scan(&ok)
	return ok, err
}
