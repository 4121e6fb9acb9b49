package model

import (
	"math"
	"slices"
	"time"
)

// reqState is where a request is.
type reqState int

const (
	waiting  reqState = iota // in the rank's queue
	admitted                 // in the batch: prefilling or decoding
	gone                     // finished or cancelled
)

type req struct {
	id        uint64
	prompt    int
	maxNew    int
	prefilled int // prompt tokens prefilled so far
	generated int
	state     reqState
	stats     RequestStats
}

// need is the KV tokens a request may come to hold.
func (q *req) need() int64 { return int64(q.prompt) + int64(q.maxNew) }

// written is the KV tokens it holds now.
func (q *req) written() int64 { return int64(q.prefilled) + int64(q.generated) }

// decoding says the request's prompt is prefilled and it has tokens to go.
func (q *req) decoding() bool { return q.prefilled == q.prompt && q.generated < q.maxNew }

type stepKind int

const (
	prefillStep stepKind = iota
	decodeStep
)

// stepItem is one request's share of a step: the prompt tokens it
// prefills, or (decode) one token.
type stepItem struct {
	q      *req
	tokens int
}

// window accumulates what a snapshot's rates are computed over.
type window struct {
	tokens int64         // tokens generated
	busy   time.Duration // time spent in steps
}

// rank is one DP rank's scheduler: SGLang's event loop reduced to its
// timing. Each step is planned at its start (a prefill step when any
// prompt can be prefilled, else a decode step over every decoding
// request) and its effects applied at its end.
type rank struct {
	id int
	p  *Params

	waiting   []*req // first come, first served
	running   []*req // admitted, in admission order
	committed int64  // Σ need() over running: what admission checks
	used      int64  // Σ written() over running

	// pending: a request came to an idle rank; its step starts at startAt,
	// when the caller's Advance reaches it, so that requests arriving at
	// the same instant share it, as SGLang's scheduler drains every
	// request queued when it starts a step.
	pending   bool
	startAt   time.Time
	busy      bool
	kind      stepKind
	stepStart time.Time
	stepEnd   time.Time
	items     []stepItem
	steps     uint64
	decodes   uint64 // decode steps, for the publish intervals

	published, metrics        Load
	lastLoad, lastMetrics     time.Time // when each snapshot was taken
	loadWindow, metricsWindow window
}

func (r *rank) submit(now time.Time, q *req) {
	q.state = waiting
	r.waiting = append(r.waiting, q)
	if !r.busy && !r.pending {
		r.pending, r.startAt = true, now
	}
}

// due is when the rank next has something to do: start a step or end one.
func (r *rank) due() (time.Time, bool) {
	switch {
	case r.pending:
		return r.startAt, true
	case r.busy:
		return r.stepEnd, true
	}
	return time.Time{}, false
}

func (r *rank) cancel(q *req) {
	switch q.state {
	case waiting:
		r.waiting = slices.DeleteFunc(r.waiting, func(o *req) bool { return o == q })
	case admitted:
		r.release(q)
	}
	q.stats.OutputTokens = q.generated
	q.state = gone
}

// release takes an admitted request out of the batch and frees its KV.
func (r *rank) release(q *req) {
	r.running = slices.DeleteFunc(r.running, func(o *req) bool { return o == q })
	r.committed -= q.need()
	r.used -= q.written()
}

// plan starts the next step at now, or leaves the rank idle. Requests
// that arrive after now are not admitted. Like
// SGLang's scheduler it prefers prefill: the prompt of a partly prefilled
// request continues first, then waiting requests are admitted in order
// while a running slot, the chunk's token budget and the KV cache allow,
// stopping at the first that does not fit (no request overtakes another).
func (r *rank) plan(now time.Time) {
	r.items = r.items[:0]
	budget := r.p.ChunkedPrefillSize
	tokens := 0
	for _, q := range r.running {
		if budget == 0 {
			break
		}
		if rest := q.prompt - q.prefilled; rest > 0 {
			n := min(rest, budget)
			r.items = append(r.items, stepItem{q, n})
			budget -= n
			tokens += n
		}
	}
	for budget > 0 && len(r.waiting) > 0 {
		q := r.waiting[0]
		if q.stats.Arrival.After(now) || len(r.running) >= r.p.MaxRunningRequests || r.committed+q.need() > r.p.MaxTotalNumTokens {
			break
		}
		r.waiting = r.waiting[1:]
		q.state = admitted
		q.stats.Admitted = now
		r.running = append(r.running, q)
		r.committed += q.need()
		n := min(q.prompt, budget)
		r.items = append(r.items, stepItem{q, n})
		budget -= n
		tokens += n
	}
	var d time.Duration
	switch {
	case len(r.items) > 0:
		r.kind = prefillStep
		d = r.p.prefillStep(tokens)
	default:
		var kv int64
		for _, q := range r.running {
			if q.decoding() {
				r.items = append(r.items, stepItem{q, 1})
				kv += q.written()
			}
		}
		if len(r.items) == 0 {
			r.busy = false
			if len(r.waiting) > 0 {
				// Only requests from after now wait: start when the first
				// arrives.
				r.pending, r.startAt = true, r.waiting[0].stats.Arrival
			}
			return
		}
		r.kind = decodeStep
		d = r.p.decodeStep(len(r.items), kv)
	}
	r.busy = true
	r.stepStart, r.stepEnd = now, now.Add(d)
}

