package postgres_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/loadreporter/loadreporter/adapters/store/postgres"
)

const defaultDatabaseURL = "postgres://postgres@127.0.0.1:5432/test"

func baseURL() string {
	if u := os.Getenv("DATABASE_URL"); u != "" {
		return u
	}
	return defaultDatabaseURL
}

var (
	reachOnce sync.Once
	reachErr  error
)

// requireDatabase skips the test when PostgreSQL cannot be reached, and
// fails it instead under CI=true (CI always has a database).
func requireDatabase(t testing.TB) {
	t.Helper()
	reachOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, baseURL())
		if err != nil {
			reachErr = err
			return
		}
		reachErr = conn.Ping(ctx)
		_ = conn.Close(ctx)
	})
	if reachErr == nil {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("PostgreSQL at %s is unreachable under CI=true: %v", baseURL(), reachErr)
	}
	t.Skipf("PostgreSQL at %s is unreachable (%v); start it (pg_ctlcluster … main start) or set DATABASE_URL to run these tests", baseURL(), reachErr)
}

// adminExec runs one statement on the base database, outside any test
// schema.
func adminExec(t testing.TB, sql string, args ...any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, baseURL())
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer func() { _ = conn.Close(ctx) }()
	if _, err := conn.Exec(ctx, sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// freshSchema creates an empty schema for t, dropped at its end, and
// returns a database URL whose search_path is that schema, so tests run in
// parallel and leave nothing behind.
func freshSchema(t testing.TB) (dbURL, schema string) {
	t.Helper()
	requireDatabase(t)
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	schema = "lrtest_" + hex.EncodeToString(b)
	adminExec(t, `CREATE SCHEMA `+pgx.Identifier{schema}.Sanitize())
	t.Cleanup(func() { adminExec(t, `DROP SCHEMA `+pgx.Identifier{schema}.Sanitize()+` CASCADE`) })
	return withSearchPath(baseURL(), schema), schema
}

func withSearchPath(dbURL, schema string) string {
	if strings.HasPrefix(dbURL, "postgres://") || strings.HasPrefix(dbURL, "postgresql://") {
		u, err := url.Parse(dbURL)
		if err == nil {
			q := u.Query()
			q.Set("search_path", schema)
			u.RawQuery = q.Encode()
			return u.String()
		}
	}
	return dbURL + " search_path=" + schema
}

// newStore returns a migrated store in a fresh schema.
func newStore(t testing.TB) (*postgres.Store, string) {
	t.Helper()
	dbURL, schema := freshSchema(t)
	s, err := postgres.Open(dbURL, postgres.Options{})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(s.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := postgres.Migrate(ctx, s.DB()); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	return s, schema
}

// queryInt runs a counting query in the store's schema.
func queryInt(t testing.TB, s *postgres.Store, sql string, args ...any) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tx, err := s.DB().Begin(ctx)
	if err != nil {
		t.Fatalf("begin: %v", err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	var n int64
	if err := tx.QueryRow(ctx, sql, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

func execIn(t testing.TB, s *postgres.Store, sql string, args ...any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tx, err := s.DB().Begin(ctx)
	if err != nil {
		t.Fatalf("begin: %v", err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatalf("commit: %v", err)
	}
}
