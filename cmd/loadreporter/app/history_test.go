package app

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/loadreporter/loadreporter/adapters/rpc"
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
	c.History.Interval = 0
	h, cleanup, err := NewHistory(c.History, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cleanup()
	mux := http.NewServeMux()
	mux.Handle(NewHistoryService(c.History, h, porttest.NewClock(time.Now())).Handler())
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
	l := DefaultConfig().Sessions
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

// TestHistoryStartNamesTheFlag: the history database's refusals at
// Start (postgres.Startup decides which they are) name the flag to fix
// and how: --migrate=false on a schema that lacks migrations says how to
// apply them, a database that does not exist names --database-url.
func TestHistoryStartNamesTheFlag(t *testing.T) {
	url, _ := pgtest.FreshSchema(t)
	c := DefaultConfig()
	c.Server.Listen, c.Logs.LogLevel, c.History.DatabaseURL, c.History.Migrate = "127.0.0.1:0", "error", url, false
	m, err := InitializeMain(c)
	if err != nil {
		t.Fatal(err)
	}
	err = m.Start()
	_ = m.Close()
	if err == nil || !strings.Contains(err.Error(), "--migrate=false") || !strings.Contains(err.Error(), "loadreporter migrate") ||
		!strings.Contains(err.Error(), "0001_") {
		t.Fatalf("Start on a schema without the history tables: %v, want the missing migrations and how to apply them", err)
	}

	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	c.History.DatabaseURL, c.History.Migrate = strings.Replace(url, "/"+cfg.Database+"?", "/lr_no_such_database?", 1), true
	m, err = InitializeMain(c)
	if err != nil {
		t.Fatal(err)
	}
	err = m.Start()
	_ = m.Close()
	if err == nil || !strings.Contains(err.Error(), "--database-url") || !strings.Contains(err.Error(), "lr_no_such_database") {
		t.Fatalf("Start on a database that does not exist: %v, want it to name --database-url and the database", err)
	}
}