// endStep applies the running step's effects at its end, publishes what
// is due and plans the next step.
func (r *rank) endStep(events []Event) []Event {
	now := r.stepEnd
	r.steps++
	r.loadWindow.busy += now.Sub(r.stepStart)
	r.metricsWindow.busy += now.Sub(r.stepStart)
	for _, it := range r.items {
		q := it.q
		if q.state != admitted { // cancelled during the step
			continue
		}
		if r.kind == prefillStep {
			q.prefilled += it.tokens
			r.used += int64(it.tokens)
			if q.prefilled < q.prompt {
				continue
			}
			if q.maxNew == 0 {
				events = r.finish(now, q, events)
				continue
			}
			q.stats.FirstToken = now
		}
		q.generated++
		r.used++
		r.loadWindow.tokens++
		r.metricsWindow.tokens++
		events = append(events, Event{Kind: EventTokens, At: now, Rank: r.id, Request: q.id, Tokens: q.generated})
		if q.generated == q.maxNew {
			events = r.finish(now, q, events)
		}
	}
	publishLoad, publishMetrics := r.kind == prefillStep, r.kind == prefillStep
	if r.kind == decodeStep {
		r.decodes++
		publishLoad = r.decodes%uint64(r.p.LoadSnapshotPublishInterval) == 0
		publishMetrics = r.decodes%uint64(r.p.DecodeLogInterval) == 0
	}
	// Snapshots are taken before the next step is planned, as SGLang takes
	// them while processing a batch's result: a request that arrived during
	// the step still shows as waiting.
	if publishLoad {
		events = r.publishLoad(now, events)
	}
	if publishMetrics {
		events = r.publishMetrics(now, events)
	}
	r.plan(now)
	if !r.busy {
		// Going idle publishes at once (nothing was admitted by plan, so
		// the state is the one just after the step).
		if !publishLoad {
			events = r.publishLoad(now, events)
		}
		if !publishMetrics {
			events = r.publishMetrics(now, events)
		}
	}
	return events
}

func (r *rank) finish(now time.Time, q *req, events []Event) []Event {
	r.release(q)
	q.state = gone
	q.stats.Finished = now
	q.stats.OutputTokens = q.generated
	return append(events, Event{Kind: EventFinished, At: now, Rank: r.id, Request: q.id, Tokens: q.generated, Stats: q.stats})
}

func (r *rank) publishLoad(now time.Time, events []Event) []Event {
	r.published = r.snapshot(now, &r.lastLoad, &r.loadWindow)
	return append(events, Event{Kind: EventLoadPublished, At: now, Rank: r.id})
}

func (r *rank) publishMetrics(now time.Time, events []Event) []Event {
	r.metrics = r.snapshot(now, &r.lastMetrics, &r.metricsWindow)
	return append(events, Event{Kind: EventMetricsPublished, At: now, Rank: r.id})
}

// snapshot is the rank's load at now; the rates cover the time since
// *last, and *last and *w restart from now.
func (r *rank) snapshot(now time.Time, last *time.Time, w *window) Load {
	l := Load{
		DPRank: r.id, Timestamp: now, Steps: r.steps,
		NumRunningReqs:     len(r.running),
		NumWaitingReqs:     len(r.waiting),
		NumUsedTokens:      r.used,
		MaxTotalNumTokens:  r.p.MaxTotalNumTokens,
		MaxRunningRequests: r.p.MaxRunningRequests,
	}
	for _, q := range r.waiting {
		l.NumWaitingUncachedTokens += int64(q.prompt)
	}
	pending := l.NumWaitingUncachedTokens
	for _, q := range r.running {
		pending += int64(q.prompt - q.prefilled)
	}
	l.NumTotalTokens = r.used + pending
	l.TokenUsage = round(float64(r.used)/float64(r.p.MaxTotalNumTokens), 4)
	if span := now.Sub(*last); span > 0 {
		l.GenThroughput = round(float64(w.tokens)/span.Seconds(), 2)
		l.Utilization = round(min(1, w.busy.Seconds()/span.Seconds()), 4)
	}
	*last, *w = now, window{}
	return l
}

// round rounds x to n decimals, as SGLang rounds the ratios it reports.
func round(x float64, n int) float64 {
	f := math.Pow(10, float64(n))
	return math.Round(x*f) / f
}
