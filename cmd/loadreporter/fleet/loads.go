package fleet

import (
	"math"
	"strings"
	"time"

	"github.com/loadreporter/loadreporter/adapters/pollapi"
	"github.com/loadreporter/loadreporter/client"
	pb "github.com/loadreporter/loadreporter/gen/sglang/router/loadmonitor/v1"
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
	var fresh []*pb.RankLoad
	for i, v := range views {
		state := v.StateAt(now)
		w := WorkerLoads{Target: v.Addr, State: state.String(), Dashboard: dashboard(v.Addr)}
		if state != client.Fresh {
			w.Reason = v.Reason
			if w.Reason == "" {
				w.Reason = "no report since " + v.StaleAt.UTC().Format(time.RFC3339Nano)
			}
		}
		if v.Report != nil {
			age := now.Sub(v.ReceivedAt).Milliseconds()
			e := envelopeOf(v.Report)
			w.AgeMs, w.Loads = &age, &e
		}
		if state == client.Fresh {
			a.Aggregate.FreshWorkers++
			fresh = append(fresh, v.Report.GetRanks()...)
		}
		a.Workers[i] = w
	}
	a.Aggregate.DPRankCount = len(fresh)
	a.Aggregate.Aggregate = aggregateOf(fresh)
	return a
}

// envelopeOf is r in the /v1/loads shape, as a worker's own poll API
// would answer it.
func envelopeOf(r *pb.LoadReport) pollapi.Envelope {
	e := pollapi.Envelope{
		Timestamp:        time.UnixMilli(r.GetReportTimeUnixMs()).UTC().Format(time.RFC3339Nano),
		Version:          "loadreporter",
		DPRankCount:      len(r.GetRanks()),
		Loads:            make([]pollapi.Load, len(r.GetRanks())),
		Status:           strings.TrimPrefix(r.GetStatus().String(), "REPORT_STATUS_"),
		SequenceID:       r.GetSequenceId(),
		SourceInstanceID: r.GetSourceInstanceId(),
		LastError:        r.GetLastError(),
	}
	for i, k := range r.GetRanks() {
		e.Loads[i] = pollapi.Load{
			DPRank:                   k.GetDpRank(),
			Timestamp:                float64(k.GetSnapshotTimeUnixMs()) / 1e3,
			NumRunningReqs:           sat32(k.GetNumRunningReqs()),
			NumWaitingReqs:           sat32(k.GetNumWaitingReqs()),
			NumWaitingUncachedTokens: sat32(k.GetNumWaitingUncachedTokens()),
			NumUsedTokens:            sat32(k.GetNumUsedTokens()),
			NumTotalTokens:           sat32(k.GetNumTotalTokens()),
			MaxTotalNumTokens:        sat32(k.GetMaxTotalNumTokens()),
			MaxRunningRequests:       sat32(k.GetMaxRunningRequests()),
			TokenUsage:               k.GetTokenUsage(),
			GenThroughput:            k.GetGenThroughput(),
			CacheHitRate:             k.GetCacheHitRate(),
			Utilization:              k.GetUtilization(),
		}
	}
	e.Aggregate = aggregateOf(r.GetRanks())
	return e
}

// aggregateOf follows pollapi's rules: counts saturate at int32, and the
// summed capacity is 0 unless every rank's is known.
func aggregateOf(ranks []*pb.RankLoad) pollapi.Aggregate {
	var a pollapi.Aggregate
	if len(ranks) == 0 {
		return a
	}
	var running, waiting, used, capacity int64
	capacityKnown := true
	for _, k := range ranks {
		running = addSat(running, k.GetNumRunningReqs())
		waiting = addSat(waiting, k.GetNumWaitingReqs())
		used = addSat(used, k.GetNumUsedTokens())
		capacity = addSat(capacity, k.GetMaxTotalNumTokens())
		capacityKnown = capacityKnown && k.GetMaxTotalNumTokens() > 0
		a.AvgTokenUsage += k.GetTokenUsage()
		a.AvgThroughput += k.GetGenThroughput()
		a.AvgUtilization += k.GetUtilization()
	}
	n := float64(len(ranks))
	a.TotalRunningReqs, a.TotalWaitingReqs = sat32(running), sat32(waiting)
	a.TotalReqs, a.TotalUsedTokens = sat32(addSat(running, waiting)), sat32(used)
	if capacityKnown {
		a.TotalTokens = sat32(capacity)
	}
	a.AvgTokenUsage, a.AvgThroughput, a.AvgUtilization = a.AvgTokenUsage/n, a.AvgThroughput/n, a.AvgUtilization/n
	return a
}

// addSat adds two validated, non-negative counters without wrapping.
func addSat(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// sat32 narrows a validated, non-negative counter to int32, saturating.
func sat32(v int64) int32 {
	return int32(min(v, math.MaxInt32))
}
