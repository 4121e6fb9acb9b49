package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v5"

	"github.com/loadreporter/loadreporter/adapters/metrics"
	"github.com/loadreporter/loadreporter/adapters/rpc"
	"github.com/loadreporter/loadreporter/adapters/store/memory"
	"github.com/loadreporter/loadreporter/adapters/store/postgres"
	"github.com/loadreporter/loadreporter/cmd/loadreporter/internal/envflag"
	"github.com/loadreporter/loadreporter/domain"
	"github.com/loadreporter/loadreporter/domain/audit"
	"github.com/loadreporter/loadreporter/domain/recorder"
	"github.com/loadreporter/loadreporter/ports"
)

// History is the configured history store and its queries.
type History struct {
	Store ports.HistoryStore
	Query ports.HistoryQuery
	Chart ports.HistoryChart
	kind  string
	// startup brings the database up at Start; nil for the memory store.
	startup *postgres.Startup
	url     string // --database-url, for messages

	close     func()
	closeOnce sync.Once
	closed    chan struct{} // closed once close returned
	abandoned atomic.Bool   // a CloseBy gave up waiting
}

// NewHistory opens PostgreSQL when --database-url is set, else a bounded
// in-memory store. Nothing connects until Start, which brings the
// database up (migrating it unless --migrate=false); the cleanup closes
// the connection pool.
func NewHistory(c HistoryConfig, log *slog.Logger) (*History, func(), error) {
	if c.DatabaseURL == "" {
		s, err := memory.New(memory.Options{Capacity: c.Capacity})
		if err != nil {
			return nil, nil, err
		}
		h := &History{Store: s, Query: s, Chart: s, kind: "memory", close: func() {}, closed: make(chan struct{})}
		return h, h.Close, nil
	}
	s, err := postgres.Open(c.DatabaseURL, postgres.Options{})
	if err != nil {
		return nil, nil, err
	}
	startup, err := postgres.NewStartup(s, postgres.StartupOptions{Migrate: c.Migrate, Logger: log})
	if err != nil {
		s.Close()
		return nil, nil, err
	}
	h := &History{Store: s, Query: s, Chart: s, kind: "postgres", startup: startup, url: c.DatabaseURL,
		closed: make(chan struct{}), close: func() { startup.Close(); s.Close() }}
	return h, h.Close, nil
}

// Start brings the history database up (postgres.Startup): a database
// that does not answer yet must not hold serve back (docs/history.md); one that
// refuses for good, or a schema --migrate=false cannot write, stops it.
func (h *History) Start() error {
	if h.startup == nil {
		return nil
	}
	err := h.startup.Start()
	var (
		missing *postgres.MissingMigrationsError
		failed  *postgres.MigrateError
	)
	switch url := envflag.RedactURL(h.url); {
	case err == nil:
		return nil
	case errors.As(err, &missing):
		return fmt.Errorf("--migrate=false: the history schema at %s lacks migrations %v; apply them with `loadreporter migrate --database-url %[1]s`, or drop --migrate=false",
			url, missing.Missing)
	case errors.As(err, &failed):
		return fmt.Errorf("migrate %s: %w (`loadreporter migrate --database-url %[1]s` applies the migrations by itself)", url, failed.Err)
	default:
		return fmt.Errorf("--database-url %s: %w", url, err)
	}
}

// CloseBy releases the store, waiting for it until deadline at most, and
// reports whether it finished. A pool whose database stopped answering
// gives each connection up to 15 s to cancel its query (pgx), past any
// shutdown grace; then the process exits without waiting for it.
func (h *History) CloseBy(deadline time.Time) bool {
	h.startClose()
	// A flush may have spent the whole grace: a store that closes at once
	// (memory, a healthy pool) still gets the moment it needs.
	t := time.NewTimer(max(time.Until(deadline), closeAtLeast))
	defer t.Stop()
	select {
	case <-h.closed:
		return true
	case <-t.C:
		h.abandoned.Store(true)
		return false
	}
}

// closeAtLeast is what CloseBy waits whatever its deadline.
const closeAtLeast = 50 * time.Millisecond

// Close releases the store, waiting for it as long as it takes unless a
// CloseBy gave up already; it is idempotent.
func (h *History) Close() {
	if !h.abandoned.Load() {
		h.startClose()
		<-h.closed
	}
}

