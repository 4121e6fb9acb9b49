package postgres

import (
	"context"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/loadreporter/loadreporter/migrations"
)

// Migration is one versioned SQL file.
type Migration struct {
	Version int
	Name    string // file name, e.g. "0001_history.sql"
	SQL     string
}

// Migrations returns the embedded migrations in version order.
func Migrations() ([]Migration, error) {
	return readMigrations(migrations.FS)
}

func readMigrations(fsys fs.FS) ([]Migration, error) {
	names, err := fs.Glob(fsys, "*.sql")
	if err != nil {
		return nil, err
	}
	out := make([]Migration, 0, len(names))
	seen := map[int]string{}
	for _, name := range names {
		num, _, ok := strings.Cut(path.Base(name), "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v <= 0 {
			return nil, fmt.Errorf("migration %s: name must start with a positive number and '_'", name)
		}
		if prev, dup := seen[v]; dup {
			return nil, fmt.Errorf("migrations %s and %s share version %d", prev, name, v)
		}
		seen[v] = name
		b, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, err
		}
		out = append(out, Migration{Version: v, Name: name, SQL: string(b)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	return out, nil
}

// migrationLock is the first key of the advisory lock migrations take; the
// second is a hash of the current schema, so that schemas of one database
// migrate independently.
const migrationLock = 0x6c726d67 // "lrmg"

// Migrate applies the embedded migrations that db's schema (the first
// schema on its search_path) has not applied yet, each in its own
// transaction, and returns the names it applied. Applied versions are
// recorded in loadreporter_migrations. Each transaction first takes a
// transaction-scoped advisory lock, so processes starting together apply
// every migration once; running Migrate again is a no-op.
func Migrate(ctx context.Context, db DB) ([]string, error) {
	ms, err := Migrations()
	if err != nil {
		return nil, err
	}
	return migrate(ctx, db, ms)
}

func migrate(ctx context.Context, db DB, ms []Migration) ([]string, error) {
	var applied []string
	for _, m := range ms {
		done, err := applyOne(ctx, db, m)
		if err != nil {
			return applied, fmt.Errorf("migration %s: %w", m.Name, err)
		}
		if done {
			applied = append(applied, m.Name)
		}
	}
	return applied, nil
}

func applyOne(ctx context.Context, db DB, m Migration) (bool, error) {
	tx, err := db.Begin(ctx)
	if err != nil {
		return false, err
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1, hashtext(current_schema()))`, migrationLock); err != nil {
		return false, err
	}
	if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS loadreporter_migrations (
		version    integer     PRIMARY KEY,
		name       text        NOT NULL,
		applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
		return false, err
	}
	var exists bool
	if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM loadreporter_migrations WHERE version = $1)`, m.Version).Scan(&exists); err != nil {
		return false, err
	}
	if exists {
		return false, nil
	}
	// No arguments: pgx sends the file with the simple protocol, which
	// runs several statements.
	if _, err := tx.Exec(ctx, m.SQL); err != nil {
		return false, err
	}
	if _, err := tx.Exec(ctx, `INSERT INTO loadreporter_migrations (version, name) VALUES ($1, $2)`, m.Version, m.Name); err != nil {
		return false, err
	}
	return true, tx.Commit(ctx)
}

// AppliedMigrations lists the versions db's schema has applied, ascending.
func AppliedMigrations(ctx context.Context, db DB) ([]int, error) {
	tx, err := db.Begin(ctx)
	if err != nil {
		return nil, err
	}
	defer func() { _ = tx.Rollback(ctx) }()
	var reg *string
	if err := tx.QueryRow(ctx, `SELECT to_regclass('loadreporter_migrations')::text`).Scan(&reg); err != nil {
		return nil, err
	}
	if reg == nil {
		return nil, nil
	}
	rows, err := tx.Query(ctx, `SELECT version FROM loadreporter_migrations ORDER BY version`)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[int])
}
