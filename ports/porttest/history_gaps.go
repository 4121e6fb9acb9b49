package porttest

import (
	"fmt"
	"testing"
	"time"

	"github.com/loadreporter/loadreporter/domain/audit"
)

func testGaps(t *testing.T, s Store) {
	ctx := ctxFor(t)
	check := func(name string, q audit.GapsQuery, wantGaps, wantRestarts []string) {
		t.Helper()
		res, err := s.Gaps(ctx, q)
		if err != nil {
			t.Fatalf("Gaps(%s): %v", name, err)
		}
		var gaps, restarts []string
		for _, g := range res.Gaps {
			gaps = append(gaps, fmt.Sprintf("%s %s..%s (%s)", g.WorkerAddr, ts(g.Start), ts(g.End), g.Duration))
		}
		for _, r := range res.Restarts {
			restarts = append(restarts, fmt.Sprintf("%s %s at %s after %s at %s", r.WorkerAddr,
				r.SourceInstanceID, ts(r.FirstTime), r.PreviousSourceInstanceID, ts(r.PreviousLastTime)))
		}
		equalLines(t, name+": gaps", gaps, wantGaps)
		equalLines(t, name+": restarts", restarts, wantRestarts)
	}
	restart := []string{w1 + " src-b at 20s after src-a at 7s"}
	// Worker 2 steps 2s → 4s: exactly twice the interval, not a gap.
	check("interval 1s", audit.GapsQuery{Window: full, Interval: time.Second}, []string{
		w2 + " 4s..6.5s (2.5s)",
		w1 + " 7s..20s (13s)",
	}, restart)
	check("interval 5s", audit.GapsQuery{Window: full, Interval: 5 * time.Second}, []string{w1 + " 7s..20s (13s)"}, restart)
	check("interval 6.5s", audit.GapsQuery{Window: full, Interval: 6500 * time.Millisecond}, nil, restart)
	check("worker 2", audit.GapsQuery{Window: full, Interval: time.Second, Workers: []string{w2}}, []string{w2 + " 4s..6.5s (2.5s)"}, nil)
	// Only the window is looked at: the restart's first instance lies
	// outside, so neither a gap nor a restart is seen.
	check("window after the restart", audit.GapsQuery{Window: audit.Window{Since: at(8), Until: at(60)}, Interval: time.Second}, nil, nil)

	res, err := s.Gaps(ctx, audit.GapsQuery{Window: full, Interval: time.Second, Limit: 1})
	if err != nil {
		t.Fatalf("Gaps(limit 1): %v", err)
	}
	if len(res.Gaps) != 1 || len(res.Restarts) != 1 || !res.Truncated {
		t.Errorf("Gaps(limit 1) = %d gaps, %d restarts, truncated=%t; want 1, 1, true", len(res.Gaps), len(res.Restarts), res.Truncated)
	}
}
