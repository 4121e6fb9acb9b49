package recorder

import (
	"context"
	"sync"
	"time"

	"github.com/loadreporter/loadreporter/domain"
	"github.com/loadreporter/loadreporter/domain/audit"
	"github.com/loadreporter/loadreporter/ports"
)

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
	r    *domain.Report
	at   time.Time // when Record took it
	size int       // footprint(r)
}

// footprint estimates the memory a waiting report holds: its ranks
// dominate (some 130 bytes each, measured with the store down), so a wide
// engine's reports are counted against BufferBytes by their width.
func footprint(r *domain.Report) int {
	return 256 + 128*len(r.Ranks) + len(r.LastError) + len(r.SourceInstanceID) +
		len(r.Worker.Addr) + len(r.Worker.Model) + len(r.Worker.Zone)
}

// Recorder batches reports into a HistoryStore off the fire loop. Its
// methods are safe for concurrent use.
type Recorder struct {
	o    Options
	wake chan struct{} // poked when there is news for the writer
	done chan struct{} // closed when the writer ends
	// closingCh is closed by the first Close: a writer waiting out a
	// retry tries again at once, while the grace lasts.
	closingCh chan struct{}
	// retriedOnClose is set, by the writer only, once it cut a wait short
	// because Close began.
	retriedOnClose bool
	start          sync.Once
	abort          context.CancelFunc
	// abortCtx ends when the recorder must stop at once (Close's deadline).
	abortCtx context.Context

	mu       sync.Mutex
	queue    ring
	inflight []item
	closing  bool
	stats    Stats
}

// New validates o and returns a Recorder whose writer is not running yet:
// reports recorded before Start wait in the buffer. Call Start to write
// them, and Close to stop.
func New(o Options) (*Recorder, error) {
	if err := o.validate(); err != nil {
		return nil, err
	}
	abortCtx, abort := context.WithCancel(context.Background())
	return &Recorder{
		o:         o,
		wake:      make(chan struct{}, 1),
		done:      make(chan struct{}),
		closingCh: make(chan struct{}),
		abort:     abort, abortCtx: abortCtx,
		queue: newRing(o.BufferSize),
	}, nil
}

// Start starts the writer goroutine; later calls do nothing. Close stops
// it.
func (w *Recorder) Start() {
	w.start.Do(func() { go w.run() })
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
	it := item{r: r, at: now, size: footprint(r)}
	evicted := 0
	for w.queue.len() > 0 && (w.queue.full() || w.queue.bytes+it.size > w.o.BufferBytes) {
		w.queue.popFront()
		evicted++
	}
	w.stats.Dropped += int64(evicted)
	w.queue.push(it)
	w.mu.Unlock()
	w.notifyDropped(evicted, ports.DropBufferFull)
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

// Close writes what the recorder holds and stops its writer (starting it
// first if Start was never called, so what was recorded is still written).
// Reports recorded from now on are dropped. If ctx ends first (the
// shutdown grace), the write in progress is cancelled, everything
// unwritten is counted as dropped, and Close returns ctx's error once the
// writer has stopped. Close is idempotent; later calls wait for the same
// end.
func (w *Recorder) Close(ctx context.Context) error {
	w.mu.Lock()
	if !w.closing {
		w.closing = true
		close(w.closingCh)
	}
	w.mu.Unlock()
	w.Start()
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
