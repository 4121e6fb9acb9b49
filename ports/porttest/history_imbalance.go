package porttest

import (
	"fmt"
	"testing"

	"github.com/loadreporter/loadreporter/domain/audit"
)

func testImbalance(t *testing.T, s Store) {
	ctx := ctxFor(t)
	check := func(name string, q audit.ImbalanceQuery, want []string) {
		t.Helper()
		res, err := s.Imbalance(ctx, q)
		if err != nil {
			t.Fatalf("Imbalance(%s): %v", name, err)
		}
		var got []string
		for _, sp := range res.Spans {
			got = append(got, fmt.Sprintf("%s start=%s end=%s ongoing=%t last=%s dur=%s peak=%g@%s n=%d", sp.WorkerAddr,
				ts(sp.Start), ts(sp.End), sp.Ongoing, ts(sp.LastSeen), sp.Duration, sp.PeakSpread, ts(sp.PeakTime), sp.Reports))
		}
		equalLines(t, name, got, want)
	}
	check("threshold 0.5", audit.ImbalanceQuery{Window: full, Threshold: .5}, []string{
		w1 + " start=5s end=7s ongoing=false last=6s dur=2s peak=0.75@5s n=2",
		w1 + " start=22s end=- ongoing=true last=22s dur=0s peak=0.75@22s n=1",
	})
	// 0.625 is exactly the spread at 6s: not above it.
	check("threshold 0.625", audit.ImbalanceQuery{Window: full, Threshold: .625}, []string{
		w1 + " start=5s end=6s ongoing=false last=5s dur=1s peak=0.75@5s n=1",
		w1 + " start=22s end=- ongoing=true last=22s dur=0s peak=0.75@22s n=1",
	})
	// Threshold 0: every report with two ranks apart; UNREACHABLE
	// reports (no ranks) and even ones end runs.
	check("threshold 0", audit.ImbalanceQuery{Window: full}, []string{
		w1 + " start=1s end=2s ongoing=false last=1s dur=1s peak=0.125@1s n=1",
		w2 + " start=1s end=2s ongoing=false last=1s dur=1s peak=0.375@1s n=1",
		w1 + " start=5s end=20s ongoing=false last=7s dur=15s peak=0.75@5s n=3",
		w2 + " start=6.5s end=- ongoing=true last=6.5s dur=0s peak=0.25@6.5s n=1",
		w1 + " start=22s end=- ongoing=true last=22s dur=0s peak=0.75@22s n=1",
	})
	check("worker 2, threshold 0.3", audit.ImbalanceQuery{Window: full, Workers: []string{w2}, Threshold: .3}, []string{
		w2 + " start=1s end=2s ongoing=false last=1s dur=1s peak=0.375@1s n=1",
	})
	check("threshold 1", audit.ImbalanceQuery{Window: full, Threshold: 1}, nil)
	res, err := s.Imbalance(ctx, audit.ImbalanceQuery{Window: full, Limit: 4})
	if err != nil {
		t.Fatalf("Imbalance(limit 4): %v", err)
	}
	if len(res.Spans) != 4 || !res.Truncated {
		t.Errorf("Imbalance(limit 4) = %d spans, truncated=%t; want 4, true", len(res.Spans), res.Truncated)
	}
}
