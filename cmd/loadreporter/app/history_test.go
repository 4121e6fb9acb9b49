package app

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	neturl "net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/loadreporter/loadreporter/adapters/rpc"
	"github.com/loadreporter/loadreporter/adapters/store/postgres"
	"github.com/loadreporter/loadreporter/adapters/store/postgres/pgtest"
	"github.com/loadreporter/loadreporter/domain"
	"github.com/loadreporter/loadreporter/domain/audit"
	"github.com/loadreporter/loadreporter/ports/porttest"
)

// TestHistoryOffSaysSo: with history off and no database, the history
// service refuses every query saying why, where an empty store answered
// "no rows" (an operator would read: no outages).
func TestHistoryOffSaysSo(t *testing.T) {
	c := DefaultConfig()
	c.HistoryInterval = 0
	h, cleanup, err := NewHistory(c, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cleanup()
	mux := http.NewServeMux()
	mux.Handle(NewHistoryService(c, h, porttest.NewClock(time.Now())).Handler())
	srv := httptest.NewServer(mux)
	defer srv.Close()
	q := rpc.NewHistoryClient(srv.Client(), srv.URL, "")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	now := time.Now().Truncate(time.Millisecond)
	_, err = q.Outages(ctx, audit.OutagesQuery{Window: audit.Window{Since: now.Add(-time.Hour), Until: now}})
	if domain.ErrorCode(err) != domain.CodeFailedPrecondition || !strings.Contains(domain.ErrorMessage(err), "history is off") {
		t.Fatalf("outages with history off: %v, want FAILED_PRECONDITION saying history is off", err)
	}
}

// TestTheLivePageAsksForAnIntervalItMayHave: the live page's Watch asks
// for a second, within --min- and --max-report-interval, which refuse it
// otherwise (a page that never went live at --max-report-interval 500ms).
func TestTheLivePageAsksForAnIntervalItMayHave(t *testing.T) {
	l := DefaultConfig().Limits
	for _, tc := range []struct{ min, max, want time.Duration }{
		{10 * time.Millisecond, time.Minute, time.Second},
		{10 * time.Millisecond, 500 * time.Millisecond, 500 * time.Millisecond},
		{2 * time.Second, time.Minute, 2 * time.Second},
	} {
		l.MinInterval, l.MaxInterval = tc.min, tc.max
		if got := watchInterval(l); got != tc.want {
			t.Errorf("limits [%s, %s]: %s, want %s", tc.min, tc.max, got, tc.want)
		}
	}
}

// TestHistoryCloseIsBoundedByTheGrace: a store whose Close hangs (a pool
// cancelling queries on a database that stopped answering) holds the
// shutdown only until the deadline; the cleanup's Close after that does
// not wait for it again.
func TestHistoryCloseIsBoundedByTheGrace(t *testing.T) {
	release := make(chan struct{})
	h := &History{close: func() { <-release }, closed: make(chan struct{})}
	start := time.Now()
	if h.CloseBy(start.Add(100 * time.Millisecond)) {
		t.Fatal("CloseBy says the store closed, while its Close still runs")
	}
	if took := time.Since(start); took < 100*time.Millisecond || took > 2*time.Second {
		t.Fatalf("CloseBy returned after %s, want about 100ms", took)
	}
	returned := make(chan struct{})
	go func() { h.Close(); close(returned) }()
	select {
	case <-returned:
	case <-time.After(2 * time.Second):
		t.Fatal("Close waited again for a store CloseBy gave up on")
	}
	close(release)
	select {
	case <-h.closed:
	case <-time.After(2 * time.Second):
		t.Fatal("the store's Close never finished")
	}
	done := &History{close: func() {}, closed: make(chan struct{})}
	if !done.CloseBy(time.Now().Add(-time.Second)) {
		t.Fatal("CloseBy says a store that closes at once did not, its deadline being past (the flush spent the grace)")
	}
}

// TestMigrateOffRefusesASchemaItCannotWrite: with --migrate=false and a
// schema that lacks migrations, serve refuses to start, saying how to
// apply them (it started, said ready, and failed every write for ever);
// once migrated, it starts.
func TestMigrateOffRefusesASchemaItCannotWrite(t *testing.T) {
	url, _ := pgtest.FreshSchema(t)
	c := DefaultConfig()
	c.Listen, c.LogLevel, c.DatabaseURL, c.Migrate = "127.0.0.1:0", "error", url, false
	m, err := InitializeMain(c)
	if err == nil {
		_ = m.Close()
		t.Fatal("serve started on a schema without the history tables")
	}
	if !strings.Contains(err.Error(), "loadreporter migrate") || !strings.Contains(err.Error(), "0001_") {
		t.Fatalf("err = %v, want the missing migrations and how to apply them", err)
	}
	c.Migrate = true
	m, err = InitializeMain(c)
	if err != nil {
		t.Fatal(err)
	}
	_ = m.Close()
	c.Migrate = false
	if m, err = InitializeMain(c); err != nil {
		t.Fatalf("a current schema with --migrate=false: %v", err)
	}
	_ = m.Close()
}

// TestServeStartsWhileTheHistoryDatabaseIsDown: a history database that
// refuses connections at start does not keep serve from routers (SPEC
// §5); the schema is migrated in the background once the database
// answers. A refusal that cannot pass by itself (no such database) still
// stops serve, naming the setting at fault.
func TestServeStartsWhileTheHistoryDatabaseIsDown(t *testing.T) {
	url, _ := pgtest.FreshSchema(t)
	proxy := newFlakyProxy(t, url)
	c := DefaultConfig()
	c.Listen, c.LogLevel, c.DatabaseURL = "127.0.0.1:0", "error", proxy.url
	m, err := InitializeMain(c)
	if err != nil {
		t.Fatalf("serve with the history database down: %v", err)
	}
	defer func() { _ = m.Close() }()
	if err := m.Start(); err != nil {
		t.Fatal(err)
	}
	proxy.up.Store(true)
	s, err := postgres.Open(url, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	deadline := time.Now().Add(20 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		missing, err := postgres.MissingMigrations(ctx, s.DB())
		cancel()
		if err == nil && len(missing) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the schema is still not migrated 20 s after the database came up: missing %v, %v", missing, err)
		}
		time.Sleep(100 * time.Millisecond)
	}

	c.DatabaseURL = strings.Replace(url, "/"+dbName(t, url)+"?", "/lr_no_such_database?", 1)
	if m, err := InitializeMain(c); err == nil {
		_ = m.Close()
		t.Fatal("serve started on a database that does not exist")
	} else if !strings.Contains(err.Error(), "--database-url") || !strings.Contains(err.Error(), "lr_no_such_database") {
		t.Fatalf("err = %v, want it to name --database-url and the database", err)
	}
}

// TestServeDoesNotWaitOnASilentHistoryDatabase: a database that accepts
// connections and never answers (a black hole) holds serve back for the
// connect wait, not for the migration's.
func TestServeDoesNotWaitOnASilentHistoryDatabase(t *testing.T) {
	url, _ := pgtest.FreshSchema(t)
	proxy := newFlakyProxy(t, url)
	proxy.silent.Store(true)
	c := DefaultConfig()
	c.Listen, c.LogLevel, c.DatabaseURL = "127.0.0.1:0", "error", proxy.url
	began := time.Now()
	m, err := InitializeMain(c)
	took := time.Since(began)
	if err != nil {
		t.Fatalf("serve with a silent history database: %v", err)
	}
	_ = m.Close()
	// The connect wait and room for a loaded machine; what it must not
	// add is another wait on the silent database (a migration's 10 s, a
	// privilege check's 5 s).
	if bound := migrateConnectWait + 3*time.Second; took >= bound {
		t.Fatalf("serve waited %s for a database that never answers; want under %s", took, bound)
	}
}

// flakyProxy forwards TCP connections to a PostgreSQL server while up;
// while down it closes them at once, or, silent, holds them unanswered.
type flakyProxy struct {
	url    string // the database's URL through the proxy
	up     atomic.Bool
	silent atomic.Bool
}

func newFlakyProxy(t *testing.T, dbURL string) *flakyProxy {
	t.Helper()
	cfg, err := pgx.ParseConfig(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	target := net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port)))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	u, err := neturl.Parse(dbURL)
	if err != nil || u.Scheme == "" {
		t.Fatalf("this test needs DATABASE_URL as a postgres:// URL, got %q", dbURL)
	}
	u.Host = ln.Addr().String()
	p := &flakyProxy{url: u.String()}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			if !p.up.Load() {
				if p.silent.Load() {
					go func() { _, _ = io.Copy(io.Discard, c); _ = c.Close() }()
				} else {
					_ = c.Close()
				}
				continue
			}
			go func() {
				defer c.Close()
				d, err := net.Dial("tcp", target)
				if err != nil {
					return
				}
				defer d.Close()
				go func() { _, _ = io.Copy(d, c); _ = d.Close() }()
				_, _ = io.Copy(c, d)
			}()
		}
	}()
	return p
}

