package cli

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// testDatabase returns the test database's URL with search_path set to
// schema, or skips (fails under CI=true) when PostgreSQL is unreachable.
// With create, the schema is created empty and dropped when t ends.
func testDatabase(t *testing.T, schema string, create bool) string {
	t.Helper()
	base := os.Getenv("DATABASE_URL")
	if base == "" {
		base = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("PostgreSQL unreachable at DATABASE_URL=%s under CI: %v", base, err)
		}
		t.Skipf("PostgreSQL unreachable (%v)", err)
	}
	defer func() { _ = conn.Close(ctx) }()
	if create {
		id := pgx.Identifier{schema}.Sanitize()
		if _, err := conn.Exec(ctx, "CREATE SCHEMA "+id); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if c, err := pgx.Connect(ctx, base); err == nil {
				_, _ = c.Exec(ctx, "DROP SCHEMA "+id+" CASCADE")
				_ = c.Close(ctx)
			}
		})
	}
	u, err := url.Parse(base)
	if err != nil {
		t.Skipf("DATABASE_URL is not a URL: %v", err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

// runAudit runs `loadreporter audit args…` and returns what it printed.
func runAudit(t *testing.T, args ...string) (string, error) {
	t.Helper()
	c, err := ParseAudit(args, env(nil), &strings.Builder{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var out strings.Builder
	err = Audit(ctx, c, &out)
	return out.String(), err
}

func auditErr(t *testing.T, args ...string) string {
	t.Helper()
	out, err := runAudit(t, args...)
	if err == nil {
		t.Fatalf("audit %q succeeded:\n%s", args, out)
	}
	return err.Error()
}

// TestAuditGapsFromTheDatabase: asked of the database directly, gaps
// needs no interval: it is serve's default --history-interval.
func TestAuditGapsFromTheDatabase(t *testing.T) {
	dbURL := testDatabase(t, fmt.Sprintf("lrcli_gaps_%d", time.Now().UnixNano()), true)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := Migrate(ctx, dbURL, io.Discard); err != nil {
		t.Fatal(err)
	}
	out, err := runAudit(t, "gaps", "--since", "24h", "--database-url", dbURL)
	if err != nil || !strings.HasPrefix(out, "Kind") || !strings.Contains(out, "(no rows)") {
		t.Fatalf("audit gaps --since 24h --database-url …: %v\n%s", err, out)
	}
}

func TestAuditHistoryIntervalFlag(t *testing.T) {
	for _, tc := range []struct {
		args []string
		env  map[string]string
		want time.Duration
	}{
		{nil, nil, 0}, // the reporter's own, or audittable.DefaultHistoryInterval
		{[]string{"--history-interval", "200ms"}, nil, 200 * time.Millisecond},
		{[]string{"--interval", "300ms"}, nil, 300 * time.Millisecond}, // deprecated spelling
		{nil, map[string]string{"LOADREPORTER_HISTORY_INTERVAL": "2s"}, 2 * time.Second},
		// watch's report interval is no history interval.
		{nil, map[string]string{"LOADREPORTER_INTERVAL": "250ms"}, 0},
		{[]string{"--history-interval", "5s"}, map[string]string{"LOADREPORTER_HISTORY_INTERVAL": "2s"}, 5 * time.Second},
	} {
		c, err := ParseAudit(append([]string{"gaps"}, tc.args...), env(tc.env), &strings.Builder{})
		if err != nil || c.Interval != tc.want {
			t.Errorf("%q %v: interval %s, %v; want %s", tc.args, tc.env, c.Interval, err, tc.want)
		}
	}
}

// TestAuditDatabaseErrorsSayWhy: asking the database directly, a failure
// names the driver's cause on one line, never the password, and a missing
// schema says how to create it.
func TestAuditDatabaseErrorsSayWhy(t *testing.T) {
	dbURL := testDatabase(t, "lr_no_such_schema", false)
	u, _ := url.Parse(dbURL)
	u.User = url.UserPassword(u.User.Username(), "s3cret-pw") // trust: accepted, ignored
	withPassword := u.String()

	got := auditErr(t, "outages", "--database-url", withPassword)
	for _, want := range []string{"audit outages: history database: outages failed", `relation "history_`, `" does not exist (SQLSTATE 42P01)`,
		"SQLSTATE 42P01", "create it with `loadreporter migrate --database-url postgres://postgres:xxxxx@"} {
		if !strings.Contains(got, want) {
			t.Errorf("missing schema: %q lacks %q", got, want)
		}
	}

	u.Host = "127.0.0.1:1" // nothing listens there
	got = auditErr(t, "gaps", "--database-url", u.String())
	if !strings.Contains(got, "history database unavailable (gaps): ") || !strings.Contains(got, "connection refused") {
		t.Errorf("unreachable: %q", got)
	}
	for _, msg := range []string{got, auditErr(t, "outages", "--database-url", withPassword)} {
		if strings.Contains(msg, "s3cret-pw") || strings.Contains(msg, "\n") {
			t.Errorf("error shows the password or spans lines: %q", msg)
		}
	}
}

func TestHidePassword(t *testing.T) {
	for _, tc := range []struct{ url, in, want string }{
		{"postgres://u:pw12@h/db", "auth pw12 failed", "auth xxxxx failed"},
		{"host=h password=pw12 user=u", "auth pw12 failed", "auth xxxxx failed"},
		{"postgres://u@h/db", "auth pw12 failed", "auth pw12 failed"},
	} {
		if got := hidePassword(tc.in, tc.url); got != tc.want {
			t.Errorf("hidePassword(%q, %q) = %q, want %q", tc.in, tc.url, got, tc.want)
		}
	}
}
