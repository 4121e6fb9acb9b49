package cli

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/loadreporter/loadreporter/adapters/rpc"
	"github.com/loadreporter/loadreporter/adapters/store/memory"
	"github.com/loadreporter/loadreporter/adapters/store/postgres"
	"github.com/loadreporter/loadreporter/adapters/store/postgres/pgtest"
	"github.com/loadreporter/loadreporter/domain"
)

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
	t.Parallel()
	dbURL, _ := pgtest.FreshSchema(t)
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
	t.Parallel()
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

// TestAuditFiltersRefuseEmptyEntries: "--status ," silently became no
// filter at all (every status); an empty entry is refused, naming the flag.
func TestAuditFiltersRefuseEmptyEntries(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"--status", ","}, {"--worker", "a:1,,b:2"}, {"--rank", "0,"}} {
		_, err := ParseAudit(append([]string{"reports", "--since", "1h"}, args...), env(nil), &strings.Builder{})
		if err == nil || !strings.Contains(err.Error(), strings.TrimPrefix(args[0], "-")) || !strings.Contains(err.Error(), "empty") {
			t.Errorf("%q: %v, want the flag and its empty entry named", args, err)
		}
	}
	c, err := ParseAudit([]string{"reports", "--since", "1h", "--status", "stale, unreachable", "--status", "healthy"}, env(nil), &strings.Builder{})
	if err != nil || fmt.Sprint(c.Statuses) != fmt.Sprint([]domain.Status{domain.StatusStale, domain.StatusUnreachable, domain.StatusHealthy}) {
		t.Errorf("statuses %q, %v", c.Statuses, err)
	}
}

// TestAuditDatabaseErrorsSayWhy: asking the database directly, a failure
// names the driver's cause on one line, never the password, and a missing
// schema says how to create it.
func TestAuditDatabaseErrorsSayWhy(t *testing.T) {
	t.Parallel()
	pgtest.Require(t)
	dbURL := pgtest.WithSearchPath(pgtest.BaseURL(), "lr_no_such_schema")
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

// TestAuditMissingSchemaHintHidesEveryPassword: the migrate command an
// error suggests names the --database-url as given, its password hidden
// in the query of a URL and in keyword/value form too.
func TestAuditMissingSchemaHintHidesEveryPassword(t *testing.T) {
	t.Parallel()
	pgtest.Require(t)
	u, err := url.Parse(pgtest.BaseURL())
	if err != nil {
		t.Fatalf("this test builds its URLs from DATABASE_URL in URL form: %v", err)
	}
	q := u.Query()
	q.Set("search_path", "lr_no_such_schema")
	q.Set("password", "s3cret-pw") // trust: accepted, ignored
	withQuery := *u
	withQuery.RawQuery = q.Encode()
	keywords := "host=" + u.Hostname()
	for k, v := range map[string]string{"port": u.Port(), "user": u.User.Username(), "dbname": strings.TrimPrefix(u.Path, "/")} {
		if v != "" {
			keywords += " " + k + "=" + v
		}
	}
	keywords += " search_path=lr_no_such_schema password='s3cret pw'"
	for _, tc := range []struct{ dbURL, hint string }{
		{withQuery.String(), "create it with `loadreporter migrate --database-url " + u.Scheme + "://"},
		{keywords, "create it with `loadreporter migrate --database-url host=" + u.Hostname() + " "},
	} {
		got := auditErr(t, "outages", "--database-url", tc.dbURL)
		if !strings.Contains(got, tc.hint) || !strings.Contains(got, "password=xxxxx") || strings.Contains(got, "s3cret") {
			t.Errorf("%q: %q; want the hint %q…, the password hidden", tc.dbURL, got, tc.hint)
		}
	}
}

func TestHidePassword(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ url, in, want string }{
		{"postgres://u:pw12@h/db", "auth pw12 failed", "auth xxxxx failed"},
		{"host=h password=pw12 user=u", "auth pw12 failed", "auth xxxxx failed"},
		{"postgres://u@h/db", "auth pw12 failed", "auth pw12 failed"},
		{"postgres://u@h/db?password=pw12", "auth pw12 failed", "auth xxxxx failed"},
		{"postgres://u:p%40ss@h/db", "auth p@ss failed", "auth xxxxx failed"},
		// Quoted: the whole password, not its first word, and nothing else.
		{"host=h password='pw 12' user=u", "auth pw 12 failed", "auth xxxxx failed"},
	} {
		if got := hidePassword(tc.in, tc.url); got != tc.want {
			t.Errorf("hidePassword(%q, %q) = %q, want %q", tc.in, tc.url, got, tc.want)
		}
	}
}

