package postgres

import (
	"context"
	"strings"
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

	// lockTimeout is the lock_timeout of a write's transaction.
	lockTimeout time.Duration

	mu   sync.Mutex
	days map[time.Time]bool // UTC days whose partitions exist
}

var (
	_ ports.HistoryStore = (*Store)(nil)
	_ ports.HistoryQuery = (*Store)(nil)
	_ ports.HistoryChart = (*Store)(nil)
)

// Options configure Open. Zero values take the defaults.
type Options struct {
	// MaxConns bounds the pool's connections (default DefaultMaxConns).
	MaxConns int
	// IdleInTransactionTimeout is how long PostgreSQL lets one of our
	// sessions sit idle inside a transaction before it ends the session
	// (idle_in_transaction_session_timeout): a session whose client went
	// away unseen (a partition, a NAT that forgot the connection) would
	// otherwise hold its locks, a worker's write lock among them, until
	// the server's TCP keepalive gave up (two hours by default), and every
	// write of that worker would wait behind it. Our transactions never
	// idle longer than the Go work between two statements. Default
	// DefaultIdleInTransactionTimeout; negative: the server's setting.
	IdleInTransactionTimeout time.Duration
	// LockTimeout bounds how long a write waits for a lock (lock_timeout,
	// for the write's transaction only), so a write stuck behind another
	// session's lock fails with that cause and is retried, rather than
	// running out its whole timeout. Default DefaultLockTimeout.
	LockTimeout time.Duration
	// KeepAlive is the idle time before TCP keepalive probes, at both
	// ends of every connection (the server's through its
	// tcp_keepalives_* settings, for our sessions): three unanswered
	// probes KeepAlive/3 apart end the connection, so a peer that vanished
	// is noticed within twice KeepAlive. Default DefaultKeepAlive.
	KeepAlive time.Duration
	// ConnectTimeout bounds each connection attempt when the URL sets no
	// connect_timeout. Default DefaultConnectTimeout.
	ConnectTimeout time.Duration
}

// Defaults of Options.
const (
	DefaultIdleInTransactionTimeout = 30 * time.Second
	DefaultLockTimeout              = 15 * time.Second
	DefaultKeepAlive                = 15 * time.Second
	DefaultConnectTimeout           = 10 * time.Second
)

func (o *Options) validate() error {
	for _, d := range []struct {
		name string
		v    *time.Duration
		def  time.Duration
		neg  bool // negative allowed (off)
	}{
		{"idle in transaction timeout", &o.IdleInTransactionTimeout, DefaultIdleInTransactionTimeout, true},
		{"lock timeout", &o.LockTimeout, DefaultLockTimeout, false},
		{"keepalive", &o.KeepAlive, DefaultKeepAlive, false},
		{"connect timeout", &o.ConnectTimeout, DefaultConnectTimeout, false},
	} {
		switch {
		case *d.v < 0 && !d.neg:
			return domain.Errorf(domain.CodeInvalidArgument, "history database %s must be ≥ 0, got %s", d.name, *d.v)
		case *d.v == 0:
			*d.v = d.def
		case *d.v > 0 && *d.v < time.Millisecond:
			return domain.Errorf(domain.CodeInvalidArgument, "history database %s must be 0 or at least 1ms, got %s", d.name, *d.v)
		}
	}
	return nil
}

// Open returns a Store on a connection pool to the database at url (a
// postgres:// URL or a key=value DSN). It does not connect yet and does not
// migrate: call Migrate(ctx, store.DB()) first. Close releases the pool.
// Settings the URL gives (connect_timeout, or a run-time parameter such as
// idle_in_transaction_session_timeout) win over o's.
func Open(url string, o Options) (*Store, error) {
	if err := o.validate(); err != nil {
		return nil, err
	}
	if err := CheckURL(url); err != nil {
		return nil, err
	}
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		return nil, domain.InvalidOption("database-url", "%v", err)
	}
	bound(cfg, o)
	p, err := newPool(cfg, o.MaxConns)
	if err != nil {
		return nil, domain.InvalidOption("database-url", "%v", err)
	}
	s := New(p)
	s.closeDB = p.Close
	s.lockTimeout = o.LockTimeout
	if n := int(p.Config().MaxConns) - 1; n > 0 {
		s.reads = make(chan struct{}, n)
	}
	return s, nil
}

// CheckURL refuses a URL of another database, which the driver would try
// to read as key=value settings and fail on with a baffling message.
func CheckURL(url string) error {
	scheme, _, ok := strings.Cut(url, "://")
	if !ok || strings.ContainsAny(scheme, " =") {
		return nil // key=value settings (host=… dbname=…), read by the driver
	}
	if s := strings.ToLower(scheme); s != "postgres" && s != "postgresql" {
		return domain.InvalidOption("database-url", "a %s:// URL: want postgres://USER@HOST:PORT/DATABASE (or postgresql://, or key=value settings): the history is kept in PostgreSQL only",
			domain.Shorten(scheme, 20))
	}
	return nil
}

// New returns a Store on db (for example a *pgxpool.Pool). Closing the
// Store does not close db.
func New(db DB) *Store {
	return &Store{db: db, days: map[time.Time]bool{}, lockTimeout: DefaultLockTimeout}
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
