package fleet

import (
	"time"

	"github.com/loadreporter/loadreporter/adapters/pollapi"
	"github.com/loadreporter/loadreporter/adapters/rpc"
	"github.com/loadreporter/loadreporter/client"
	"github.com/loadreporter/loadreporter/domain"
)

// LoadsRoute is where the fleet's loads are served.
const LoadsRoute = "GET /v1/fleet/loads"

// Answer is the body of GET /v1/fleet/loads.
type Answer struct {
	// Timestamp is when the answer was made, on the fleet's clock.
	Timestamp string `json:"timestamp"`
	// Workers are the targets, sorted by address.
	Workers []WorkerLoads `json:"workers"`
	// Aggregate sums the Fresh workers only: a router routes on nothing
	// else.
	Aggregate Aggregate `json:"aggregate"`
}

// WorkerLoads is one worker as the fleet sees it.
type WorkerLoads struct {
	Target string `json:"target"`
	// State is the client's: fresh, stale, unreachable or disconnected.
	State string `json:"state"`
	// Reason says why the worker is not fresh.
	Reason string `json:"reason,omitempty"`
	// AgeMs is how long ago the latest report arrived; null before the
	// first.
	AgeMs *int64 `json:"age_ms"`
	// Dashboard is the worker's own live page.
	Dashboard string `json:"dashboard"`
	// Pending is what the fleet's router sent the worker that its report
	// does not count yet.
	Pending Pending `json:"pending"`
	// Loads is the latest report in the /v1/loads envelope; null before the
	// first. A disconnected or stale worker keeps its last one, for
	// display: State says whether it means anything now.
	Loads *pollapi.Envelope `json:"loads"`
}

// Pending is package client's Pending: the dispatches of the fleet's
// router that a worker's report does not count yet. Always zero unless a
// router picks through the fleet's client.
type Pending struct {
	Requests int64 `json:"requests"`
	Tokens   int64 `json:"tokens"`
}

// Aggregate is pollapi's aggregate over every rank of the Fresh workers,
// with the counts it was made from and the pending dispatches of every
// worker.
type Aggregate struct {
	Workers      int `json:"workers"`
	FreshWorkers int `json:"fresh_workers"`
	DPRankCount  int `json:"dp_rank_count"`
	pollapi.Aggregate
	PendingRequests int64 `json:"pending_requests"`
	PendingTokens   int64 `json:"pending_tokens"`
}

// aggregateOf sums es at now; report(i) is es[i].View's report in domain
// terms, asked of the Fresh workers only.
func aggregateOf(now time.Time, es []client.Standing, report func(i int) *domain.Report) Aggregate {
	a := Aggregate{Workers: len(es)}
	var fresh []domain.RankLoad
	for i, e := range es {
		a.PendingRequests += e.Pending.Requests
		a.PendingTokens += e.Pending.Tokens
		if e.View.StateAt(now) != client.Fresh {
			continue
		}
		a.FreshWorkers++
		if r := report(i); r != nil {
			fresh = append(fresh, r.Ranks...)
		}
	}
	a.DPRankCount = len(fresh)
	a.Aggregate = pollapi.AggregateOf(fresh)
	return a
}

// answerOf is the answer for es at now.
func answerOf(now time.Time, es []client.Standing, dashboard func(string) string) Answer {
	a := Answer{Timestamp: now.UTC().Format(time.RFC3339Nano), Workers: make([]WorkerLoads, len(es))}
	reports := make([]*domain.Report, len(es)) // nil before the first report
	for i, e := range es {
		v := e.View
		state := v.StateAt(now)
		w := WorkerLoads{Target: v.Addr, State: state.String(), Dashboard: dashboard(v.Addr),
			Pending: Pending{Requests: e.Pending.Requests, Tokens: e.Pending.Tokens}}
		if state != client.Fresh {
			w.Reason = notFreshReason(v)
		}
		if v.Report != nil {
			reports[i] = rpc.ReportFromProto(v.Report)
			age := now.Sub(v.ReceivedAt).Milliseconds()
			env := pollapi.EnvelopeOf(reports[i])
			w.AgeMs, w.Loads = &age, &env
		}
		a.Workers[i] = w
	}
	a.Aggregate = aggregateOf(now, es, func(i int) *domain.Report { return reports[i] })
	return a
}
