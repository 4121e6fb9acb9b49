package recorder

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/loadreporter/loadreporter/domain"
	"github.com/loadreporter/loadreporter/domain/audit"
	"github.com/loadreporter/loadreporter/ports"
)

// Defaults of Options.
const (
	DefaultBufferSize   = 10_000
	DefaultBatchSize    = 500
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
	// BatchSize is the most reports per Append (at most BufferSize).
	BatchSize int
	// MaxDelay is the longest a report waits for its batch to fill.
	MaxDelay time.Duration
	// WriteTimeout bounds each Append.
	WriteTimeout time.Duration
	// MinBackoff is the wait after the first failed Append; it doubles per
	// further failure up to MaxBackoff.
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
	if o.BufferSize < 0 || o.BatchSize < 0 {
		return domain.Errorf(domain.CodeInvalidArgument, "history buffer and batch sizes must be ≥ 0, got %d and %d", o.BufferSize, o.BatchSize)
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

// Stats are the recorder's counters since New.
type Stats struct {
	// Recorded counts the reports handed to Record.
	Recorded int64
	// Written counts the reports the store accepted, in Batches Appends.
	Written int64
	Batches int64
	// Dropped counts the reports lost, whatever the reason (see
	// ports.DropReason): Recorded = Written + Dropped + Buffered.
	Dropped int64
	// Failures counts failed Append attempts.
	Failures int64
	// Buffered is the number of reports held: waiting plus being written.
	Buffered int
	// Lag is the age of the oldest report not yet written; 0 when none.
	Lag time.Duration
	// LastError is the error of the last failed Append (nil if none ever
	// failed), at LastErrorAt; Failing says the latest attempt failed.
	LastError   error
	LastErrorAt time.Time
	Failing     bool
}

type item struct {
	r  *domain.Report
	at time.Time // when Record took it
}

// Recorder batches reports into a HistoryStore off the fire loop. Its
// methods are safe for concurrent use.
type Recorder struct {
	o     Options
	wake  chan struct{} // poked when there is news for the writer
	done  chan struct{} // closed when the writer ends
	abort context.CancelFunc
	// abortCtx ends when the recorder must stop at once (Close's deadline).
	abortCtx context.Context

	mu       sync.Mutex
	queue    ring
	inflight []item
	closing  bool
	stats    Stats
}

// New validates o and starts the writer. Call Close to stop it.
func New(o Options) (*Recorder, error) {
	if err := o.validate(); err != nil {
		return nil, err
	}
	abortCtx, abort := context.WithCancel(context.Background())
	w := &Recorder{
		o:     o,
		wake:  make(chan struct{}, 1),
		done:  make(chan struct{}),
		abort: abort, abortCtx: abortCtx,
		queue: newRing(o.BufferSize),
	}
	go w.run()
	return w, nil
}

// Record queues r for writing. It never blocks on the store: when the
// buffer is full the oldest waiting report is dropped (and counted) to make
// room. The newest reports are kept because they describe the present, which
// an operator looks at first once the store is back; the loss shows up as a
// recording gap in the past. r must not be modified afterwards.
func (w *Recorder) Record(r *domain.Report) {
	if r == nil {
		return
	}
	if err := audit.ValidateReports([]*domain.Report{r}); err != nil {
		w.drop(1, ports.DropRejected)
		w.o.Logger.Warn("history: report rejected", "err", err)
		return
	}
	now := w.o.Clock.Now()
	w.mu.Lock()
	w.stats.Recorded++
	if w.closing {
		w.stats.Dropped++
		w.mu.Unlock()
		w.notifyDropped(1, ports.DropClosed)
		return
	}
	full := w.queue.full()
	if full {
		w.queue.popFront()
		w.stats.Dropped++
	}
	w.queue.push(item{r: r, at: now})
	w.mu.Unlock()
	if full {
		w.notifyDropped(1, ports.DropBufferFull)
	}
	w.poke()
}

func (w *Recorder) drop(n int, reason ports.DropReason) {
	w.mu.Lock()
	w.stats.Recorded += int64(n)
	w.stats.Dropped += int64(n)
	w.mu.Unlock()
	w.notifyDropped(n, reason)
}

func (w *Recorder) notifyDropped(n int, reason ports.DropReason) {
	if w.o.Observer != nil && n > 0 {
		w.o.Observer.Dropped(n, reason)
	}
}

func (w *Recorder) poke() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// Stats returns the counters now.
func (w *Recorder) Stats() Stats {
	now := w.o.Clock.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	s := w.stats
	s.Buffered = w.queue.len() + len(w.inflight)
	var oldest time.Time
	if len(w.inflight) > 0 {
		oldest = w.inflight[0].at
	} else if w.queue.len() > 0 {
		oldest = w.queue.front().at
	}
	if !oldest.IsZero() {
		s.Lag = max(0, now.Sub(oldest))
	}
	return s
}

// Close writes what the recorder holds and stops its writer. Reports
// recorded from now on are dropped. If ctx ends first (the shutdown grace),
// the write in progress is cancelled, everything unwritten is counted as
// dropped, and Close returns ctx's error once the writer has stopped. Close
// is idempotent; later calls wait for the same end.
func (w *Recorder) Close(ctx context.Context) error {
	w.mu.Lock()
	w.closing = true
	w.mu.Unlock()
	w.poke()
	select {
	case <-w.done:
		return nil
	case <-ctx.Done():
	}
	select {
	case <-w.done: // finished just in time
		return nil
	default:
	}
	w.abort()
	<-w.done
	return ctx.Err()
}

// run is the writer goroutine.
func (w *Recorder) run() {
	defer close(w.done)
	defer w.abort()
	for {
		batch := w.nextBatch()
		if batch == nil {
			break
		}
		w.write(batch)
	}
	w.dropQueue() // anything left when Close's deadline ended
}

// nextBatch waits until a batch is due (BatchSize reports wait, the oldest
// has waited MaxDelay, or the recorder is closing) and moves it in flight.
// It returns nil when the writer must end.
func (w *Recorder) nextBatch() []item {
	for {
		w.mu.Lock()
		n := w.queue.len()
		if w.abortCtx.Err() != nil || (n == 0 && w.closing) {
			w.mu.Unlock()
			return nil
		}
		var due time.Time
		if n > 0 {
			due = w.queue.front().at.Add(w.o.MaxDelay)
			if n >= w.o.BatchSize || w.closing || !w.o.Clock.Now().Before(due) {
				batch := w.queue.take(w.o.BatchSize)
				w.inflight = batch
				w.mu.Unlock()
				return batch
			}
		}
		w.mu.Unlock()

		var timerC <-chan time.Time
		var timer ports.Timer
		if !due.IsZero() {
			timer = w.o.Clock.NewTimer(due)
			timerC = timer.C()
		}
		select {
		case <-w.wake:
		case <-timerC:
		case <-w.abortCtx.Done():
		}
		if timer != nil {
			timer.Stop()
		}
	}
}

// write appends batch until the store takes it, rejects it, or the
// recorder aborts.
func (w *Recorder) write(batch []item) {
	reports := make([]*domain.Report, len(batch))
	for i, it := range batch {
		reports[i] = it.r
	}
	backoff := w.o.MinBackoff
	for {
		err := w.append(reports)
		now := w.o.Clock.Now()
		if err == nil {
			lag := max(0, now.Sub(batch[0].at))
			w.mu.Lock()
			w.inflight = nil
			w.stats.Written += int64(len(batch))
			w.stats.Batches++
			w.stats.Failing = false
			w.mu.Unlock()
			if w.o.Observer != nil {
				w.o.Observer.Written(len(batch), lag)
			}
			return
		}
		aborted := w.abortCtx.Err() != nil
		rejected := domain.ErrorCode(err) == domain.CodeInvalidArgument
		retryIn := backoff
		if aborted || rejected {
			retryIn = 0
		}
		w.mu.Lock()
		w.stats.Failures++
		w.stats.LastError, w.stats.LastErrorAt, w.stats.Failing = err, now, true
		if retryIn == 0 {
			w.inflight = nil
			w.stats.Dropped += int64(len(batch))
		}
		w.mu.Unlock()
		if w.o.Observer != nil {
			w.o.Observer.WriteFailed(err, retryIn)
		}
		switch {
		case rejected:
			w.o.Logger.Error("history: store rejected a batch; dropping it", "reports", len(batch), "err", err)
			w.notifyDropped(len(batch), ports.DropRejected)
			return
		case aborted:
			w.notifyDropped(len(batch), ports.DropClosed)
			w.dropQueue()
			return
		}
		w.o.Logger.Warn("history: write failed; retrying", "reports", len(batch), "retry_in", retryIn, "err", err)
		if !w.sleep(retryIn) {
			w.mu.Lock()
			w.inflight = nil
			w.stats.Dropped += int64(len(batch))
			w.mu.Unlock()
			w.notifyDropped(len(batch), ports.DropClosed)
			w.dropQueue()
			return
		}
		backoff = min(2*backoff, w.o.MaxBackoff)
	}
}

// dropQueue counts every waiting report as dropped (the recorder is
// aborting).
func (w *Recorder) dropQueue() {
	w.mu.Lock()
	n := w.queue.len()
	w.queue.take(n)
	w.stats.Dropped += int64(n)
	w.mu.Unlock()
	w.notifyDropped(n, ports.DropClosed)
}

// sleep waits d on the clock; false when the recorder aborts first.
func (w *Recorder) sleep(d time.Duration) bool {
	t := w.o.Clock.NewTimer(w.o.Clock.Now().Add(d))
	defer t.Stop()
	select {
	case <-t.C():
		return true
	case <-w.abortCtx.Done():
		return false
	}
}

var errWriteTimeout = errors.New("history write timed out")

// append calls the store with a context that ends after WriteTimeout on
// the clock, or when the recorder aborts.
func (w *Recorder) append(reports []*domain.Report) error {
	ctx, cancel := context.WithCancelCause(w.abortCtx)
	defer cancel(nil)
	timer := w.o.Clock.NewTimer(w.o.Clock.Now().Add(w.o.WriteTimeout))
	stop := make(chan struct{})
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		select {
		case <-timer.C():
			cancel(errWriteTimeout)
		case <-stop:
		}
	}()
	err := w.o.Store.Append(ctx, reports)
	close(stop)
	<-watched
	timer.Stop()
	if err != nil && errors.Is(context.Cause(ctx), errWriteTimeout) {
		return domain.Errorf(domain.CodeUnavailable, "history write timed out after %s: %v", w.o.WriteTimeout, err)
	}
	return err
}
