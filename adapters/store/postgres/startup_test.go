package postgres_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	neturl "net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v5"
	"github.com/jackc/pgx/v5"

	"github.com/loadreporter/loadreporter/adapters/store/postgres"
	"github.com/loadreporter/loadreporter/adapters/store/postgres/pgtest"
	"github.com/loadreporter/loadreporter/internal/sharedtest"
)

// startup opens dbURL and returns its start-up with o, closed with the
// store when the test ends.
func startup(t *testing.T, dbURL string, o postgres.StartupOptions) (*postgres.Startup, *postgres.Store) {
	t.Helper()
	s, err := postgres.Open(dbURL, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	u, err := postgres.NewStartup(s, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { u.Close(); s.Close() })
	return u, s
}

// TestStartupWithoutMigrationsRefusesASchemaItCannotWrite: with Migrate
// off, a schema that lacks migrations is refused, naming them (a service
// that started anyway failed every write for ever); once migrated, it
// starts.
func TestStartupWithoutMigrationsRefusesASchemaItCannotWrite(t *testing.T) {
	url, _ := pgtest.FreshSchema(t)
	u, s := startup(t, url, postgres.StartupOptions{})
	err := u.Start()
	var missing *postgres.MissingMigrationsError
	if !errors.As(err, &missing) || len(missing.Missing) == 0 || !strings.HasPrefix(missing.Missing[0], "0001_") {
		t.Fatalf("Start on an empty schema without migrations: %v, want the missing migrations", err)
	}
	migrating, _ := startup(t, url, postgres.StartupOptions{Migrate: true})
	if err := migrating.Start(); err != nil {
		t.Fatal(err)
	}
	if missing, err := postgres.MissingMigrations(t.Context(), s.DB()); err != nil || len(missing) != 0 {
		t.Fatalf("after Start with Migrate: missing %v, %v", missing, err)
	}
	if err := u.Start(); err != nil {
		t.Fatalf("a current schema without migrations: %v", err)
	}
}

// TestStartupGoesOnWhileTheDatabaseIsDown: a database that refuses
// connections at start does not fail Start; the schema is migrated in the
// background, paced by the backoff, once the database answers. A refusal
// that cannot pass by itself (no such database) fails Start.
func TestStartupGoesOnWhileTheDatabaseIsDown(t *testing.T) {
	url, _ := pgtest.FreshSchema(t)
	proxy := newFlakyProxy(t, url)
	attempts := make(chan struct{}, 100)
	b := &countingBackoff{BackOff: backoff.NewConstantBackOff(20 * time.Millisecond), calls: attempts}
	u, _ := startup(t, proxy.url, postgres.StartupOptions{Migrate: true, Backoff: b})
	if err := u.Start(); err != nil {
		t.Fatalf("Start with the database down: %v", err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	select { // the background migration has failed once: it runs
	case <-attempts:
	case <-ctx.Done():
		t.Fatal("no background attempt")
	}
	proxy.up.Store(true)
	s, err := postgres.Open(url, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for {
		missing, err := postgres.MissingMigrations(ctx, s.DB())
		if err == nil && len(missing) == 0 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the schema is still not migrated 20 s after the database came up: missing %v, %v", missing, err)
		case <-attempts: // the next attempt is due
		case <-time.After(50 * time.Millisecond):
		}
	}

	noDB := strings.Replace(url, "/"+dbName(t, url)+"?", "/lr_no_such_database?", 1)
	refused, _ := startup(t, noDB, postgres.StartupOptions{Migrate: true})
	if err := refused.Start(); err == nil || postgres.Retryable(err) || !strings.Contains(err.Error(), "lr_no_such_database") {
		t.Fatalf("Start on a database that does not exist: %v, want a refusal naming it", err)
	}
}

// TestStartupDoesNotWaitOnASilentDatabase: a database that accepts
// connections and never answers holds Start for ConnectWait, not for the
// migration's wait or a check's.
func TestStartupDoesNotWaitOnASilentDatabase(t *testing.T) {
	url, _ := pgtest.FreshSchema(t)
	proxy := newFlakyProxy(t, url)
	proxy.silent.Store(true)
	u, _ := startup(t, proxy.url, postgres.StartupOptions{Migrate: true, ConnectWait: 200 * time.Millisecond,
		MigrateWait: time.Hour, CheckWait: time.Hour})
	done := make(chan error, 1)
	go func() { done <- u.Start() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Start with a silent database: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Start waited on a database that never answers")
	}
}

// TestStartupSaysWhenItsRoleCannotWrite: a role that may read and insert
// but not create the daily partitions starts (history is not what the
// service is for), with an error line that says why writes will fail.
func TestStartupSaysWhenItsRoleCannotWrite(t *testing.T) {
	url, schema := pgtest.FreshSchema(t)
	owner, _ := startup(t, url, postgres.StartupOptions{Migrate: true})
	if err := owner.Start(); err != nil {
		t.Fatal(err)
	}
	reader := pgtest.Role(t, schema, "GRANT SELECT, INSERT ON ALL TABLES IN SCHEMA "+pgx.Identifier{schema}.Sanitize()+" TO %s")
	var logs sharedtest.LockedBuffer
	u, _ := startup(t, reader, postgres.StartupOptions{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err := u.Start(); err != nil {
		t.Fatalf("a role that can read the history: %v", err)
	}
	if !strings.Contains(logs.String(), "may not create the daily partitions") {
		t.Fatalf("no word of the writes that will fail; logs:\n%s", logs.String())
	}
}

// TestStartupCloseStopsTheBackgroundMigration: Close ends the background
// migration of a database that never comes up, and a Close before Start
// or twice is harmless.
func TestStartupCloseStopsTheBackgroundMigration(t *testing.T) {
	url, _ := pgtest.FreshSchema(t)
	proxy := newFlakyProxy(t, url)
	attempts := make(chan struct{}, 100)
	u, _ := startup(t, proxy.url, postgres.StartupOptions{Migrate: true,
		Backoff: &countingBackoff{BackOff: backoff.NewConstantBackOff(time.Hour), calls: attempts}})
	u.Close()
	if err := u.Start(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-attempts: // waiting an hour for the next attempt
	case <-time.After(20 * time.Second):
		t.Fatal("no background attempt")
	}
	closed := make(chan struct{})
	go func() { u.Close(); u.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(20 * time.Second):
		t.Fatal("Close did not stop the background migration")
	}
}

// countingBackoff tells calls about every wait asked of it.
type countingBackoff struct {
	backoff.BackOff
	calls chan<- struct{}
}

func (b *countingBackoff) NextBackOff() time.Duration {
	select {
	case b.calls <- struct{}{}:
	default:
	}
	return b.BackOff.NextBackOff()
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
