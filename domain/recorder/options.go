package recorder

import (
	"log/slog"
	"time"

	"github.com/loadreporter/loadreporter/domain"
	"github.com/loadreporter/loadreporter/ports"
)

// Defaults of Options. Batches are large so that the writer keeps up with
// a fleet (50 000 reports a second): much of what an Append costs the store
// is paid per batch (a transaction, a rollup row per worker and minute),
// and a batch is only as large as what waits, so a quiet recorder still
// writes small batches every MaxDelay. A batch is bounded in bytes too, so
// that one Append of wide reports stays a few seconds of work for the
// store however large the backlog (PostgreSQL writes some 25 MB of
// footprint a second on two cores: 16 MiB is under a second there, and
// DefaultWriteRate allows ten times that). The buffer holds many batches
// while one is written.
const (
	DefaultBufferSize   = 50_000
	DefaultBufferBytes  = 256 << 20
	DefaultBatchSize    = 10_000
	DefaultBatchBytes   = 16 << 20
	DefaultMaxDelay     = 250 * time.Millisecond
	DefaultWriteTimeout = 5 * time.Second
	DefaultWriteRate    = 2 << 20
	DefaultMinBackoff   = 100 * time.Millisecond
	DefaultMaxBackoff   = 10 * time.Second
	DefaultLogEvery     = 30 * time.Second
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
	// BufferBytes bounds the memory of every report the recorder holds,
	// waiting and being written, as the Go heap holds them (footprint), so
	// that an engine of a thousand ranks cannot make the recorder hold
	// gigabytes while the store is down; the oldest waiting reports go
	// first. The store's own copies of the batch it is writing are
	// besides: BatchBytes bounds them.
	BufferBytes int
	// BatchSize is the most reports per Append (at most BufferSize).
	BatchSize int
	// BatchBytes is the most footprint per Append (at least one report;
	// at most a quarter of BufferBytes, so the buffer keeps room while a
	// batch is written).
	BatchBytes int
	// MaxDelay is the longest a report waits for its batch to fill.
	MaxDelay time.Duration
	// WriteTimeout and WriteRate bound each Append: it may take
	// WriteTimeout plus the time to write its batch's footprint at
	// WriteRate bytes a second, so a batch of wide reports is not cut off
	// by a timeout meant for a small one. A write that times out is tried
	// again with half as many bytes (and the batches after it too, doubling
	// back after each success), and a write of one report with twice the
	// time (up to 8 times), so a backlog always drains, however slow the
	// store has become.
	WriteTimeout time.Duration
	WriteRate    int
	// Backoff paces the retries of a failed Append; it is Reset before
	// each batch's first retry. Nil retries every MinBackoff.
	Backoff ports.Backoff
	// MinBackoff and MaxBackoff bound every wait Backoff asks for, so a
	// failing store is neither hammered nor left alone for long. A
	// negative wait (a backoff that gives up) waits MaxBackoff: the
	// recorder keeps the batch until the store is back or Close ends.
	MinBackoff time.Duration
	MaxBackoff time.Duration
	// LogEvery is how often a failing store is logged: the first failure,
	// then one line per cause per LogEvery (with the count of the failures
	// it stands for), and a changed cause at once.
	LogEvery time.Duration
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
		{"log interval", &o.LogEvery, DefaultLogEvery},
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
	for _, n := range []struct {
		name string
		v    *int
		def  int
	}{
		{"buffer size", &o.BufferSize, DefaultBufferSize},
		{"buffer bytes", &o.BufferBytes, DefaultBufferBytes},
		{"batch size", &o.BatchSize, DefaultBatchSize},
		{"batch bytes", &o.BatchBytes, DefaultBatchBytes},
		{"write rate", &o.WriteRate, DefaultWriteRate},
	} {
		if *n.v < 0 {
			return domain.Errorf(domain.CodeInvalidArgument, "history %s must be ≥ 0, got %d", n.name, *n.v)
		}
		if *n.v == 0 {
			*n.v = n.def
		}
	}
	o.BatchSize = min(o.BatchSize, o.BufferSize)
	o.BatchBytes = max(1, min(o.BatchBytes, o.BufferBytes/4))
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
