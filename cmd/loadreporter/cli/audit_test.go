package cli

import (
	"context"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// testDatabase returns the test database's URL with search_path set to
// schema, or skips (fails under CI=true) when PostgreSQL is unreachable.
func testDatabase(t *testing.T, schema string) string {
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
	_ = conn.Close(ctx)
	u, err := url.Parse(base)
	if err != nil {
		t.Skipf("DATABASE_URL is not a URL: %v", err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

func auditErr(t *testing.T, args ...string) string {
	t.Helper()
	c, err := ParseAudit(args, env(nil), &strings.Builder{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var out strings.Builder
	err = Audit(ctx, c, &out)
	if err == nil {
		t.Fatalf("audit %q succeeded:\n%s", args, out.String())
	}
	return err.Error()
}

// TestAuditDatabaseErrorsSayWhy: asking the database directly, a failure
// names the driver's cause on one line, never the password, and a missing
// schema says how to create it.
func TestAuditDatabaseErrorsSayWhy(t *testing.T) {
	dbURL := testDatabase(t, "lr_no_such_schema")
	u, _ := url.Parse(dbURL)
	u.User = url.UserPassword(u.User.Username(), "s3cret-pw") // trust: accepted, ignored
	withPassword := u.String()

	got := auditErr(t, "outages", "--database-url", withPassword)
	for _, want := range []string{"audit outages: history database: outages failed", `relation "history_reports" does not exist`,
		"SQLSTATE 42P01", "create it with `loadreporter migrate --database-url postgres://postgres:xxxxx@"} {
		if !strings.Contains(got, want) {
			t.Errorf("missing schema: %q lacks %q", got, want)
		}
	}

	u.Host = "127.0.0.1:1" // nothing listens there
	got = auditErr(t, "rank-stats", "--database-url", u.String())
	if !strings.Contains(got, "history database unavailable (rank stats): ") || !strings.Contains(got, "connection refused") {
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
