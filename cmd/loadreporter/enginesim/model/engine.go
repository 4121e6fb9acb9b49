package model

import (
	"time"

	"github.com/loadreporter/loadreporter/domain"
)

// AnyRank, as Request.Rank, lets the engine choose the rank by its
// LoadBalanceMethod.
const AnyRank = -1

// Request is one generation asked of the engine.
type Request struct {
	// PromptTokens is the prompt's length in tokens (at least 1).
	PromptTokens int
	// MaxNewTokens is how many tokens are generated (0 generates none:
	// the request ends when its prompt is prefilled).
	MaxNewTokens int
	// Rank is the rank to run on (SGLang's routed_dp_rank), or AnyRank.
	Rank int
}

// RequestStats is what one request went through, on the engine's time.
type RequestStats struct {
	ID           uint64
	Rank         int
	PromptTokens int
	MaxNewTokens int
	// OutputTokens is how many tokens it got.
	OutputTokens int
	// Arrival is when it was submitted; Admitted when its first prefill
	// step started; FirstToken when the step that finished its prefill
	// ended (zero for a request with MaxNewTokens 0, or one cancelled
	// before); Finished when its last token came or it was cancelled.
	Arrival, Admitted, FirstToken, Finished time.Time
	// Cancelled says it was cancelled before its last token.
	Cancelled bool
}

// TTFT is the time from arrival to the first token; 0 when none came.
func (s RequestStats) TTFT() time.Duration {
	if s.FirstToken.IsZero() {
		return 0
	}
	return s.FirstToken.Sub(s.Arrival)
}

// QueueWait is the time from arrival to admission; up to Finished for a
// request cancelled while it waited.
func (s RequestStats) QueueWait() time.Duration {
	if s.Admitted.IsZero() {
		return s.Finished.Sub(s.Arrival)
	}
	return s.Admitted.Sub(s.Arrival)
}

// E2E is the time from arrival to the last token (or the cancellation).
func (s RequestStats) E2E() time.Duration { return s.Finished.Sub(s.Arrival) }

// EventKind tells the events of Advance apart.
type EventKind int

const (
	// EventTokens: a request produced a token; Event.Tokens is how many it
	// has now.
	EventTokens EventKind = iota
	// EventFinished: a request got its last token (Event.Tokens, and
	// Event.Stats says all). A request's EventTokens for its last token
	// comes first.
	EventFinished
	// EventLoadPublished: the rank refreshed its published load snapshot
	// (Engine.Published).
	EventLoadPublished
	// EventMetricsPublished: the rank refreshed its metrics snapshot
	// (Engine.Metrics).
	EventMetricsPublished
)

// Event is one thing that happened at the end of a step.
type Event struct {
	Kind    EventKind
	At      time.Time
	Rank    int
	Request uint64
	Tokens  int
	// Stats is set for EventFinished.
	Stats RequestStats
}

// Load is one rank's load as SGLang's scheduler reports it (its
// LoadSnapshot's core fields, and the queue breakdown).
type Load struct {
	DPRank int
	// Timestamp is when the snapshot was taken.
	Timestamp time.Time
	// Steps is how many steps the rank had finished when it was taken.
	Steps uint64

	NumRunningReqs int
	NumWaitingReqs int
	// NumWaitingUncachedTokens is the waiting prompts' tokens (the
	// simulated engine has no prefix cache, so none is cached).
	NumWaitingUncachedTokens int64
	// NumUsedTokens is the KV tokens the admitted requests hold.
	NumUsedTokens int64
	// NumTotalTokens is NumUsedTokens plus the prompt tokens still to be
	// prefilled (waiting prompts and the rest of partly prefilled ones).
	NumTotalTokens     int64
	MaxTotalNumTokens  int64
	MaxRunningRequests int

	TokenUsage float64
	// GenThroughput is tokens generated per second since the previous
	// snapshot of the same kind.
	GenThroughput float64
	// CacheHitRate is always 0: there is no prefix cache.
	CacheHitRate float64
	// Utilization is the share of the time since the previous snapshot
	// of the same kind the rank spent in steps.
	Utilization float64
}

// Engine is the simulated engine: DPSize ranks, each a scheduler of its
// own, advanced by whoever holds it. It is not safe for concurrent use.
type Engine struct {
	p      Params
	ranks  []*rank
	reqs   map[uint64]*req
	nextID uint64
	rr     int // next rank of round robin
}

// New validates p (see Params.Validate) and returns an idle engine whose
// snapshots are taken at now.
func New(p Params, now time.Time) (*Engine, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	e := &Engine{p: p, reqs: map[uint64]*req{}}
	for i := range p.DPSize {
		r := &rank{id: i, p: &e.p, lastLoad: now, lastMetrics: now}
		r.published = r.snapshot(now, &r.lastLoad, &r.loadWindow)
		r.metrics = r.snapshot(now, &r.lastMetrics, &r.metricsWindow)
		e.ranks = append(e.ranks, r)
	}
	return e, nil
}

// Params returns the engine's parameters.
func (e *Engine) Params() Params { return e.p }

