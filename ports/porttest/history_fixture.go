package porttest

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/loadreporter/loadreporter/domain"
	"github.com/loadreporter/loadreporter/domain/audit"
)

// The fixture: two workers, a restart, outages (one at the window's start,
// one ongoing at its end), a recording gap, a step of exactly twice the
// interval (not a gap), and imbalance (one spread equal to a threshold).
// Token usages are binary fractions so spreads compare exactly.
var (
	t0 = time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	// Worker 2 reports with a non-UTC location: stores return UTC.
	zone5 = time.FixedZone("UTC+5", 5*3600)
	full  = audit.Window{Since: t0.Add(-time.Hour), Until: t0.Add(time.Hour)}
)

const (
	w1 = "10.0.0.1:30000"
	w2 = "10.0.0.2:30000"
)

func at(sec float64) time.Time { return t0.Add(time.Duration(sec * float64(time.Second))) }

type rk struct {
	dp      int64
	usage   float64
	waiting int64
	gen     float64
}

func report(worker, source string, seq uint64, sec float64, st domain.Status, lastErr string, ranks ...rk) *domain.Report {
	r := &domain.Report{
		SourceInstanceID: source,
		SequenceID:       seq,
		ReportTime:       at(sec),
		Worker:           domain.Worker{Addr: worker, Type: domain.WorkerTypeRegular, Model: "llama", Zone: "z1"},
		Status:           st,
		LastError:        lastErr,
	}
	if worker == w2 {
		r.ReportTime = r.ReportTime.In(zone5)
		r.Worker = domain.Worker{Addr: worker, Type: domain.WorkerTypeDecode}
	}
	for _, k := range ranks {
		r.Ranks = append(r.Ranks, domain.RankLoad{
			DPRank:                   k.dp,
			SnapshotTime:             r.ReportTime.Add(-time.Duration(k.dp+1) * time.Millisecond),
			NumRunningReqs:           3 + k.dp,
			NumWaitingReqs:           k.waiting,
			NumWaitingUncachedTokens: 100 * k.waiting,
			NumUsedTokens:            int64(k.usage * 1024),
			NumTotalTokens:           1024,
			MaxTotalNumTokens:        1024,
			MaxRunningRequests:       64,
			TokenUsage:               k.usage,
			GenThroughput:            k.gen,
			CacheHitRate:             0.25,
			Utilization:              0.5,
		})
	}
	return r
}

const (
	H = domain.StatusHealthy
	S = domain.StatusStale
	U = domain.StatusUnreachable
)

// Fixture returns the reports of the contract's scenario, in an order
// different from the stores' (appenders need not sort).
func Fixture() []*domain.Report {
	rs := []*domain.Report{
		report(w1, "src-a", 1, 0, H, "", rk{0, .5, 0, 100}, rk{1, .5, 1, 100}),
		report(w1, "src-a", 2, 1, H, "", rk{0, .5, 2, 100}, rk{1, .625, 1, 100}),
		report(w1, "src-a", 3, 2, S, "load snapshot stale by 4000 ms", rk{0, .375, 0, 0}, rk{1, .375, 0, 0}),
		report(w1, "src-a", 4, 3, U, "load snapshot pull timed out"),
		report(w1, "src-a", 5, 4, U, "engine down"),
		report(w1, "src-a", 6, 5, H, "", rk{0, .875, 9, 50}, rk{1, .125, 0, 150}),
		report(w1, "src-a", 7, 6, H, "", rk{0, .75, 4, 50}, rk{1, .125, 0, 150}),
		report(w1, "src-a", 8, 7, H, "", rk{0, .375, 1, 100}, rk{1, .25, 1, 100}),
		report(w1, "src-b", 1, 20, H, "", rk{0, .125, 0, 10}, rk{1, .125, 0, 10}),
		report(w1, "src-b", 2, 21, U, "connection refused"),
		report(w1, "src-b", 3, 22, S, "load snapshot stale by 3500 ms", rk{0, .125, 0, 10}, rk{1, .875, 0, 10}),
		report(w2, "src-c", 1, 0, U, "load snapshot pull timed out"),
		report(w2, "src-c", 2, 1, H, "", rk{0, .125, 1, 10}, rk{1, .25, 0, 10}, rk{2, .5, 0, 10}),
		report(w2, "src-c", 3, 2, H, "", rk{0, .25, 5, 20}, rk{1, .25, 0, 10}, rk{2, .25, 0, 10}),
		report(w2, "src-c", 4, 4, H, "", rk{0, .5, 2, 30}, rk{1, .5, 0, 10}, rk{2, .5, 0, 10}),
		report(w2, "src-c", 5, 6.5, H, "", rk{0, .75, 0, 40}, rk{1, .5, 0, 10}, rk{2, .5, 0, 10}),
	}
	slices.Reverse(rs)
	return rs
}

// fixtureOrder is every fixture report, by label, in store order.
var fixtureOrder = []string{
	"src-a#1", "src-c#1", "src-a#2", "src-c#2", "src-a#3", "src-c#3", "src-a#4",
	"src-a#5", "src-c#4", "src-a#6", "src-a#7", "src-c#5", "src-a#8",
	"src-b#1", "src-b#2", "src-b#3",
}

func label(r *domain.Report) string { return fmt.Sprintf("%s#%d", r.SourceInstanceID, r.SequenceID) }

func loaded(t *testing.T, newStore func(t *testing.T) Store) Store {
	s := newStore(t)
	if err := s.Append(ctxFor(t), Fixture()); err != nil {
		t.Fatalf("Append(fixture): %v", err)
	}
	return s
}
