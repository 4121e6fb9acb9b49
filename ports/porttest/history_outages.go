package porttest

import (
	"fmt"
	"testing"

	"github.com/loadreporter/loadreporter/domain/audit"
)

func describeOutage(o audit.Outage) string {
	return fmt.Sprintf("%s start=%s end=%s ongoing=%t last=%s dur=%s statuses=%v err=%q n=%d",
		o.WorkerAddr, ts(o.Start), ts(o.End), o.Ongoing, ts(o.LastSeen), o.Duration, o.Statuses, o.LastError, o.Reports)
}

func testOutages(t *testing.T, s Store) {
	ctx := ctxFor(t)
	res, err := s.Outages(ctx, audit.OutagesQuery{Window: full})
	if err != nil {
		t.Fatalf("Outages: %v", err)
	}
	var got []string
	for _, o := range res.Outages {
		got = append(got, describeOutage(o))
	}
	all := []string{
		w2 + " start=0s end=1s ongoing=false last=0s dur=1s statuses=[UNREACHABLE] err=\"load snapshot pull timed out\" n=1",
		w1 + " start=2s end=5s ongoing=false last=4s dur=3s statuses=[STALE UNREACHABLE] err=\"engine down\" n=3",
		w1 + " start=21s end=- ongoing=true last=22s dur=1s statuses=[STALE UNREACHABLE] err=\"load snapshot stale by 3500 ms\" n=2",
	}
	equalLines(t, "outages", got, all)
	if res.Truncated {
		t.Error("Truncated with every outage returned")
	}

	res, err = s.Outages(ctx, audit.OutagesQuery{Window: full, Limit: 2})
	if err != nil {
		t.Fatalf("Outages(limit 2): %v", err)
	}
	if len(res.Outages) != 2 || !res.Truncated {
		t.Errorf("Outages(limit 2) = %d outages, truncated=%t; want 2, true", len(res.Outages), res.Truncated)
	}

	// Runs are seen through the window only: cut the first outage of
	// worker 1 and the end of its last one.
	res, err = s.Outages(ctx, audit.OutagesQuery{Window: audit.Window{Since: at(3), Until: at(22)}, Workers: []string{w1}})
	if err != nil {
		t.Fatalf("Outages(window): %v", err)
	}
	got = nil
	for _, o := range res.Outages {
		got = append(got, describeOutage(o))
	}
	equalLines(t, "outages of worker 1 in [3s, 22s)", got, []string{
		w1 + " start=3s end=5s ongoing=false last=4s dur=2s statuses=[UNREACHABLE] err=\"engine down\" n=2",
		w1 + " start=21s end=- ongoing=true last=21s dur=0s statuses=[UNREACHABLE] err=\"connection refused\" n=1",
	})
}
