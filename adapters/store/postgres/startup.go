package postgres

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v5"
)

// Defaults of StartupOptions.
const (
	// DefaultConnectWait is how long Start waits for the database to
	// answer before it lets the service serve and migrates in the
	// background.
	DefaultConnectWait = 2 * time.Second
	// DefaultMigrateWait is how long Start lets the migrations run before
	// it lets them go on in the background (a large history, another
	// replica migrating).
	DefaultMigrateWait = 10 * time.Second
	// DefaultCheckWait bounds each check Start makes on a database that
	// answered: the schema's version, the role's privileges.
	DefaultCheckWait = 5 * time.Second
)

// StartupOptions say how a service brings its history database up.
// Zero durations take the defaults.
type StartupOptions struct {
	// Migrate applies the embedded migrations; false only checks that the
	// schema has every one of them (MissingMigrationsError).
	Migrate bool
	// ConnectWait bounds the wait for the database to answer.
	ConnectWait time.Duration
	// MigrateWait bounds the migrations' run at start.
	MigrateWait time.Duration
	// CheckWait bounds each check of the schema and the role.
	CheckWait time.Duration
	// Backoff paces the background migration's attempts; nil backs off
	// exponentially from 1 s to 30 s with jitter, so a fleet of workers
	// that lost one database does not retry in lockstep.
	Backoff backoff.BackOff
	// Logger says what the start-up did and what it goes on doing; nil
	// logs nothing.
	Logger *slog.Logger
}

// Startup is the start-up of a store's database for a service that must
// not wait on it: history is not what routers come for. A database that
// does not answer within ConnectWait, or migrations that outlast
// MigrateWait, let the service start, and the migrations go on in the
// background until applied, history writes failing and retrying
// meanwhile; a refusal that cannot pass by itself (credentials,
// permissions, no such database, a failed migration) stops it.
//
// NewStartup starts nothing; Start runs the start-up and Close stops
// what Start left running.
type Startup struct {
	store *Store
	o     StartupOptions

	mu     sync.Mutex
	cancel context.CancelFunc // of the background migration; nil when none runs
	done   chan struct{}      // closed when the background migration returned
}

// NewStartup returns the start-up of s's database; nothing runs until
// Start.
func NewStartup(s *Store, o StartupOptions) (*Startup, error) {
	if s == nil {
		return nil, errors.New("postgres: a start-up needs a store")
	}
	for _, d := range []struct {
		v   *time.Duration
		def time.Duration
	}{{&o.ConnectWait, DefaultConnectWait}, {&o.MigrateWait, DefaultMigrateWait}, {&o.CheckWait, DefaultCheckWait}} {
		if *d.v <= 0 {
			*d.v = d.def
		}
	}
	if o.Backoff == nil {
		o.Backoff = &backoff.ExponentialBackOff{
			InitialInterval:     time.Second,
			RandomizationFactor: 0.5,
			Multiplier:          2,
			MaxInterval:         30 * time.Second,
		}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return &Startup{store: s, o: o}, nil
}

// MissingMigrationsError is Start's refusal of a schema that lacks
// migrations when it may not apply them: every write would fail, for ever.
type MissingMigrationsError struct {
	// Missing names the migrations not applied, in version order.
	Missing []string
}

func (e *MissingMigrationsError) Error() string {
	return fmt.Sprintf("the history schema lacks migrations %v", e.Missing)
}

// MigrateError is Start's refusal when a migration failed for good.
type MigrateError struct {
	// Applied names the migrations applied before the failure.
	Applied []string
	Err     error
}

func (e *MigrateError) Error() string { return "migrate: " + e.Err.Error() }

func (e *MigrateError) Unwrap() error { return e.Err }

// Start brings the database up within ConnectWait, then MigrateWait (or
// CheckWait without Migrate), and returns. It returns an error only for
// what cannot pass by itself: the database's refusal (Retryable false), a
// *MigrateError or a *MissingMigrationsError. What is left to do goes on in a goroutine of
// its own until done, one attempt fails for good, or Close.
func (u *Startup) Start() error {
	s, log := u.store, u.o.Logger
	ctx, cancel := context.WithTimeout(context.Background(), u.o.ConnectWait)
	pingErr := s.Ping(ctx)
	cancel()
	if pingErr != nil && !Retryable(pingErr) {
		return pingErr
	}
	switch {
	case !u.o.Migrate && pingErr != nil:
		log.Warn("history: cannot check the schema yet (migrations off); history writes retry until the database answers", "err", pingErr)
	case !u.o.Migrate:
		if err := u.checkSchema(); err != nil {
			return err
		}
	default:
		if err := u.migrate(pingErr); err != nil {
			return err
		}
	}
	if pingErr == nil {
		u.warnIfWritesWillFail()
	}
	return nil
}

// migrate applies the migrations within MigrateWait, or starts applying
// them in the background; pingErr is why the database did not answer
// within ConnectWait, or nil.
func (u *Startup) migrate(pingErr error) error {
	var applied []string
	err := pingErr
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), u.o.MigrateWait)
		applied, err = Migrate(ctx, u.store.DB())
		cancel()
	}
	switch {
	case err == nil:
		if len(applied) > 0 {
			u.o.Logger.Info("history schema migrated", "applied", applied)
		}
		return nil
	case !Retryable(err):
		return &MigrateError{Applied: applied, Err: err}
	}
	why := "the history database does not answer"
	if pingErr == nil {
		why = fmt.Sprintf("the history migration takes longer than %s", u.o.MigrateWait)
	}
	u.o.Logger.Warn("history: "+why+"; serving, and migrating in the background (history writes wait for it)",
		"applied", applied, "err", err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	u.mu.Lock()
	u.cancel, u.done = cancel, done
	u.mu.Unlock()
	go func() {
		defer close(done)
		u.migrateInBackground(ctx)
	}()
	return nil
}

