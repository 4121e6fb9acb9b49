package rpc

import (
	"sync"
)

// writer sends a registered router its reports and, once the session
// ended, its last frame. It holds no goroutine while there is nothing to
// write: the session's Notify kicks it, and a goroutine runs only until
// the outbox is empty again, so a stream costs one goroutine (the
// handler's, which reads the router's frames) plus one while a report is
// on its way. At most one runs per stream: sends stay in order, and a
// router that reads slowly holds one goroutine, never more, while its
// outbox keeps only the latest report.
type writer struct {
	m   *Monitor
	st  *stream
	tr  *transport
	sub RouterSession

	mu      sync.Mutex
	running bool // a drain goroutine owns the stream's sends
	closed  bool // no drain may start: the handler returns, or the writer finished
	drains  sync.WaitGroup

	finished chan struct{} // closed once the writer ended the stream's sending
	result   error         // what the handler returns then; written before finished closes
}

func newWriter(m *Monitor, st *stream, tr *transport, sub RouterSession) *writer {
	return &writer{m: m, st: st, tr: tr, sub: sub, finished: make(chan struct{})}
}

// kick starts a drain unless one runs. It never blocks: the fire loop
// calls it for every session it delivers to.
func (w *writer) kick() {
	w.mu.Lock()
	if w.running || w.closed {
		w.mu.Unlock()
		return
	}
	w.running = true
	w.drains.Add(1)
	w.mu.Unlock()
	go w.drain()
}

// drain sends what the outbox holds until it is empty; a pending report
// goes out before the session's last frame. Emptiness is checked under
// mu, so a kick that found a drain running is never lost.
func (w *writer) drain() {
	defer w.drains.Done()
	for {
		w.mu.Lock()
		if w.closed {
			w.running = false
			w.mu.Unlock()
			return
		}
		select {
		case rep := <-w.sub.Reports():
			w.mu.Unlock()
			if err := w.st.Send(w.m.frames.Get(rep)); err != nil {
				w.finish(err)
				return
			}
			continue
		default:
		}
		select {
		case <-w.sub.Done():
			w.mu.Unlock()
			w.finish(w.m.end(w.st, w.tr, w.sub.RouterID(), w.sub.Err()))
			return
		default:
		}
		w.running = false
		w.mu.Unlock()
		return
	}
}

// finish records how the stream ends and wakes the handler from its read.
func (w *writer) finish(result error) {
	w.mu.Lock()
	w.closed, w.running = true, false
	w.mu.Unlock()
	w.result = result
	close(w.finished)
	w.tr.interruptRead()
}

// close stops the writer and waits until no drain touches the stream. It
// reports whether the handler may still send: false when the writer
// finished first (it sent the last frame, or the stream broke).
func (w *writer) close() bool {
	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
	w.drains.Wait()
	select {
	case <-w.finished:
		return false
	default:
		return true
	}
}
