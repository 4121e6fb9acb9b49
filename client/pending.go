package client

import (
	"sync"
	"time"

	pb "github.com/loadreporter/loadreporter/gen/sglang/router/loadmonitor/v1"
)

// Request is what a router tells Fleet.PickFor about the request it is
// about to send, for its own accounting.
type Request struct {
	// Tokens is what the request may hold in the KV cache: its prompt
	// tokens plus its max new tokens. 0 is unknown; a negative value
	// counts as 0.
	Tokens int64
	// PromptTokens is the prompt's length in tokens: the prefill work the
	// request puts ahead of the next one, which is what the score weighs
	// (see ScorePending). 0 (unknown) takes Tokens in its place, an upper
	// bound; with both unknown the request counts as a request only. A
	// negative value counts as 0.
	PromptTokens int64
}

// normalized is r as a Ledger counts it.
func (r Request) normalized() Request {
	r.Tokens, r.PromptTokens = max(0, r.Tokens), max(0, r.PromptTokens)
	if r.PromptTokens == 0 {
		r.PromptTokens = r.Tokens
	}
	return r
}

// Pending is what a Fleet's router has sent a worker that the worker's
// latest report does not count yet: the dispatches not yet Done, made
// after the numbers of that report were taken (see Ledger).
type Pending struct {
	// Requests is how many.
	Requests int64
	// Tokens is the sum of their Request.Tokens.
	Tokens int64
	// PromptTokens is the sum of their prompt tokens (Request.PromptTokens,
	// or Tokens where that was 0).
	PromptTokens int64
}

// plus is p with n requests like r added (n < 0 takes them out).
func (p Pending) plus(r Request, n int64) Pending {
	p.Requests += n
	p.Tokens += n * r.Tokens
	p.PromptTokens += n * r.PromptTokens
	return p
}

// Dispatch is one request a Fleet counts against a worker's score until
// the router calls Done, or until the worker's reports count it (see
// Ledger). A nil *Dispatch (accounting off, no worker picked) is valid:
// Done does nothing.
type Dispatch struct {
	set    *pendingSet
	worker *Worker
	sent   *Sent
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
	d.set.done(d.sent)
}

// pendingSet is one worker's Ledger under a lock: picks add to it, the
// Worker's stream observes every report it accepts, Done comes from the
// router's goroutines.
type pendingSet struct {
	mu     sync.Mutex
	l      Ledger
	closed bool // the worker left the fleet: nothing counts
}

// add counts a dispatch at at; nil when the worker has left the fleet.
func (s *pendingSet) add(w *Worker, at time.Time, req Request) *Dispatch {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	return &Dispatch{set: s, worker: w, sent: s.l.Add(at, req)}
}

// done stops counting d.
func (s *pendingSet) done(d *Sent) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.l.Done(d)
}

// observe hands the ledger a report the worker accepted.
func (s *pendingSet) observe(r *pb.LoadReport, receivedAt time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closed {
		s.l.Observe(r, receivedAt)
	}
}

// current is what the ledger counts now.
func (s *pendingSet) current() Pending {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.l.Pending()
}

// close forgets every dispatch: the worker has left the fleet, and a
// Done that comes later finds nothing to count down.
func (s *pendingSet) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.l.Reset()
	s.closed = true
}

// Pending is what the Fleet's router has sent this worker that its
// reports do not count yet (see Fleet.PickFor and Ledger); zero for a
// Worker not dialed by a Fleet, or with Options.Accounting off. It changes
// with every pick and report and is not signalled by Subscribe: read it
// when showing a view.
func (w *Worker) Pending() Pending {
	if w.pending == nil {
		return Pending{}
	}
	return w.pending.current()
}
