package recorder

import (
	"log/slog"
	"time"

	"github.com/loadreporter/loadreporter/domain"
	"github.com/loadreporter/loadreporter/ports"
)

// Defaults of Options. Batches are large so that the writer keeps up with
// a fleet (50 000 reports a second, issue 14): much of what an Append costs
// the store is paid per batch (a transaction, a rollup row per worker and
// minute), and a batch is only as large as what waits, so a quiet recorder
// still writes small batches every MaxDelay. The
// buffer holds a few batches while one is written.
const (
	DefaultBufferSize   = 50_000
	DefaultBufferBytes  = 256 << 20
	DefaultBatchSize    = 10_000
	DefaultMaxDelay     = 250 * time.Millisecond
	DefaultWriteTimeout = 5 * time.Second
	DefaultMinBackoff   = 100 * time.Millisecond
	DefaultMaxBackoff   = 10 * time.Second
)

// Options configure a Recorder. Store and Clock are required; zero values
// take the defaults above.
type Options struct {
	Store ports.HistoryStore
	Clock ports.Clock
	// BufferSize bounds the reports waiting to be written (the batch being
	// written is held besides). When full, the oldest waiting report is
	// dropped to make room.
	BufferSize int
	// BufferBytes bounds the same reports by their estimated memory
	// (footprint), so that an engine of a thousand ranks cannot make the
	// buffer hold gigabytes while the store is down; the oldest go first.
	BufferBytes int
	// BatchSize is the most reports per Append (at most BufferSize).
	BatchSize int
	// MaxDelay is the longest a report waits for its batch to fill.
	MaxDelay time.Duration
	// WriteTimeout bounds each Append.
	WriteTimeout time.Duration
	// Backoff paces the retries of a failed Append; it is Reset before
	// each batch's first retry. Nil retries every MinBackoff.
	Backoff ports.Backoff
	// MinBackoff and MaxBackoff bound every wait Backoff asks for, so a
	// failing store is neither hammered nor left alone for long. A
	// negative wait (a backoff that gives up) waits MaxBackoff: the
	// recorder keeps the batch until the store is back or Close ends.
	MinBackoff time.Duration
	MaxBackoff time.Duration
	// Observer, when set, learns about writes, failures and drops.
	Observer ports.RecorderObserver
	Logger   *slog.Logger
}

func (o *Options) validate() error {
	if o.Store == nil || o.Clock == nil {
		return domain.Errorf(domain.CodeInvalidArgument, "history recorder needs a store and a clock")
	}
	for _, d := range []struct {
		name string
		v    *time.Duration
		def  time.Duration
	}{
		{"max delay", &o.MaxDelay, DefaultMaxDelay},
		{"write timeout", &o.WriteTimeout, DefaultWriteTimeout},
		{"min backoff", &o.MinBackoff, DefaultMinBackoff},
		{"max backoff", &o.MaxBackoff, DefaultMaxBackoff},
	} {
		if *d.v < 0 {
			return domain.Errorf(domain.CodeInvalidArgument, "history %s must be ≥ 0, got %s", d.name, *d.v)
		}
		if *d.v == 0 {
			*d.v = d.def
		}
	}
	if o.MaxBackoff < o.MinBackoff {
		o.MaxBackoff = o.MinBackoff
	}
	if o.Backoff == nil {
		o.Backoff = constantBackoff(o.MinBackoff)
	}
	if o.BufferSize < 0 || o.BatchSize < 0 || o.BufferBytes < 0 {
		return domain.Errorf(domain.CodeInvalidArgument, "history buffer size, bytes and batch size must be ≥ 0, got %d, %d and %d",
			o.BufferSize, o.BufferBytes, o.BatchSize)
	}
	if o.BufferBytes == 0 {
		o.BufferBytes = DefaultBufferBytes
	}
	if o.BufferSize == 0 {
		o.BufferSize = DefaultBufferSize
	}
	if o.BatchSize == 0 {
		o.BatchSize = DefaultBatchSize
	}
	o.BatchSize = min(o.BatchSize, o.BufferSize)
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return nil
}

// constantBackoff waits the same every time: the default when no Backoff
// is injected (the composition root injects a jittered exponential one).
type constantBackoff time.Duration

func (c constantBackoff) NextBackOff() time.Duration { return time.Duration(c) }
func (constantBackoff) Reset()                       {}