// TestParseWhenSaysWhatIsWrong: a duration past what Go's durations hold
// is called too long, not "want a duration"; anything else that is neither
// a duration nor a time says what is wanted.
func TestParseWhenSaysWhatIsWrong(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	if _, err := parseWhen("since", "3000000h", now); err == nil || !strings.Contains(err.Error(), `--since "3000000h": too long for a duration`) {
		t.Errorf("3000000h: %v", err)
	}
	if _, err := parseWhen("since", "yesterday", now); err == nil || !strings.Contains(err.Error(), "want a duration before now") {
		t.Errorf("yesterday: %v", err)
	}
	if got, err := parseWhen("since", "90m", now); err != nil || !got.Equal(now.Add(-90*time.Minute)) {
		t.Errorf("90m: %v %v", got, err)
	}
}

// TestAuditSaysOnStderrWhatALimitCut: CSV and JSON carry no note, so a
// result a limit cut says so on stderr, where a script's log shows it; the
// table prints it below its rows as before.
func TestAuditSaysOnStderrWhatALimitCut(t *testing.T) {
	t.Parallel()
	dbURL, _ := pgtest.FreshSchema(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := Migrate(ctx, dbURL, io.Discard); err != nil {
		t.Fatal(err)
	}
	s, err := openStore(dbURL, postgres.Options{MaxConns: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// Two outages: UNREACHABLE, HEALTHY, UNREACHABLE, HEALTHY.
	t0 := time.Now().Add(-time.Minute).Truncate(time.Millisecond)
	var reports []*domain.Report
	for i, st := range []domain.Status{domain.StatusUnreachable, domain.StatusHealthy, domain.StatusUnreachable, domain.StatusHealthy} {
		r := &domain.Report{SourceInstanceID: "i", SequenceID: uint64(i + 1), ReportTime: t0.Add(time.Duration(i) * time.Second),
			Worker: domain.Worker{Addr: "w:1", Type: domain.WorkerTypeRegular}, Status: st}
		if st == domain.StatusUnreachable {
			r.LastError = "engine down"
		} else {
			r.Ranks = []domain.RankLoad{{DPRank: 0, SnapshotTime: r.ReportTime, MaxTotalNumTokens: 100, MaxRunningRequests: 8}}
		}
		reports = append(reports, r)
	}
	if err := s.Append(ctx, reports); err != nil {
		t.Fatal(err)
	}
	for _, format := range []string{"csv", "json", "table"} {
		c, err := ParseAudit([]string{"outages", "--since", "10m", "--limit", "1", "--format", format, "--database-url", dbURL}, env(nil), io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		var out, notes strings.Builder
		c.Notes = &notes
		if err := Audit(ctx, c, &out); err != nil {
			t.Fatalf("%s: %v", format, err)
		}
		inData := strings.Contains(out.String(), "the limit cut this result")
		onStderr := strings.Contains(notes.String(), "audit outages: note: the limit cut this result")
		if format == "table" && (!inData || onStderr) || format != "table" && (inData || !onStderr) {
			t.Errorf("--format %s: the note in the output %v, on stderr %v:\n%s\nstderr: %s", format, inData, onStderr, out.String(), notes.String())
		}
	}
}

// TestAuditReachesATLSReporterAndSaysWhatIsWrong: --tls asks a TLS
// reporter; TLS on one side only, and a refused token, say what to fix.
func TestAuditReachesATLSReporterAndSaysWhatIsWrong(t *testing.T) {
	t.Parallel()
	store, _ := memory.New(memory.Options{})
	history := rpc.NewHistory(store, time.Now, time.Second)
	mux := http.NewServeMux()
	mux.Handle(history.Handler())
	tlsSrv := httptest.NewUnstartedServer(mux)
	tlsSrv.EnableHTTP2 = true
	tlsSrv.StartTLS()
	defer tlsSrv.Close()
	plain := httptest.NewServer(mux)
	defer plain.Close()
	refusing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = io.WriteString(w, `{"code":"unauthenticated","message":"missing or wrong bearer token"}`)
	}))
	defer refusing.Close()
	addr := func(s *httptest.Server) string { return s.Listener.Addr().String() }

	if out, err := runAudit(t, "outages", "--since", "1h", "--target", addr(tlsSrv), "--tls", "--tls-insecure"); err != nil || !strings.Contains(out, "(no rows)") {
		t.Fatalf("--tls to a TLS reporter: %v\n%s", err, out)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--target", addr(tlsSrv)}, "add --tls"},
		{[]string{"--target", addr(plain), "--tls"}, "drop --tls"},
		{[]string{"--target", addr(refusing)}, "--auth-token"},
	} {
		if msg := auditErr(t, append([]string{"outages", "--since", "1h"}, tc.args...)...); !strings.Contains(msg, tc.want) {
			t.Errorf("%q: %s, want a hint %q", tc.args, msg, tc.want)
		}
	}
}

// TestAuditLimitIsALimit: --limit 3 prints three reports, not pages of
// three until the window ends.
func TestAuditLimitIsALimit(t *testing.T) {
	t.Parallel()
	store, _ := memory.New(memory.Options{})
	at := time.Now().Add(-time.Minute).Truncate(time.Millisecond)
	var reports []*domain.Report
	for i := range 10 {
		reports = append(reports, &domain.Report{SourceInstanceID: "i", SequenceID: uint64(i + 1), ReportTime: at.Add(time.Duration(i) * time.Second),
			Worker: domain.Worker{Addr: "w:1", Type: domain.WorkerTypeRegular}, Status: domain.StatusUnreachable, LastError: "down"})
	}
	if err := store.Append(t.Context(), reports); err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle(rpc.NewHistory(store, time.Now, time.Second).Handler())
	srv := httptest.NewServer(mux)
	defer srv.Close()
	out, err := runAudit(t, "reports", "--since", "1h", "--limit", "3", "--format", "csv", "--target", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	if lines := strings.Split(strings.TrimSpace(out), "\n"); len(lines) != 1+3 {
		t.Fatalf("--limit 3: %d lines\n%s", len(lines), out)
	}
	out, err = runAudit(t, "reports", "--since", "1h", "--format", "csv", "--target", srv.Listener.Addr().String())
	if err != nil || len(strings.Split(strings.TrimSpace(out), "\n")) != 1+10 {
		t.Fatalf("no limit: %v\n%s", err, out)
	}
}

// TestAuditHintsAtTheFrontAndCertificates: --target at the front (the
// engine answers 404, or refuses a token meant for the reporter) and a
// certificate this machine does not trust say what to do.
func TestAuditHintsAtTheFrontAndCertificates(t *testing.T) {
	t.Parallel()
	front := httptest.NewServer(http.NotFoundHandler())
	defer front.Close()
	refusing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = io.WriteString(w, `{"error":"Unauthorized"}`)
	}))
	defer refusing.Close()
	tlsSrv := httptest.NewTLSServer(http.NotFoundHandler())
	defer tlsSrv.Close()
	addr := func(s *httptest.Server) string { return s.Listener.Addr().String() }
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--target", addr(front)}, "is --target the front"},
		{[]string{"--target", addr(refusing), "--auth-token", "operator-token-0123456789"}, "refused the token given with --auth-token"},
		{[]string{"--target", addr(tlsSrv), "--tls"}, "--tls-insecure"},
	} {
		msg := auditErr(t, append([]string{"outages", "--since", "1h"}, tc.args...)...)
		if !strings.Contains(msg, tc.want) || strings.Contains(msg, "reports:  (") {
			t.Errorf("%q: %s, want %q", tc.args, msg, tc.want)
		}
	}
}
