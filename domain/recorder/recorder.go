package recorder

import (
	"context"
	"fmt"
	"maps"
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
	// Dropped counts the reports lost, whatever the reason:
	// Recorded = Written + Dropped + Buffered. DroppedBy splits it by
	// reason (see ports.DropReason).
	Dropped   int64
	DroppedBy map[ports.DropReason]int64
	// Failures counts failed Append attempts; Splits those of them that
	// timed out and were tried again with fewer reports.
	Failures int64
	Splits   int64
	// Buffered is the number of reports held: waiting plus being written;
	// BufferedBytes is their footprint, which Options.BufferBytes bounds.
	Buffered      int
	BufferedBytes int
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
	lossesSaid     sync.Once
	abort          context.CancelFunc
	// abortCtx ends when the recorder must stop at once (Close's deadline).
	abortCtx context.Context

	// Only the writer reads and writes these.
	batchLimit   int     // bytes per Append now: BatchBytes, halved by each timeout
	timeoutScale int     // 1, doubled by each timeout of a single report
	failLog      failLog // the failures since the last success, and their lines

	mu            sync.Mutex
	queue         ring
	inflight      []item // the batch being written, shrinking as its pieces are
	inflightBytes int
	closing       bool
	stats         Stats
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
		queue:        newRing(o.BufferSize),
		batchLimit:   o.BatchBytes,
		timeoutScale: 1,
		stats:        Stats{DroppedBy: map[ports.DropReason]int64{}},
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
// recording gap in the past. A report that does not fit even in an empty
// buffer beside the batch being written is dropped itself. r must not be
// modified afterwards.
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
	it := item{r: r, at: now, size: footprint(r)}
	w.mu.Lock()
	w.stats.Recorded++
	if w.closing {
		w.countDropped(1, ports.DropClosed)
		w.mu.Unlock()
		w.notifyDropped(1, ports.DropClosed)
		return
	}
	evicted := 0
	for w.queue.len() > 0 && (w.queue.full() || w.queue.bytes+w.inflightBytes+it.size > w.o.BufferBytes) {
		w.queue.popFront()
		evicted++
	}
	kept := w.queue.bytes+w.inflightBytes+it.size <= w.o.BufferBytes
	if kept {
		w.queue.push(it)
	} else {
		evicted++
	}
	w.countDropped(evicted, ports.DropBufferFull)
	w.mu.Unlock()
	w.notifyDropped(evicted, ports.DropBufferFull)
	if kept {
		w.poke()
	}
}

func (w *Recorder) drop(n int, reason ports.DropReason) {
	w.mu.Lock()
	w.stats.Recorded += int64(n)
	w.countDropped(n, reason)
	w.mu.Unlock()
	w.notifyDropped(n, reason)
}

// countDropped adds n to the drop counters; w.mu is held.
func (w *Recorder) countDropped(n int, reason ports.DropReason) {
	if n > 0 {
		w.stats.Dropped += int64(n)
		w.stats.DroppedBy[reason] += int64(n)
	}
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

// BufferBytes is the bound on Stats.BufferedBytes (Options.BufferBytes,
// or its default).
func (w *Recorder) BufferBytes() int { return w.o.BufferBytes }

// Stats returns the counters now.
func (w *Recorder) Stats() Stats {
	now := w.o.Clock.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	s := w.stats
	s.DroppedBy = maps.Clone(w.stats.DroppedBy)
	s.Buffered = w.queue.len() + len(w.inflight)
	s.BufferedBytes = w.queue.bytes + w.inflightBytes
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
// unwritten is counted as dropped, and Close returns, once the writer has
// stopped, an error that says what the history lost and why (the store's
// last error), wrapping ctx's. When Close returns nil but reports were
// lost over the recorder's life, it logs that instead: either way it is
// said once, when the process is about to end and no one will scrape the
// counters again. Close is idempotent; later calls wait for the same end
// and return nil.
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
		return w.sayLosses(nil)
	case <-ctx.Done():
	}
	select {
	case <-w.done: // finished just in time
		return w.sayLosses(nil)
	default:
	}
	w.abort()
	<-w.done
	return w.sayLosses(ctx.Err())
}

// sayLosses, the first time, returns what the history lost as an error
// wrapping ctxErr when Close's deadline cut the flush short, or logs it.
func (w *Recorder) sayLosses(ctxErr error) error {
	var err error
	w.lossesSaid.Do(func() {
		msg := losses(w.Stats())
		switch {
		case msg == "":
		case ctxErr != nil:
			err = fmt.Errorf("%s; the grace to write them ended (%w)", msg, ctxErr)
		default:
			w.o.Logger.Warn(msg)
		}
	})
	return err
}

// lastWrite says how the store last answered, for the lines that explain
// a loss.
func lastWrite(st Stats) string {
	if st.Failing && st.LastError != nil {
		return "the store's last write failed: " + domain.OneLine(st.LastError.Error())
	}
	return "the store had not failed: it was still writing"
}
