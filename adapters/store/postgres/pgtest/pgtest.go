package pgtest

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
)

// DefaultURL is the local test server, used when DATABASE_URL is unset.
const DefaultURL = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

// BaseURL is DATABASE_URL, or DefaultURL.
func BaseURL() string {
	if u := os.Getenv("DATABASE_URL"); u != "" {
		return u
	}
	return DefaultURL
}

var (
	reachOnce sync.Once
	reachErr  error
)

// Require skips t when PostgreSQL cannot be reached, saying how to run it,
// and fails t instead under CI=true. The server is asked once per process.
func Require(t testing.TB) {
	t.Helper()
	reachOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, BaseURL())
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
		t.Fatalf("PostgreSQL at %s is unreachable under CI=true: %v", BaseURL(), reachErr)
	}
	t.Skipf("PostgreSQL at %s is unreachable (%v); start it (pg_ctlcluster --skip-systemctl-redirect <version> main start) "+
		"or set DATABASE_URL to run this test", BaseURL(), reachErr)
}

// Exec runs one statement on the base database, outside any test schema.
func Exec(t testing.TB, sql string, args ...any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, BaseURL())
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer func() { _ = conn.Close(ctx) }()
	if _, err := conn.Exec(ctx, sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// FreshSchema creates an empty schema for t, dropped when t ends, and
// returns a URL whose search_path is that schema and whose connections
// carry its name as application_name (so a test can count them), so tests
// run in parallel and leave nothing behind.
func FreshSchema(t testing.TB) (dbURL, schema string) {
	t.Helper()
	Require(t)
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	schema = "lrtest_" + hex.EncodeToString(b)
	Exec(t, `CREATE SCHEMA `+pgx.Identifier{schema}.Sanitize())
	t.Cleanup(func() { Exec(t, `DROP SCHEMA `+pgx.Identifier{schema}.Sanitize()+` CASCADE`) })
	return withParams(BaseURL(), schema, true), schema
}

// WithSearchPath returns dbURL with its search_path set to schema, in URL
// or keyword/value form.
func WithSearchPath(dbURL, schema string) string { return withParams(dbURL, schema, false) }

func withParams(dbURL, schema string, named bool) string {
	if strings.HasPrefix(dbURL, "postgres://") || strings.HasPrefix(dbURL, "postgresql://") {
		if u, err := url.Parse(dbURL); err == nil {
			q := u.Query()
			q.Set("search_path", schema)
			if named {
				q.Set("application_name", schema)
			}
			u.RawQuery = q.Encode()
			return u.String()
		}
	}
	s := dbURL + " search_path=" + schema
	if named {
		s += " application_name=" + schema
	}
	return s
}
