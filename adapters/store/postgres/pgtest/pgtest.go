package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
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

// Role creates a login role for t, dropped when t ends, grants it USAGE
// on schema and each of grants (statements with %s for the role, like
// "GRANT SELECT ON ALL TABLES IN SCHEMA x TO %s"), and returns a URL that
// logs in as it with schema as its search_path. It needs BaseURL in URL
// form and a server that trusts local logins (the test server does).
func Role(t testing.TB, schema string, grants ...string) string {
	t.Helper()
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	name := "lrtest_role_" + hex.EncodeToString(b)
	role := pgx.Identifier{name}.Sanitize()
	Exec(t, `CREATE ROLE `+role+` LOGIN`)
	t.Cleanup(func() {
		Exec(t, `DROP OWNED BY `+role)
		Exec(t, `DROP ROLE `+role)
	})
	Exec(t, `GRANT USAGE ON SCHEMA `+pgx.Identifier{schema}.Sanitize()+` TO `+role)
	for _, g := range grants {
		Exec(t, fmt.Sprintf(g, role))
	}
	u, err := url.Parse(WithSearchPath(BaseURL(), schema))
	if err != nil || u.Scheme == "" {
		t.Fatalf("a test of roles needs DATABASE_URL as a postgres:// URL, got %q", BaseURL())
	}
	u.User = url.User(name)
	return u.String()
}
