package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/pressly/goose/v3/database"
	"github.com/pressly/goose/v3/lock"
)

// migrationLock is the first key of the advisory lock Migrate takes; the
// second is a hash of the current schema, so that schemas of one database
// migrate independently. The runner before goose took the same key as a
// transaction lock, so an older and a newer process starting together
// still take turns.
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

// legacyTable is where the runner before goose recorded applied versions
// (version, name, applied_at). Migrate reads it and leaves it in place, so
// an older binary still finds its versions there.
const legacyTable = "loadreporter_migrations"

// prepareVersionTable readies goose's version table before goose looks at
// it, in one transaction under the migration lock: it creates the table
// (with goose's own DDL and its version 0) unless it exists, and, while
// the table records no migration yet, copies the versions of legacyTable,
// so a schema the old runner migrated is taken over as it is and nothing
// is applied twice. Goose would create the table itself, but without the
// lock: racing processes would collide and wait out goose's retry, and the
// copy could miss a version the old runner was committing.
func prepareVersionTable(ctx context.Context, db *sql.DB) (err error) {
	store, err := database.NewStore(database.DialectPostgres, versionTable)
	if err != nil {
		return err
	}
	ext, ok := store.(database.StoreExtender)
	if !ok {
		return fmt.Errorf("goose's postgres store cannot tell whether its table exists")
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock($1, hashtext(current_schema()))`, migrationLock); err != nil {
		return err
	}
	exists, err := ext.TableExists(ctx, tx)
	if err != nil {
		return fmt.Errorf("look for %s: %w", versionTable, err)
	}
	if !exists {
		if err := store.CreateVersionTable(ctx, tx); err != nil {
			return fmt.Errorf("create %s: %w", versionTable, err)
		}
		if err := store.Insert(ctx, tx, database.InsertRequest{Version: 0}); err != nil {
			return fmt.Errorf("record version 0: %w", err)
		}
	}
	if err := adoptLegacy(ctx, tx); err != nil {
		return fmt.Errorf("carry over %s: %w", legacyTable, err)
	}
	return tx.Commit()
}

// adoptLegacy copies the versions of legacyTable, if it exists, into
// goose's table, unless that already records a migration.
func adoptLegacy(ctx context.Context, tx *sql.Tx) error {
	var exists bool
	if err := tx.QueryRowContext(ctx, `SELECT to_regclass($1) IS NOT NULL`, legacyTable).Scan(&exists); err != nil {
		return err
	}
	if !exists {
		return nil
	}
	_, err := tx.ExecContext(ctx, `INSERT INTO `+ident(versionTable)+` (version_id, is_applied, tstamp)
		SELECT version, true, applied_at FROM `+ident(legacyTable)+`
		WHERE NOT EXISTS (SELECT 1 FROM `+ident(versionTable)+` WHERE version_id > 0)
		ORDER BY version`)
	return err
}