// migrateInBackground retries the migrations, paced by Backoff, until
// they are applied, one fails for good, or ctx ends. An attempt has no
// deadline of its own: a migration of a large history takes minutes.
func (u *Startup) migrateInBackground(ctx context.Context) {
	log := u.o.Logger
	u.o.Backoff.Reset()
	applied, err := backoff.Retry(ctx, func() ([]string, error) {
		applied, err := Migrate(ctx, u.store.DB())
		if err != nil && !Retryable(err) {
			return applied, backoff.Permanent(err)
		}
		return applied, err
	}, backoff.WithBackOff(u.o.Backoff), backoff.WithMaxElapsedTime(0),
		backoff.WithNotify(func(err error, next time.Duration) {
			log.Warn("history: migration not done yet; retrying", "retry_in", next.Round(time.Millisecond), "err", err)
		}))
	switch {
	case err == nil:
		log.Info("history schema migrated; history writes proceed", "applied", applied)
	case ctx.Err() != nil:
	default:
		log.Error("history: migration failed; history writes fail until the migrations are applied", "applied", applied, "err", err)
	}
}

// checkSchema refuses a schema that lacks migrations; a database that
// stops answering is only warned about, as writes retry until it does.
func (u *Startup) checkSchema() error {
	ctx, cancel := context.WithTimeout(context.Background(), u.o.CheckWait)
	defer cancel()
	missing, err := MissingMigrations(ctx, u.store.DB())
	switch {
	case err != nil:
		u.o.Logger.Warn("history: cannot check the schema yet (migrations off); history writes retry until the database answers", "err", err)
	case len(missing) > 0:
		return &MissingMigrationsError{Missing: missing}
	}
	return nil
}

// warnIfWritesWillFail says at start what would otherwise show only as
// failing writes, for ever: a role that may not create the daily
// partitions. The service goes on.
func (u *Startup) warnIfWritesWillFail() {
	ctx, cancel := context.WithTimeout(context.Background(), u.o.CheckWait)
	defer cancel()
	if ok, err := CanCreatePartitions(ctx, u.store.DB()); err == nil && !ok {
		u.o.Logger.Error("history: the database role may not create the daily partitions (it needs CREATE on the schema and the history tables' owner's rights); history writes will fail until it may")
	}
}

// Close stops the background migration, if one runs, and waits for it.
// It is idempotent and safe before Start.
func (u *Startup) Close() {
	u.mu.Lock()
	cancel, done := u.cancel, u.done
	u.cancel = nil
	u.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
}
