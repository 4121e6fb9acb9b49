package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
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

	close     func()
	closeOnce sync.Once
	closed    chan struct{} // closed once close returned
	abandoned atomic.Bool   // a CloseBy gave up waiting
}

// NewHistory opens PostgreSQL when --database-url is set (migrating it
// unless --migrate=false), else a bounded in-memory store. Its cleanup
// closes the connection pool.
func NewHistory(c Config, log *slog.Logger) (*History, func(), error) {
	if c.DatabaseURL == "" {
		s := memory.New(memory.Options{Capacity: c.HistoryCapacity})
		h := &History{Store: s, Query: s, Chart: s, kind: "memory", close: func() {}, closed: make(chan struct{})}
		return h, h.Close, nil
	}
	s, err := postgres.Open(c.DatabaseURL, postgres.Options{})
	if err != nil {
		if msg, ok := strings.CutPrefix(domain.ErrorMessage(err), "database-url: "); ok {
			return nil, nil, errors.New("--database-url: " + msg) // the store names the URL's problem
		}
		return nil, nil, fmt.Errorf("--database-url: %w", err)
	}
	// A database that does not answer yet must not hold serve back
	// (SPEC §5); one that refuses us for good stops it.
	ctx, cancel := context.WithTimeout(context.Background(), migrateConnectWait)
	pingErr := s.Ping(ctx)
	cancel()
	if pingErr != nil && !postgres.Retryable(pingErr) {
		s.Close()
		return nil, nil, fmt.Errorf("--database-url %s: %w", envflag.RedactURL(c.DatabaseURL), pingErr)
	}
	stopMigrating := func() {}
	switch {
	case c.Migrate:
		stopMigrating, err = migrateAtStart(s, c.DatabaseURL, log, pingErr)
	case pingErr == nil:
		err = schemaCurrent(s, c.DatabaseURL, log)
	default:
		log.Warn("--migrate=false: cannot check the history schema yet; history writes retry until the database answers", "err", pingErr)
	}
	if err != nil {
		s.Close()
		return nil, nil, err
	}
	if pingErr == nil {
		warnIfWritesWillFail(s, log)
	}
	h := &History{Store: s, Query: s, Chart: s, kind: "postgres", closed: make(chan struct{}),
		close: func() { stopMigrating(); s.Close() }}
	return h, h.Close, nil
}

// warnIfWritesWillFail says at start what would otherwise show only as
// failing writes, for ever: a role that may not create the daily
// partitions. Serve goes on (routers do not need the history); a
// database that does not answer yet is not judged.
func warnIfWritesWillFail(s *postgres.Store, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if ok, err := postgres.CanCreatePartitions(ctx, s.DB()); err == nil && !ok {
		log.Error("history: the database role may not create the daily partitions (it needs CREATE on the schema and the history tables' owner's rights); history writes will fail until it may")
	}
}

// How long serve waits at start for the history database to answer, then
// for its migrations; past either it serves and migrates in the
// background.
const (
	migrateConnectWait = 2 * time.Second
	migrateStartWait   = 10 * time.Second
)

// migrateAtStart applies the migrations. A database that does not answer
// within migrateConnectWait, or a migration that outlasts migrateStartWait
// (a large history, another replica migrating), must not keep the reporter
// from routers (SPEC §5): the migration then goes on in the background,
// history writes failing and retrying until it is done. A refusal that
// cannot pass by itself (credentials, permissions, no such database) stops
// serve. pingErr is why the database did not answer within
// migrateConnectWait, or nil. The returned func stops the background
// migration and waits for it.
func migrateAtStart(s *postgres.Store, dbURL string, log *slog.Logger, pingErr error) (func(), error) {
	var applied []string
	err := pingErr
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), migrateStartWait)
		applied, err = postgres.Migrate(ctx, s.DB())
		cancel()
	}
	switch {
	case err == nil:
		if len(applied) > 0 {
			log.Info("history schema migrated", "applied", applied)
		}
		return func() {}, nil
	case !postgres.Retryable(err):
		return nil, fmt.Errorf("migrate %s: %w (`loadreporter migrate --database-url %[1]s` applies the migrations by itself)",
			envflag.RedactURL(dbURL), err)
	}
	why := "the history database does not answer"
	if pingErr == nil {
		why = fmt.Sprintf("the history migration takes longer than %s", migrateStartWait)
	}
	log.Warn("history: "+why+"; serving routers, and migrating in the background (history writes wait for it)",
		"applied", applied, "err", err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		migrateInBackground(ctx, s, log)
	}()
	return func() { cancel(); <-done }, nil
}

// migrateInBackground retries the migrations, backing off up to 30 s,
// until they are applied, one fails for good, or ctx ends. An attempt has
// no deadline of its own: a migration of a large history takes minutes.
func migrateInBackground(ctx context.Context, s *postgres.Store, log *slog.Logger) {
	wait := time.Second
	for {
		applied, err := postgres.Migrate(ctx, s.DB())
		switch {
		case err == nil:
			log.Info("history schema migrated; history writes proceed", "applied", applied)
			return
		case ctx.Err() != nil:
			return
		case !postgres.Retryable(err):
			log.Error("history: migration failed; history writes fail until `loadreporter migrate` succeeds", "applied", applied, "err", err)
			return
		}
		log.Warn("history: migration not done yet; retrying", "applied", applied, "retry_in", wait, "err", err)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		wait = min(2*wait, 30*time.Second)
	}
}

// schemaCurrent refuses a schema that lacks migrations (with --migrate=false
// every write would fail, for ever); a database that stops answering is
// only warned about, as the recorder retries until it does.
func schemaCurrent(s *postgres.Store, dbURL string, log *slog.Logger) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	missing, err := postgres.MissingMigrations(ctx, s.DB())
	switch {
	case err != nil:
		log.Warn("--migrate=false: cannot check the history schema yet; history writes retry until the database answers", "err", err)
	case len(missing) > 0:
		return fmt.Errorf("--migrate=false: the history schema at %s lacks migrations %v; apply them with `loadreporter migrate --database-url %[1]s`, or drop --migrate=false",
			envflag.RedactURL(dbURL), missing)
	}
	return nil
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
func NewRecorder(c Config, h *History, clk ports.Clock, b ports.Backoff, m *metrics.Metrics, log *slog.Logger) (*recorder.Recorder, func(), error) {
	if c.HistoryInterval == 0 {
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
		ctx, cancel := context.WithTimeout(context.Background(), c.ShutdownGrace)
		defer cancel()
		_ = r.Close(ctx)
	}, nil
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
func NewHistoryService(c Config, h *History, clk ports.Clock) *rpc.History {
	if c.HistoryInterval == 0 && c.DatabaseURL == "" {
		return rpc.NewHistory(historyOff{}, clk.Now, c.HistoryInterval)
	}
	return rpc.NewHistory(h.Query, clk.Now, c.HistoryInterval)
}

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
