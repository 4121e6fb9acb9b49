package porttest

import (
	"slices"
	"testing"
	"time"

	"github.com/loadreporter/loadreporter/domain"
	"github.com/loadreporter/loadreporter/domain/audit"
)

func testRetention(t *testing.T, s Store) {
	ctx := ctxFor(t)
	day := func(d, h int) time.Time { return time.Date(2026, 3, d, h, 0, 0, 0, time.UTC) }
	var rs []*domain.Report
	for i, tm := range []time.Time{
		day(1, 0), day(1, 23), day(2, 5), day(2, 23), day(3, 0), day(3, 12), day(4, 1),
	} {
		r := report(w1, "src-r", uint64(i+1), 0, H, "", rk{0, .5, 1, 1}, rk{1, .5, 1, 1})
		r.ReportTime = tm
		for j := range r.Ranks {
			r.Ranks[j].SnapshotTime = tm
		}
		rs = append(rs, r)
	}
	if err := s.Append(ctx, rs); err != nil {
		t.Fatalf("Append: %v", err)
	}
	purge := func(before time.Time) int64 {
		t.Helper()
		var total int64
		for range 100 {
			n, err := s.DeleteBefore(ctx, before, 1)
			if err != nil {
				t.Fatalf("DeleteBefore(%s): %v", before, err)
			}
			if n == 0 {
				return total
			}
			total += n
		}
		t.Fatalf("DeleteBefore(%s) never returned 0", before)
		return 0
	}
	w := audit.Window{Since: day(1, 0).Add(-time.Hour), Until: day(5, 0)}
	// A day boundary: every store removes exactly what lies before it.
	if n := purge(day(3, 0)); n != 4 {
		t.Errorf("DeleteBefore(day 3) removed %d reports, want 4", n)
	}
	page := mustReports(t, s, audit.ReportsQuery{Window: w})
	equalLines(t, "reports kept", labels(page.Reports), []string{"src-r#5", "src-r#6", "src-r#7"})
	stats, err := s.RankStats(ctx, audit.RankStatsQuery{Window: w})
	if err != nil {
		t.Fatalf("RankStats: %v", err)
	}
	for _, st := range stats.Stats {
		if st.Reports != 3 {
			t.Errorf("rank %d keeps %d rows after retention, want 3 (ranks go with their reports)", st.DPRank, st.Reports)
		}
	}
	// Mid-day: a store may keep the reports of the day that contains t,
	// but never removes a report at or after t.
	purge(day(3, 12))
	page = mustReports(t, s, audit.ReportsQuery{Window: w})
	got := labels(page.Reports)
	if !slices.Contains(got, "src-r#6") || !slices.Contains(got, "src-r#7") {
		t.Errorf("DeleteBefore(day 3 12:00) removed reports at or after it: kept %v", got)
	}
	if n := purge(day(3, 0)); n != 0 {
		t.Errorf("DeleteBefore(day 3) again removed %d, want 0", n)
	}
}
