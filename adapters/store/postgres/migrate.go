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
// recorded in goose's table (goose_db_version). A schema migrated by the
// runner that came before goose (versions in loadreporter_migrations) is
// taken over before goose looks: while goose's table records no migration,
// the old versions are copied into it, so nothing is applied twice. Both
// steps hold an advisory lock on the schema, so processes starting
// together apply every migration once; running Migrate again is a no-op.
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
	if err := prepareVersionTable(ctx, sqlDB); err != nil {
		return nil, err
	}
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

// AppliedMigrations lists the versions db's schema has applied, ascending:
// those in goose's table, or, in a schema the runner before goose migrated
// and Migrate has not carried over yet, those in loadreporter_migrations.
// It changes nothing.
func AppliedMigrations(ctx context.Context, db DB) ([]int, error) {
	tx, err := db.Begin(ctx)
	if err != nil {
		return nil, err
	}
	defer func() { _ = tx.Rollback(ctx) }()
	var gooseTable, legacy *string
	if err := tx.QueryRow(ctx, `SELECT to_regclass($1)::text, to_regclass($2)::text`,
		versionTable, legacyTable).Scan(&gooseTable, &legacy); err != nil {
		return nil, err
	}
	var q string
	switch {
	case gooseTable != nil:
		// The latest row of a version says whether it is applied.
		q = `SELECT version_id::integer FROM (
			SELECT DISTINCT ON (version_id) version_id, is_applied FROM ` + ident(versionTable) + `
			WHERE version_id > 0 ORDER BY version_id, id DESC) v
		WHERE is_applied ORDER BY version_id`
	case legacy != nil:
		q = `SELECT version FROM ` + ident(legacyTable) + ` ORDER BY version`
	default:
		return nil, nil
	}
	rows, err := tx.Query(ctx, q)
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
