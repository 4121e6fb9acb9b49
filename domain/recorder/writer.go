package recorder

import (
	"context"
	"errors"
	"time"

	"github.com/loadreporter/loadreporter/domain"
	"github.com/loadreporter/loadreporter/ports"
)

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
// recorder aborts. Each batch starts the backoff over.
func (w *Recorder) write(batch []item) {
	reports := make([]*domain.Report, len(batch))
	for i, it := range batch {
		reports[i] = it.r
	}
	w.o.Backoff.Reset()
	for {
		err := w.append(reports)
		now := w.o.Clock.Now()
		if err == nil {
			w.written(batch, now)
			return
		}
		retryIn, retry := w.failed(batch, err, now)
		if !retry {
			return
		}
		w.o.Logger.Warn("history: write failed; retrying", "reports", len(batch), "retry_in", retryIn, "err", err)
		if !w.sleep(retryIn) {
			w.abandon(batch)
			return
		}
	}
}

// written accounts for a batch the store took.
func (w *Recorder) written(batch []item, now time.Time) {
	lag := max(0, now.Sub(batch[0].at))
	w.mu.Lock()
	w.inflight = nil
	w.stats.Written += int64(len(batch))
	w.stats.Batches++
	recovered := w.stats.Failing
	w.stats.Failing = false
	w.mu.Unlock()
	if recovered { // failures are logged one by one; the end of them too
		w.o.Logger.Info("history: writes succeed again", "reports", len(batch), "lag", lag)
	}
	if w.o.Observer != nil {
		w.o.Observer.Written(len(batch), lag)
	}
}

// failed accounts for a failed Append and says whether, and after how
// long, to try again: never when the store rejected the batch (retrying
// cannot help) or the recorder aborts.
func (w *Recorder) failed(batch []item, err error, now time.Time) (time.Duration, bool) {
	aborted := w.abortCtx.Err() != nil
	rejected := domain.ErrorCode(err) == domain.CodeInvalidArgument
	retry := !aborted && !rejected
	var retryIn time.Duration
	if retry {
		retryIn = w.backoff()
	}
	w.mu.Lock()
	w.stats.Failures++
	w.stats.LastError, w.stats.LastErrorAt, w.stats.Failing = err, now, true
	if !retry {
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
		return 0, false
	case aborted:
		w.notifyDropped(len(batch), ports.DropClosed)
		w.dropQueue()
		return 0, false
	}
	return retryIn, true
}

// backoff is the wait before the next attempt: the Backoff's, within
// [MinBackoff, MaxBackoff]; a negative one (giving up) waits MaxBackoff.
func (w *Recorder) backoff() time.Duration {
	d := w.o.Backoff.NextBackOff()
	if d < 0 {
		return w.o.MaxBackoff
	}
	return min(max(d, w.o.MinBackoff), w.o.MaxBackoff)
}

// abandon counts the batch in flight and everything waiting as dropped
// (the recorder aborted while backing off).
func (w *Recorder) abandon(batch []item) {
	w.mu.Lock()
	w.inflight = nil
	w.stats.Dropped += int64(len(batch))
	w.mu.Unlock()
	w.notifyDropped(len(batch), ports.DropClosed)
	w.dropQueue()
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

// sleep waits d on the clock before a retry; false when the recorder
// aborts first. Once Close began, one wait ends at once (the store may be
// back, and the grace may be shorter than d), whether Close came during it
// or just before it, and later waits are MinBackoff at most: what is left
// of the grace is spent trying.
func (w *Recorder) sleep(d time.Duration) bool {
	closing := w.closingCh
	select {
	case <-closing:
		if !w.retriedOnClose {
			w.retriedOnClose = true
			return true
		}
		d, closing = min(d, w.o.MinBackoff), nil
	default:
	}
	t := w.o.Clock.NewTimer(w.o.Clock.Now().Add(d))
	defer t.Stop()
	select {
	case <-t.C():
		return true
	case <-closing:
		w.retriedOnClose = true
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
