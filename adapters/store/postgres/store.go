package postgres

import (
	"context"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/loadreporter/loadreporter/domain"
	"github.com/loadreporter/loadreporter/ports"
)

// Store keeps report history in PostgreSQL. It is safe for concurrent use.
type Store struct {
	db      DB
	closeDB func()
	// reads bounds the queries running at once to one connection fewer
	// than the pool holds (Open), so audits, however slow, never take the
	// connection the history writer needs; nil: unbounded (New).
	reads chan struct{}

	mu   sync.Mutex
	days map[time.Time]bool // UTC days whose partitions exist
}

var (
	_ ports.HistoryStore = (*Store)(nil)
	_ ports.HistoryQuery = (*Store)(nil)
	_ ports.HistoryChart = (*Store)(nil)
)

// Options configure Open.
type Options struct {
	// MaxConns bounds the pool's connections (default DefaultMaxConns).
	MaxConns int
}

// Open returns a Store on a connection pool to the database at url (a
// postgres:// URL or a key=value DSN). It does not connect yet and does not
// migrate: call Migrate(ctx, store.DB()) first. Close releases the pool.
func Open(url string, o Options) (*Store, error) {
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		return nil, domain.Errorf(domain.CodeInvalidArgument, "database-url: %v", err)
	}
	p, err := newPool(cfg, o.MaxConns)
	if err != nil {
		return nil, domain.Errorf(domain.CodeInvalidArgument, "database-url: %v", err)
	}
	s := New(p)
	s.closeDB = p.Close
	if n := int(p.Config().MaxConns) - 1; n > 0 {
		s.reads = make(chan struct{}, n)
	}
	return s, nil
}

// New returns a Store on db (for example a *pgxpool.Pool). Closing the
// Store does not close db.
func New(db DB) *Store {
	return &Store{db: db, days: map[time.Time]bool{}}
}

// DB returns the database the store uses, for Migrate.
func (s *Store) DB() DB { return s.db }

// Close releases the pool Open made.
func (s *Store) Close() {
	if s.closeDB != nil {
		s.closeDB()
	}
}

// Ping checks that the database answers (for readiness checks).
func (s *Store) Ping(ctx context.Context) error {
	tx, err := s.db.Begin(ctx)
	if err != nil {
		return wrapErr(ctx, "ping", err)
	}
	return wrapErr(ctx, "ping", tx.Rollback(ctx))
}