func (h *History) startClose() {
	h.closeOnce.Do(func() {
		go func() {
			defer close(h.closed)
			h.close()
		}()
	})
}

// NewRecorder returns the history recorder the fire loop writes through,
// not yet started, or nil when --history-interval is 0. Main.Close flushes
// it within the shutdown grace; the cleanup does so too, for when a later
// provider fails or Main never runs.
func NewRecorder(c HistoryConfig, srv ServerConfig, h *History, clk ports.Clock, b ports.Backoff, m *metrics.Metrics, log *slog.Logger) (*recorder.Recorder, func(), error) {
	if c.Interval == 0 {
		return nil, func() {}, nil
	}
	r, err := recorder.New(recorder.Options{Store: h.Store, Clock: clk, Backoff: b, Observer: m.History(), Logger: log})
	if err != nil {
		return nil, nil, err
	}
	m.WatchRecorder(func() metrics.Backlog {
		s := r.Stats()
		return metrics.Backlog{Reports: s.Buffered, Bytes: s.BufferedBytes, Lag: s.Lag, LimitBytes: r.BufferBytes()}
	})
	return r, func() {
		ctx, cancel := context.WithTimeout(context.Background(), srv.ShutdownGrace)
		defer cancel()
		_ = r.Close(ctx)
	}, nil
}

// NewRetention returns what removes history older than
// --history-retention, not yet running, or nil when it is 0 (keep all).
func NewRetention(c HistoryConfig, h *History, clk ports.Clock, m *metrics.Metrics, log *slog.Logger) (*recorder.Retention, error) {
	if c.Retention == 0 {
		return nil, nil
	}
	return recorder.NewRetention(recorder.RetentionOptions{Store: h.Store, Clock: clk, Retention: c.Retention, Logger: log,
		Removed: m.Retention()})
}

// NewBackoff paces the recorder's retries while the store fails: doubling
// from 2×recorder.DefaultMinBackoff with ±50% jitter, so a fleet of
// workers that lost one database does not retry in lockstep. The
// interval stops growing at 2/3 of recorder.DefaultMaxBackoff, which keeps
// the jittered waits within the recorder's bounds.
func NewBackoff() *backoff.ExponentialBackOff {
	return &backoff.ExponentialBackOff{
		InitialInterval:     2 * recorder.DefaultMinBackoff,
		RandomizationFactor: 0.5,
		Multiplier:          2,
		MaxInterval:         recorder.DefaultMaxBackoff * 2 / 3,
	}
}

// NewHistoryService returns the HistoryService RPC over the history; with
// history off and no database to read, every call says so instead of
// answering from an empty store ("no outages").
func NewHistoryService(c HistoryConfig, h *History, clk ports.Clock) *rpc.History {
	if c.off() {
		return rpc.NewHistory(historyOff{}, clk.Now, c.Interval)
	}
	return rpc.NewHistory(h.Query, clk.Now, c.Interval)
}

// off reports whether history is off with no database to read.
func (c HistoryConfig) off() bool { return c.Interval == 0 && c.DatabaseURL == "" }

// historyOff answers every history query with FAILED_PRECONDITION.
type historyOff struct{}

var errHistoryOff = domain.Errorf(domain.CodeFailedPrecondition,
	"history is off on this reporter (--history-interval 0, no --database-url): nothing is recorded to query")

func (historyOff) Reports(context.Context, audit.ReportsQuery) (audit.ReportsPage, error) {
	return audit.ReportsPage{}, errHistoryOff
}
func (historyOff) Outages(context.Context, audit.OutagesQuery) (audit.OutagesResult, error) {
	return audit.OutagesResult{}, errHistoryOff
}
func (historyOff) RankStats(context.Context, audit.RankStatsQuery) (audit.RankStatsResult, error) {
	return audit.RankStatsResult{}, errHistoryOff
}
func (historyOff) Gaps(context.Context, audit.GapsQuery) (audit.GapsResult, error) {
	return audit.GapsResult{}, errHistoryOff
}
func (historyOff) Imbalance(context.Context, audit.ImbalanceQuery) (audit.ImbalanceResult, error) {
	return audit.ImbalanceResult{}, errHistoryOff
}
