package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"sort"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"

	"github.com/loadreporter/loadreporter/migrations"
)

// Migration is one versioned SQL file.
type Migration struct {
	Version int
	Name    string // file name, e.g. "0001_history.sql"
	SQL     string // the whole file, goose annotations included
}

// Migrations returns the embedded migrations in version order. Versions
// are read from the file names the way goose reads them.
func Migrations() ([]Migration, error) {
	names, err := fs.Glob(migrations.FS, "*.sql")
	if err != nil {
		return nil, err
	}
	out := make([]Migration, 0, len(names))
	for _, name := range names {
		v, err := goose.NumericComponent(name)
		if err != nil {
			return nil, fmt.Errorf("migration %s: %w", name, err)
		}
		b, err := fs.ReadFile(migrations.FS, name)
		if err != nil {
			return nil, err
		}
		out = append(out, Migration{Version: int(v), Name: name, SQL: string(b)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	return out, nil
}

// versionTable is where goose records applied versions, in the schema it
// migrates (unqualified, so the first schema on the search_path).
const versionTable = goose.DefaultTablename

// Migrate applies, through goose, the embedded migrations that db's schema
// (the first schema on its search_path) has not applied yet, each in its
// own transaction, and returns the names it applied. Applied versions are
// recorded in goose's table (goose_db_version). Goose holds an advisory
// lock on the schema while it creates that table and migrates, so
// processes starting together apply every migration once; running Migrate
// again is a no-op.
//
// db must be a *pgxpool.Pool (Migrate borrows one of its connections) or
// a *pgx.Conn (Migrate opens one connection of its own with the same
// configuration).
func Migrate(ctx context.Context, db DB) ([]string, error) {
	p, sqlDB, err := newProvider(db)
	if err != nil {
		return nil, err
	}
	defer func() { _ = sqlDB.Close() }()
	results, err := p.Up(ctx)
	var pe *goose.PartialError
	if errors.As(err, &pe) {
		return names(pe.Applied), fmt.Errorf("migration %s: %w", path.Base(pe.Failed.Source.Path), pe.Err)
	}
	if err != nil {
		return nil, err
	}
	return names(results), nil
}

func names(results []*goose.MigrationResult) []string {
	var out []string
	for _, r := range results {
		out = append(out, path.Base(r.Source.Path))
	}
	return out
}

// newProvider makes the goose provider of the embedded migrations on db,
// and the *sql.DB it made for it (the caller closes it).
func newProvider(db DB) (*goose.Provider, *sql.DB, error) {
	sqlDB, err := openSQL(db)
	if err != nil {
		return nil, nil, err
	}
	p, err := goose.NewProvider(goose.DialectPostgres, sqlDB, migrations.FS,
		goose.WithTableName(versionTable),
		goose.WithSessionLocker(schemaLocker{}),
		goose.WithDisableGlobalRegistry(true),
	)
	if err != nil {
		_ = sqlDB.Close()
		return nil, nil, err
	}
	return p, sqlDB, nil
}

// openSQL gives goose the *sql.DB it works with.
func openSQL(db DB) (*sql.DB, error) {
	switch d := db.(type) {
	case *pgxpool.Pool:
		// Closing this *sql.DB leaves the pool open.
		return stdlib.OpenDBFromPool(d), nil
	case *pgx.Conn:
		return stdlib.OpenDB(*d.Config()), nil
	}
	return nil, fmt.Errorf("migrate: need a *pgxpool.Pool or a *pgx.Conn, got %T", db)
}

// AppliedMigrations lists the versions db's schema has applied, ascending,
// as goose's table records them (none when the table does not exist). It
// changes nothing.
func AppliedMigrations(ctx context.Context, db DB) ([]int, error) {
	tx, err := db.Begin(ctx)
	if err != nil {
		return nil, err
	}
	defer func() { _ = tx.Rollback(ctx) }()
	var table *string
	if err := tx.QueryRow(ctx, `SELECT to_regclass($1)::text`, versionTable).Scan(&table); err != nil {
		return nil, err
	}
	if table == nil {
		return nil, nil
	}
	// The latest row of a version says whether it is applied.
	rows, err := tx.Query(ctx, `SELECT version_id::integer FROM (
			SELECT DISTINCT ON (version_id) version_id, is_applied FROM `+ident(versionTable)+`
			WHERE version_id > 0 ORDER BY version_id, id DESC) v
		WHERE is_applied ORDER BY version_id`)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[int])
}

// MissingMigrations names the embedded migrations db's schema has not
// applied, in version order: none when the schema is current. It changes
// nothing.
func MissingMigrations(ctx context.Context, db DB) ([]string, error) {
	all, err := Migrations()
	if err != nil {
		return nil, err
	}
	applied, err := AppliedMigrations(ctx, db)
	if err != nil {
		return nil, err
	}
	var missing []string
	for _, m := range all {
		if !slices.Contains(applied, m.Version) {
			missing = append(missing, m.Name)
		}
	}
	return missing, nil
}

// migrationLock is the first key of the advisory lock Migrate takes; the
// second is a hash of the current schema, so that schemas of one database
// migrate independently.
const migrationLock = 0x6c726d67 // "lrmg"

// schemaLocker is the goose session locker on migrationLock. Unlike goose's
// own Postgres locker (one key per database, polled every few seconds), it
// locks only the schema being migrated and waits in the database, so the
// second of two processes goes on as soon as the first is done; ctx bounds
// the wait.
type schemaLocker struct{}

var _ lock.SessionLocker = schemaLocker{}

func (schemaLocker) SessionLock(ctx context.Context, conn *sql.Conn) error {
	_, err := conn.ExecContext(ctx, `SELECT pg_advisory_lock($1, hashtext(current_schema()))`, migrationLock)
	return err
}

func (schemaLocker) SessionUnlock(ctx context.Context, conn *sql.Conn) error {
	var held bool
	if err := conn.QueryRowContext(ctx, `SELECT pg_advisory_unlock($1, hashtext(current_schema()))`,
		migrationLock).Scan(&held); err != nil {
		return err
	}
	if !held {
		return errors.New("migration lock was not held")
	}
	return nil
}
