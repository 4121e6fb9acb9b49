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
	// Loads is the latest report in the /v1/loads envelope; null before the
	// first. A disconnected or stale worker keeps its last one, for
	// display: State says whether it means anything now.
	Loads *pollapi.Envelope `json:"loads"`
}

// Aggregate is pollapi's aggregate over every rank of the Fresh workers,
// with the counts it was made from.
type Aggregate struct {
	Workers      int `json:"workers"`
	FreshWorkers int `json:"fresh_workers"`
	DPRankCount  int `json:"dp_rank_count"`
	pollapi.Aggregate
}

// answerOf is the answer for views at now.
func answerOf(now time.Time, views []*client.View, dashboard func(string) string) Answer {
	a := Answer{Timestamp: now.UTC().Format(time.RFC3339Nano), Workers: make([]WorkerLoads, len(views))}
	a.Aggregate.Workers = len(views)
	var fresh []domain.RankLoad
	for i, v := range views {
		state := v.StateAt(now)
		w := WorkerLoads{Target: v.Addr, State: state.String(), Dashboard: dashboard(v.Addr)}
		if state != client.Fresh {
			w.Reason = notFreshReason(v)
		}
		var report *domain.Report // nil before the first report
		if v.Report != nil {
			report = rpc.ReportFromProto(v.Report)
			age := now.Sub(v.ReceivedAt).Milliseconds()
			e := pollapi.EnvelopeOf(report)
			w.AgeMs, w.Loads = &age, &e
		}
		if state == client.Fresh {
			a.Aggregate.FreshWorkers++
			if report != nil {
				fresh = append(fresh, report.Ranks...)
			}
		}
		a.Workers[i] = w
	}
	a.Aggregate.DPRankCount = len(fresh)
	a.Aggregate.Aggregate = pollapi.AggregateOf(fresh)
	return a
}