// Submit adds r at now, to the named rank or to the one the load-balance
// method picks, and returns its id. A rank that was idle starts a step at
// now. Submit refuses, with CodeInvalidArgument naming the field, a
// request that could never run: an empty prompt, a negative
// MaxNewTokens, more tokens than the context length or than a rank's
// whole KV cache, or a rank that does not exist.
func (e *Engine) Submit(now time.Time, r Request) (uint64, error) {
	need := int64(r.PromptTokens) + int64(r.MaxNewTokens)
	switch {
	case r.PromptTokens < 1:
		return 0, domain.Errorf(domain.CodeInvalidArgument, "the prompt is empty: want at least 1 input token")
	case r.MaxNewTokens < 0:
		return 0, domain.Errorf(domain.CodeInvalidArgument, "max_new_tokens %d: want ≥ 0", r.MaxNewTokens)
	case need > int64(e.p.ContextLength):
		return 0, domain.Errorf(domain.CodeInvalidArgument,
			"requested %d tokens (%d input, %d to generate), more than the context length %d", need, r.PromptTokens, r.MaxNewTokens, e.p.ContextLength)
	case need > e.p.MaxTotalNumTokens:
		return 0, domain.Errorf(domain.CodeInvalidArgument,
			"requested %d tokens (%d input, %d to generate), more than a rank's KV cache of %d tokens: it could never be scheduled", need, r.PromptTokens, r.MaxNewTokens, e.p.MaxTotalNumTokens)
	case r.Rank != AnyRank && (r.Rank < 0 || r.Rank >= len(e.ranks)):
		return 0, domain.Errorf(domain.CodeInvalidArgument, "routed_dp_rank %d: want 0 to %d", r.Rank, len(e.ranks)-1)
	}
	rk := r.Rank
	if rk == AnyRank {
		rk = e.pick()
	}
	e.nextID++
	q := &req{id: e.nextID, prompt: r.PromptTokens, maxNew: r.MaxNewTokens,
		stats: RequestStats{ID: e.nextID, Rank: rk, PromptTokens: r.PromptTokens, MaxNewTokens: r.MaxNewTokens, Arrival: now}}
	e.reqs[q.id] = q
	e.ranks[rk].submit(now, q)
	return q.id, nil
}

// pick is the load-balance method's rank.
func (e *Engine) pick() int {
	if e.p.LoadBalanceMethod == TotalRequests {
		best := 0
		for i, r := range e.ranks {
			l, b := r.published, e.ranks[best].published
			if l.NumRunningReqs+l.NumWaitingReqs < b.NumRunningReqs+b.NumWaitingReqs {
				best = i
			}
		}
		return best
	}
	i := e.rr
	e.rr = (e.rr + 1) % len(e.ranks)
	return i
}

// Cancel removes request id at now, as SGLang aborts a request whose
// client went away: it leaves its queue or batch and its KV tokens are
// free for the next step's admissions. A step already running finishes
// in the time it was planned with, without it. Cancel returns the
// request's stats, and false when id is not in the engine (unknown, or
// already finished).
func (e *Engine) Cancel(now time.Time, id uint64) (RequestStats, bool) {
	q, ok := e.reqs[id]
	if !ok {
		return RequestStats{}, false
	}
	delete(e.reqs, id)
	e.ranks[q.stats.Rank].cancel(q)
	q.stats.Cancelled = true
	q.stats.Finished = now
	return q.stats, true
}

// NextEvent is when the engine next has something to do: a step to end,
// or one to start on a rank a request came to while it was idle; ok is
// false when every rank is idle.
func (e *Engine) NextEvent() (at time.Time, ok bool) {
	for _, r := range e.ranks {
		if t, due := r.due(); due && (!ok || t.Before(at)) {
			at, ok = t, true
		}
	}
	return at, ok
}

// Advance starts and ends, in time order, every step due at or before
// now, starting each rank's next step at the instant its previous one
// ended, and appends what happened to events. Nothing moves in between calls:
// the caller calls Advance when NextEvent's time has come (or later,
// which delays the events but not the engine's own time).
func (e *Engine) Advance(now time.Time, events []Event) []Event {
	for {
		var next *rank
		var nextAt time.Time
		for _, r := range e.ranks {
			if t, due := r.due(); due && !t.After(now) && (next == nil || t.Before(nextAt)) {
				next, nextAt = r, t
			}
		}
		if next == nil {
			return events
		}
		if next.pending {
			next.pending = false
			next.plan(next.startAt)
			continue
		}
		start := len(events)
		events = next.endStep(events)
		for _, ev := range events[start:] {
			if ev.Kind == EventFinished {
				delete(e.reqs, ev.Request)
			}
		}
	}
}

// Published is rank's published load snapshot: what /v1/loads, GetLoads
// and the LoadStat socket report.
func (e *Engine) Published(rank int) Load { return e.ranks[rank].published }

// PublishedAt is rank's published load snapshot as a reader finds it at
// now: Published, stamped now while the rank is idle. An idle SGLang
// scheduler republishes its unchanged numbers on every pass of its idle
// loop (Scheduler.on_idle calls publish_load_snapshot with force=True;
// with --sleep-on-idle it wakes at least once a second:
// python/sglang/srt/managers/scheduler.py in the 0.5.23 wheel), so an
// idle engine's stamp is current, and only a busy one's ages.
func (e *Engine) PublishedAt(rank int, now time.Time) Load {
	r := e.ranks[rank]
	l := r.published
	if !r.busy && !r.pending && now.After(l.Timestamp) {
		l.Timestamp = now
	}
	return l
}

// Metrics is rank's metrics snapshot: what /metrics reports.
func (e *Engine) Metrics(rank int) Load { return e.ranks[rank].metrics }

// Live is rank's load as it stands at now (at the end of its last
// step): what the scheduler itself would answer, for /get_load and for a
// benchmark's oracle. It moves no snapshot.
func (e *Engine) Live(rank int, now time.Time) Load {
	r := e.ranks[rank]
	last, w := r.lastLoad, r.loadWindow
	return r.snapshot(now, &last, &w)
}

// Request returns the stats so far of a request still in the engine.
func (e *Engine) Request(id uint64) (RequestStats, bool) {
	q, ok := e.reqs[id]
	if !ok {
		return RequestStats{}, false
	}
	s := q.stats
	s.OutputTokens = q.generated
	return s, true
}
