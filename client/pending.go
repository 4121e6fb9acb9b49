package client

import (
	"sync"
	"time"
)

// Request is what a router tells Fleet.PickFor about the request it is
// about to send, for its own accounting.
type Request struct {
	// Tokens is what the request may hold in the KV cache: its prompt
	// tokens plus its max new tokens. 0 (unknown) counts the request as a
	// request only; a negative value counts as 0.
	Tokens int64
}

// Pending is what a Fleet's router has sent a worker that the worker's
// latest report does not count yet: the dispatches not yet Done, made
// after that report's snapshot.
type Pending struct {
	// Requests is how many.
	Requests int64
	// Tokens is the sum of their Request.Tokens.
	Tokens int64
}

// Dispatch is one request a Fleet counts against a worker's score until
// the router calls Done, or until the worker's report counts it: a report
// whose snapshot was taken after the dispatch. A nil *Dispatch (accounting
// off, no worker picked) is valid: Done does nothing.
type Dispatch struct {
	set    *pendingSet
	worker *Worker
	at     time.Time // on the fleet's clock
	tokens int64
	// counted says it is still in set's totals; guarded by set.mu.
	counted bool
}

// Worker is the worker the request was sent to; nil for a nil Dispatch.
func (d *Dispatch) Worker() *Worker {
	if d == nil {
		return nil
	}
	return d.worker
}

// Done says the request finished (or failed, or was abandoned): it no
// longer counts. Call it once the worker has answered; calling it again,
// or after the count aged out or the worker left the fleet, does nothing.
// Safe for concurrent use.
func (d *Dispatch) Done() {
	if d == nil {
		return
	}
	d.set.done(d)
}

// maxPendingDispatches bounds the dispatches remembered per worker: a
// router that never calls Done, towards a worker that sends no report,
// would otherwise grow the list for ever. Past it the oldest is
// forgotten.
const maxPendingDispatches = 1 << 16

// pendingSet is one worker's counted dispatches, oldest first (by the
// fleet's clock; concurrent picks may interleave by a few nanoseconds,
// which only delays an age-out). Records that are Done stay in q until
// they reach its head or q is tidied, so Done is O(1).
type pendingSet struct {
	mu       sync.Mutex
	q        []*Dispatch
	head     int
	live     int // counted records in q[head:]
	requests int64
	tokens   int64
	closed   bool // the worker left the fleet: nothing counts
}

// add counts a dispatch at at; nil when the worker has left the fleet.
func (s *pendingSet) add(w *Worker, at time.Time, tokens int64) *Dispatch {
	d := &Dispatch{set: s, worker: w, at: at, tokens: max(0, tokens), counted: true}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.q = append(s.q, d)
	s.live++
	s.requests++
	s.tokens += d.tokens
	for s.live > maxPendingDispatches {
		s.uncount(s.q[s.head])
		s.q[s.head] = nil
		s.head++
	}
	s.tidy()
	return d
}

// done stops counting d.
func (s *pendingSet) done(d *Dispatch) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.uncount(d)
	s.tidy()
}

// current ages out the dispatches made before until (the snapshot of the
// report the worker's view shows) and returns what is left.
func (s *pendingSet) current(until time.Time) Pending {
	s.mu.Lock()
	defer s.mu.Unlock()
	for s.head < len(s.q) && (!s.q[s.head].counted || s.q[s.head].at.Before(until)) {
		s.uncount(s.q[s.head])
		s.q[s.head] = nil
		s.head++
	}
	s.tidy()
	return Pending{Requests: s.requests, Tokens: s.tokens}
}

// close forgets every dispatch: the worker has left the fleet, and a
// Done that comes later finds nothing to count down.
func (s *pendingSet) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, d := range s.q[s.head:] {
		if d != nil {
			d.counted = false
		}
	}
	s.q, s.head, s.live, s.requests, s.tokens, s.closed = nil, 0, 0, 0, 0, true
}

// uncount takes d out of the totals once; s.mu is held.
func (s *pendingSet) uncount(d *Dispatch) {
	if !d.counted {
		return
	}
	d.counted = false
	s.live--
	s.requests--
	s.tokens -= d.tokens
}

// tidy keeps q proportional to what it counts: it drops what lies before
// head once that is half of q, and the Done records behind the head once
// they outnumber the counted ones. s.mu is held.
func (s *pendingSet) tidy() {
	n := len(s.q) - s.head
	if n == 0 {
		s.q, s.head = s.q[:0], 0
		return
	}
	if n <= 2*s.live+64 && s.head <= len(s.q)/2 {
		return
	}
	kept := make([]*Dispatch, 0, 2*s.live+1)
	for _, d := range s.q[s.head:] {
		if d.counted {
			kept = append(kept, d)
		}
	}
	s.q, s.head = kept, 0
}

// countedUntil is the time before which v's report counts every dispatch:
// the snapshot of its oldest stamped rank (on the worker's clock, as
// MaxSnapshotAge compares it), or when it arrived if no rank is stamped.
// A view without ranks (none yet, UNREACHABLE) counts nothing: the zero
// time.
func countedUntil(v *View) time.Time {
	if v == nil {
		return time.Time{}
	}
	ranks := v.Report.GetRanks()
	if len(ranks) == 0 {
		return time.Time{}
	}
	var oldest int64
	for _, k := range ranks {
		if t := k.GetSnapshotTimeUnixMs(); t > 0 && (oldest == 0 || t < oldest) {
			oldest = t
		}
	}
	if oldest == 0 {
		return v.ReceivedAt
	}
	return time.UnixMilli(oldest)
}

// Pending is what the Fleet's router has sent this worker that its latest
// report does not count yet (see Fleet.PickFor); zero for a Worker not
// dialed by a Fleet, or with Options.Accounting off. It changes with every
// pick and is not signalled by Subscribe: read it when showing a view.
func (w *Worker) Pending() Pending {
	if w.pending == nil {
		return Pending{}
	}
	return w.pending.current(countedUntil(w.View()))
}