// dbName is the database dbURL names.
func dbName(t *testing.T, dbURL string) string {
	t.Helper()
	cfg, err := pgx.ParseConfig(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	return cfg.Database
}

// TestServeSaysWhenItsRoleCannotWriteHistory: a role that may read and
// insert but not create the daily partitions starts serve (routers do not
// need history) with an error line that says why writes will fail.
func TestServeSaysWhenItsRoleCannotWriteHistory(t *testing.T) {
	url, schema := pgtest.FreshSchema(t)
	c := DefaultConfig()
	c.DatabaseURL = url
	_, cleanup, err := NewHistory(c, slog.New(slog.DiscardHandler)) // migrates as the owner
	if err != nil {
		t.Fatal(err)
	}
	cleanup()
	c.DatabaseURL = pgtest.Role(t, schema, "GRANT SELECT, INSERT ON ALL TABLES IN SCHEMA "+pgx.Identifier{schema}.Sanitize()+" TO %s")
	c.Migrate = false
	var logs strings.Builder
	_, cleanup, err = NewHistory(c, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatalf("serve refused a role that can read the history: %v", err)
	}
	cleanup()
	if !strings.Contains(logs.String(), "may not create the daily partitions") {
		t.Fatalf("no word of the writes that will fail; logs:\n%s", logs.String())
	}
}
