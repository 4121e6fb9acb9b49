package rpc

import (
	"sync"
	"time"

	"github.com/loadreporter/loadreporter/domain"
)

// writer sends a registered router its ack, its reports and, once the
// session ended, its last frame. It holds no goroutine while there is
// nothing to write: the session's Notify kicks it, and a goroutine runs
// only until the outbox is empty again, so a stream costs one goroutine
// (the handler's, which reads the router's frames) plus one while a frame
// is on its way. At most one runs per stream: sends stay in order, and a
// router that reads slowly holds one goroutine, never more, while its
// outbox keeps only the latest report.
//
// A send to a router that stopped reading blocks for as long as its lease
// lives, and at most the stall guard's bound; once the session ended, or
// the handler stops, the send in progress gets FinalWriteTimeout and no
// more (bound), so a stream whose session is gone never outlives it.
type writer struct {
	m  *Monitor
	st stream
	tr *transport
	// routerID names the stream's router in its last frame's log line.
	routerID string
	sub      Outbox
	ack      *outFrame // sent first, by the first drain; nil after
	// stall bounds each send, by its drain: a router whose keep_alives
	// arrive but which takes no report holds no stream past it.
	stall *StallGuard

	mu      sync.Mutex
	running bool // a drain goroutine, or the pump, owns the stream's sends
	queued  bool // w waits in the pump's queue
	kicked  bool // kicked while running: the pump looks again
	// pending: kicked since the pump last took the outbox, so something
	// may wait behind the frame in flight (the ack goes first, and one
	// frame at a time); written queues w again only then, so a frame
	// written with nothing behind it wakes no pump.
	pending bool
	over    bool // finish ran
	// sent counts the frames the pump put in flight; the stall guard of
	// the last is disarmed once the stream has written that many. Under
	// two (the ack, the first report), the pump takes w ahead of a burst.
	sent    uint64
	closed  bool // no drain may start: the handler returns, or the writer finished
	bounded bool // the send in progress has its final deadline
	drains  sync.WaitGroup

	// finished is closed once the writer ended the stream's sending,
	// result then being what the handler returns; made when first asked
	// for (finishedChan), as most streams end from the handler's side.
	finished chan struct{}
	result   error
}

// closedChan stands for a lazily made channel that would be closed at
// once: finished when the writer ended before anyone asked for it, a write
// deadline that passed before anyone waited on it.
var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// finishedChan is closed once the writer ended the stream's sending.
func (w *writer) finishedChan() <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.finished == nil {
		if w.over {
			return closedChan
		}
		w.finished = make(chan struct{})
	}
	return w.finished
}

func newWriter(m *Monitor, st stream, tr *transport, routerID string, sub Outbox, ack *outFrame, stall *StallGuard) *writer {
	return &writer{m: m, st: st, tr: tr, routerID: routerID, sub: sub, ack: ack, stall: stall}
}

// kick starts a drain unless one runs; if one runs and the session has
// ended, it bounds that drain's send. It never blocks: the fire loop calls
// it for every session it delivers to, and when a session ends.
func (w *writer) kick() {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return
	}
	w.pending = true
	if w.running {
		w.kicked = true // a pump's send looks again once it is done
		bound := w.claimBound(w.sub.Ended())
		w.mu.Unlock()
		if bound {
			// Setting a deadline talks to the connection's goroutine;
			// the fire loop must not wait for it.
			go w.bound()
		}
		return
	}
	if _, async := w.st.(asyncStream); async {
		if !w.queued {
			w.queued = true
			joining := w.sent < 2 // the ack, then the first report
			w.mu.Unlock()
			w.m.pump.add(w, joining)
			return
		}
		w.mu.Unlock()
		return
	}
	w.startDrain()
}

// drain sends the ack, then what the outbox holds until it is empty; a
// pending report goes out before the session's last frame. Emptiness is
// checked under mu, so a kick that found a drain running is never lost.
func (w *writer) drain() {
	defer w.drains.Done()
	for {
		w.mu.Lock()
		if w.closed {
			w.running = false
			w.mu.Unlock()
			return
		}
		bound := w.claimBound(w.sub.Ended())
		ack, rep, last := w.next()
		if ack == nil && rep == nil && !last {
			w.running = false
			w.mu.Unlock()
			return
		}
		w.mu.Unlock()
		if last { // end bounds its own send
			w.finish(w.m.end(w.st, w.tr, w.routerID, w.sub.Err()))
			return
		}
		if bound {
			w.bound()
		}
		f := ack
		if f == nil {
			f = w.m.frames.Get(rep)
		}
		w.stall.Arm()
		err := w.st.Send(f)
		w.stall.Disarm()
		if err != nil {
			w.failed(err)
			return
		}
	}
}

// failed ends the writer on a send that failed.
func (w *writer) failed(err error) {
	if w.sub.Ended() && w.sub.Err() != nil {
		// Its last frame cannot reach a router that stopped reading, but
		// the ending still counts, and is logged.
		w.m.noteEnd(w.st, w.routerID, w.sub.Err())
	}
	w.finish(err)
}

// next takes what to send next: the ack, then the latest report, then,
// once the session ended, its last frame (last). Called under mu.
func (w *writer) next() (ack *outFrame, rep *domain.Report, last bool) {
	if ack = w.ack; ack != nil {
		w.ack = nil
		return ack, nil, false
	}
	if rep = w.sub.Take(); rep != nil {
		return nil, rep, false
	}
	return nil, nil, w.sub.Ended()
}

// finish records how the stream ends and wakes the handler from its read;
// a native stream ends there, with the status the handler will return.
// Only the first call counts: the pump and a drain may both find the
// stream over.
func (w *writer) finish(result error) {
	w.mu.Lock()
	first := !w.over
	w.closed, w.running = true, false
	if first {
		w.over, w.result = true, result
		if w.finished != nil {
			close(w.finished) // before the wake: it is why the read failed
		}
	}
	w.mu.Unlock()
	if first {
		wakeRead(w.st, w.tr, result)
	}
}

// close stops the writer and waits until no drain touches the stream. It
// reports whether the handler may still send: false when the writer
// finished first (it sent the last frame, or the stream broke).
func (w *writer) close() bool {
	w.mu.Lock()
	w.closed = true
	bound := w.claimBound(w.running)
	w.mu.Unlock()
	if bound {
		w.bound()
	}
	w.drains.Wait()
	w.mu.Lock()
	defer w.mu.Unlock()
	return !w.over
}

// sendAckLeft sends the ack if no drain got to it before close stopped
// the writer, within FinalWriteTimeout: the stream is ending. Only the
// handler calls it, after close reported that it may still send.
func (w *writer) sendAckLeft() error {
	w.mu.Lock()
	ack := w.ack
	w.ack = nil
	w.mu.Unlock()
	if ack == nil {
		return nil
	}
	w.bound()
	return w.st.Send(ack)
}

// claimBound reports whether the caller is the one to bound the send in
// progress: when cond holds and no one has yet. Called under mu.
func (w *writer) claimBound(cond bool) bool {
	if !cond || w.bounded {
		return false
	}
	w.bounded = true
	return true
}

// bound gives the send in progress, and every later one, FinalWriteTimeout
// from now.
func (w *writer) bound() {
	w.tr.setWriteDeadline(time.Now().Add(w.m.opts.FinalWriteTimeout))
}
