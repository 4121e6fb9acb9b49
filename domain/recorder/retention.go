package recorder

import (
	"context"
	"log/slog"
	"time"

	"github.com/loadreporter/loadreporter/domain"
	"github.com/loadreporter/loadreporter/ports"
)

// Defaults of RetentionOptions.
const (
	DefaultRetentionEvery = 10 * time.Minute
	DefaultRetentionLimit = 10_000
)

// RetentionOptions configure NewRetention. Store, Clock and Retention are
// required.
type RetentionOptions struct {
	Store ports.HistoryStore
	Clock ports.Clock
	// Retention is how long history is kept (--history-retention).
	Retention time.Duration
	// Every is the pause between two enforcements.
	Every time.Duration
	// Limit bounds the reports one DeleteBefore call deletes row by row.
	Limit int
	// Removed, when set, is told how many reports each enforcement removed,
	// or why it failed.
	Removed func(n int64, err error)
	Logger  *slog.Logger
}

// Retention removes history older than its Retention, at once when it
// runs and then every Every.
type Retention struct{ o RetentionOptions }

// NewRetention validates o and returns a Retention; nothing runs until
// Run. Its errors are INVALID_ARGUMENT (history-retention names the
// option).
func NewRetention(o RetentionOptions) (*Retention, error) {
	if o.Store == nil || o.Clock == nil {
		return nil, domain.Errorf(domain.CodeInvalidArgument, "history retention needs a store and a clock")
	}
	if o.Retention <= 0 {
		return nil, domain.InvalidOption("history-retention", "%s: must be > 0 (no retention keeps everything)", o.Retention)
	}
	if o.Every <= 0 {
		o.Every = DefaultRetentionEvery
	}
	if o.Limit <= 0 {
		o.Limit = DefaultRetentionLimit
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return &Retention{o: o}, nil
}

// Run enforces retention at once and then every Every, until ctx ends:
// it removes the reports recorded before now − Retention, calling
// DeleteBefore until it returns 0, so each delete stays bounded. A
// failure is logged and retried at the next round. It returns ctx's
// error.
func (r *Retention) Run(ctx context.Context) error {
	o := r.o
	for {
		n, err := Prune(ctx, o.Store, o.Clock.Now().Add(-o.Retention), o.Limit)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil {
			o.Logger.Warn("history: retention failed; retrying later", "removed", n, "err", err)
		}
		if o.Removed != nil {
			o.Removed(n, err)
		}
		t := o.Clock.NewTimer(o.Clock.Now().Add(o.Every))
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C():
		}
	}
}

// Prune removes the reports recorded before t, limit at a time, and
// returns how many it removed.
func Prune(ctx context.Context, store ports.HistoryStore, t time.Time, limit int) (int64, error) {
	var total int64
	for {
		n, err := store.DeleteBefore(ctx, t, limit)
		total += n
		if err != nil || n == 0 {
			return total, err
		}
		if err := ctx.Err(); err != nil {
			return total, err
		}
	}
}
