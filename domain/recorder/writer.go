package recorder

import (
	"context"
	"errors"
	"fmt"
	"strings"
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

// nextBatch waits until a batch is due (BatchSize reports or batchLimit
// bytes wait, the oldest has waited MaxDelay, or the recorder is closing)
// and moves it in flight. It returns nil when the writer must end.
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
			if n >= w.o.BatchSize || w.queue.bytes >= w.batchLimit || w.closing || !w.o.Clock.Now().Before(due) {
				batch, size := w.queue.take(w.o.BatchSize, w.batchLimit)
				w.inflight, w.inflightBytes = batch, size
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

// write appends batch, a piece at a time, until the store took or
// rejected every piece, or the recorder aborts. A piece is as much of the
// batch as batchLimit allows; one that times out halves batchLimit (the
// split), so the next attempt is smaller and a slow store still makes
// progress; a success that took less than half its timeout doubles it
// back towards BatchBytes (one that took more would not fit twice). A
// piece of one report that times out cannot be split: its next attempts
// get twice the time, up to maxTimeoutScale times, until a write
// succeeds. A failed piece is retried after a backoff, which starts over
// after each success. Reports the store took before a failure are not
// sent again; a piece whose commit the store made but could not confirm
// is, and the store's idempotent Append skips what it holds.
func (w *Recorder) write(batch []item) {
	w.o.Backoff.Reset()
	for len(batch) > 0 {
		n, size := prefix(batch, w.batchLimit)
		piece := batch[:n]
		start, timeout := w.o.Clock.Now(), w.timeoutFor(size)
		timedOut, err := w.append(piece, size, timeout)
		now := w.o.Clock.Now()
		switch {
		case err == nil:
			took := now.Sub(start)
			w.written(piece, size, now, took)
			batch = batch[n:]
			if took < timeout/2 { // twice as much would likely still fit
				w.batchLimit = min(w.o.BatchBytes, 2*w.batchLimit)
			}
			w.timeoutScale = 1
			w.o.Backoff.Reset()
			continue
		case w.abortCtx.Err() != nil:
			w.abandon(batch)
			return
		case domain.ErrorCode(err) == domain.CodeInvalidArgument:
			w.rejected(piece, size, err, now)
			batch = batch[n:]
			continue
		}
		switch {
		case timedOut && n > 1:
			w.batchLimit = max(1, size/2)
			w.split(n)
		case timedOut:
			w.timeoutScale = min(2*w.timeoutScale, maxTimeoutScale)
		}
		retryIn := w.backoff()
		w.failed(err, timedOut, timeout, now, retryIn, len(batch))
		if !w.sleep(retryIn) {
			w.abandon(batch)
			return
		}
	}
}

// prefix is how many items from the front of batch make a piece of at
// most limit bytes (at least one), and their bytes.
func prefix(batch []item, limit int) (n, size int) {
	for n < len(batch) && (n == 0 || size+batch[n].size <= limit) {
		size += batch[n].size
		n++
	}
	return n, size
}

// written accounts for a piece the store took, and lets its reports go.
func (w *Recorder) written(piece []item, size int, now time.Time, took time.Duration) {
	n, lag := len(piece), max(0, now.Sub(piece[0].at))
	w.mu.Lock()
	w.inflight = w.inflight[n:]
	w.inflightBytes -= size
	clear(piece) // Stats reads inflight's first item: only once it is past them
	w.stats.Written += int64(n)
	w.stats.Batches++
	recovered := w.stats.Failing
	w.stats.Failing = false
	w.mu.Unlock()
	if recovered { // failures are logged at most once per cause and LogEvery; the end of them always
		attrs := []any{"reports", n, "lag", lag}
		if w.failLog.total > 0 { // not only rejections, which have their own lines
			attrs = append(attrs, "failures", w.failLog.total, "failing_for", now.Sub(w.failLog.since))
		}
		w.o.Logger.Info("history: writes succeed again", attrs...)
		w.failLog = failLog{}
	}
	if w.o.Observer != nil {
		w.o.Observer.Written(n, lag, took)
	}
}

// rejected drops a piece the store refused as invalid: retrying cannot
// help, and the rest of the batch goes on.
func (w *Recorder) rejected(piece []item, size int, err error, now time.Time) {
	n := len(piece)
	w.mu.Lock()
	w.inflight = w.inflight[n:]
	w.inflightBytes -= size
	clear(piece)
	w.stats.Failures++
	w.stats.LastError, w.stats.LastErrorAt, w.stats.Failing = err, now, true
	w.countDropped(n, ports.DropRejected)
	w.mu.Unlock()
	if w.o.Observer != nil {
		w.o.Observer.WriteFailed(err, 0)
	}
	w.o.Logger.Error("history: store rejected a batch; dropping it", "reports", n, "err", err)
	w.notifyDropped(n, ports.DropRejected)
}

// split counts a piece of n reports that timed out and is tried again
// smaller.
func (w *Recorder) split(n int) {
	w.mu.Lock()
	w.stats.Splits++
	w.mu.Unlock()
	if w.o.Observer != nil {
		w.o.Observer.Split(n)
	}
}

// failed accounts for a failed Append that will be retried in retryIn,
// and logs it as failLog allows. timedOut says its timeout ran out.
// pending is what the batch still holds.
func (w *Recorder) failed(err error, timedOut bool, timeout time.Duration, now time.Time, retryIn time.Duration, pending int) {
	w.mu.Lock()
	w.stats.Failures++
	w.stats.LastError, w.stats.LastErrorAt, w.stats.Failing = err, now, true
	w.mu.Unlock()
	if w.o.Observer != nil {
		w.o.Observer.WriteFailed(err, retryIn)
	}
	cause := err.Error()
	if timedOut { // the message names the size and timeout, which change with every split
		cause = errWriteTimeout.Error()
	}
	if !w.failLog.record(cause, now, w.o.LogEvery) {
		return
	}
	attrs := []any{"reports", pending, "retry_in", retryIn, "failures", w.failLog.sinceLine,
		"failing_for", now.Sub(w.failLog.since), "err", err}
	if timedOut {
		attrs = append(attrs, "timeout", timeout, "next_batch_bytes", w.batchLimit)
	}
	w.o.Logger.Warn("history: write failed; retrying", attrs...)
	w.failLog.sinceLine = 0
}

// failLog keeps a failing store's log to one line per cause per
// LogEvery: the writer retries every MinBackoff during a shutdown, and
// every line of a long outage would say the same.
type failLog struct {
	since     time.Time // the first failure of this run of failures
	total     int       // failures in this run
	cause     string    // the cause of the last line
	lineAt    time.Time // when it was written
	sinceLine int       // failures since it, this one included
}

// record counts a failure and says whether it gets a line: the first,
// a new cause, or the same cause once every LogEvery.
func (l *failLog) record(cause string, now time.Time, every time.Duration) bool {
	if l.total == 0 {
		l.since = now
	}
	l.total++
	l.sinceLine++
	if l.cause == cause && now.Sub(l.lineAt) < every {
		return false
	}
	l.cause, l.lineAt = cause, now
	return true
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

// abandon counts what is left of the batch in flight and everything
// waiting as dropped (the recorder aborted).
func (w *Recorder) abandon(batch []item) {
	w.mu.Lock()
	w.inflight, w.inflightBytes = nil, 0
	w.countDropped(len(batch), ports.DropClosed)
	w.mu.Unlock()
	w.notifyDropped(len(batch), ports.DropClosed)
	w.dropQueue()
}

// dropQueue counts every waiting report as dropped (the recorder is
// aborting).
func (w *Recorder) dropQueue() {
	w.mu.Lock()
	n := w.queue.len()
	w.queue.take(n, w.queue.bytes)
	w.countDropped(n, ports.DropClosed)
	w.mu.Unlock()
	w.notifyDropped(n, ports.DropClosed)
}

// losses says what the history lost over the recorder's life and why,
// or "" when it lost nothing.
func losses(st Stats) string {
	if st.Dropped == 0 {
		return ""
	}
	var why []string
	if n := st.DroppedBy[ports.DropBufferFull]; n > 0 {
		why = append(why, fmt.Sprintf("%d dropped, oldest first, to stay within the buffer while the store failed or fell behind", n))
	}
	if n := st.DroppedBy[ports.DropClosed]; n > 0 {
		why = append(why, fmt.Sprintf("%d unwritten when the recorder closed, or recorded after", n))
	}
	if n := st.DroppedBy[ports.DropRejected]; n > 0 {
		why = append(why, fmt.Sprintf("%d refused as invalid", n))
	}
	return fmt.Sprintf("history: %d of %d recorded reports were not written: %s; %s",
		st.Dropped, st.Recorded, strings.Join(why, ", "), lastWrite(st))
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

// maxTimeoutScale bounds how far timeouts of single reports stretch the
// write timeout.
const maxTimeoutScale = 8

// timeoutFor is how long an Append of size bytes may take: WriteTimeout,
// plus the bytes at WriteRate, stretched by timeoutScale.
func (w *Recorder) timeoutFor(size int) time.Duration {
	d := w.o.WriteTimeout + time.Duration(float64(size)/float64(w.o.WriteRate)*float64(time.Second))
	return d * time.Duration(w.timeoutScale)
}

// append writes piece (size bytes) with a context that ends after
// timeout on the clock, or when the recorder aborts, and says whether the
// timeout ended it.
func (w *Recorder) append(piece []item, size int, timeout time.Duration) (bool, error) {
	reports := make([]*domain.Report, len(piece))
	for i, it := range piece {
		reports[i] = it.r
	}
	ctx, cancel := context.WithCancelCause(w.abortCtx)
	defer cancel(nil)
	timer := w.o.Clock.NewTimer(w.o.Clock.Now().Add(timeout))
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
		return true, domain.Wrap(err, domain.CodeUnavailable, "%s after %s (%d reports, %d bytes)",
			errWriteTimeout, timeout.Round(time.Millisecond), len(piece), size)
	}
	return false, err
}
