package porttest

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loadreporter/loadreporter/domain"
	"github.com/loadreporter/loadreporter/domain/audit"
)

func describeReport(r *domain.Report) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s worker=%s t=%s %s err=%q type=%s model=%q zone=%q ranks=[", label(r), r.Worker.Addr,
		ts(r.ReportTime), r.Status, r.LastError, r.Worker.Type, r.Worker.Model, r.Worker.Zone)
	for i, k := range r.Ranks {
		if i > 0 {
			b.WriteString(" ")
		}
		fmt.Fprintf(&b, "{%d snap=%s run=%d wait=%d unc=%d used=%d total=%d max=%d maxrun=%d usage=%g gen=%g hit=%g util=%g}",
			k.DPRank, ts(k.SnapshotTime), k.NumRunningReqs, k.NumWaitingReqs, k.NumWaitingUncachedTokens,
			k.NumUsedTokens, k.NumTotalTokens, k.MaxTotalNumTokens, k.MaxRunningRequests,
			k.TokenUsage, k.GenThroughput, k.CacheHitRate, k.Utilization)
	}
	b.WriteString("]")
	return b.String()
}

// utcCopy is what a store must return for r: the same report in UTC.
func utcCopy(r *domain.Report) *domain.Report {
	c := *r
	c.ReportTime = r.ReportTime.UTC()
	c.Ranks = slices.Clone(r.Ranks)
	for i := range c.Ranks {
		c.Ranks[i].SnapshotTime = c.Ranks[i].SnapshotTime.UTC()
	}
	return &c
}

func testRoundTrip(t *testing.T, s Store) {
	fx := Fixture()
	if err := s.Append(ctxFor(t), fx); err != nil {
		t.Fatalf("Append: %v", err)
	}
	if err := s.Append(ctxFor(t), nil); err != nil {
		t.Fatalf("Append(nil batch) = %v, want nil", err)
	}
	page := mustReports(t, s, audit.ReportsQuery{Window: full, Limit: audit.MaxLimit})
	byLabel := map[string]*domain.Report{}
	for _, r := range fx {
		byLabel[label(r)] = utcCopy(r)
	}
	var want []string
	for _, l := range fixtureOrder {
		want = append(want, describeReport(byLabel[l]))
	}
	var got []string
	for _, r := range page.Reports {
		got = append(got, describeReport(r))
	}
	equalLines(t, "all reports, every field", got, want)
	if page.NextCursor != "" {
		t.Errorf("NextCursor = %q after the last page, want empty", page.NextCursor)
	}
}

func testIdempotent(t *testing.T, s Store) {
	fx := Fixture()
	ctx := ctxFor(t)
	if err := s.Append(ctx, fx[:10]); err != nil {
		t.Fatalf("Append(first part): %v", err)
	}
	// A retried batch: the whole fixture, the first part again, and a
	// report twice in one batch.
	retry := append(slices.Clone(fx), fx[:10]...)
	retry = append(retry, fx[3])
	if err := s.Append(ctx, retry); err != nil {
		t.Fatalf("Append(retry): %v", err)
	}
	if err := s.Append(ctx, fx); err != nil {
		t.Fatalf("Append(again): %v", err)
	}
	// A new report twice in one batch.
	extra := report(w1, "src-z", 1, 30, H, "", rk{0, .5, 0, 1}, rk{1, .5, 0, 1})
	if err := s.Append(ctx, []*domain.Report{extra, fx[0], extra}); err != nil {
		t.Fatalf("Append(a new report twice): %v", err)
	}
	page := mustReports(t, s, audit.ReportsQuery{Window: full, Limit: audit.MaxLimit})
	equalLines(t, "reports after re-appending", labels(page.Reports), append(slices.Clone(fixtureOrder), "src-z#1"))
	stats, err := s.RankStats(ctx, audit.RankStatsQuery{Window: full})
	if err != nil {
		t.Fatalf("RankStats: %v", err)
	}
	var got []string
	for _, st := range stats.Stats {
		got = append(got, fmt.Sprintf("%s/%d n=%d", st.WorkerAddr, st.DPRank, st.Reports))
	}
	equalLines(t, "rank rows after re-appending", got, []string{
		w1 + "/0 n=9", w1 + "/1 n=9", w2 + "/0 n=4", w2 + "/1 n=4", w2 + "/2 n=4",
	})
}

func testAppendErrors(t *testing.T, s Store) {
	ctx := ctxFor(t)
	good := report(w1, "src-x", 1, 0, H, "", rk{0, .5, 0, 1})
	bad := map[string]*domain.Report{
		"nil":              nil,
		"source":           {SequenceID: 1, ReportTime: t0, Worker: domain.Worker{Addr: w1}},
		"worker_addr":      {SourceInstanceID: "s", SequenceID: 1, ReportTime: t0},
		"report_time":      {SourceInstanceID: "s", SequenceID: 1, Worker: domain.Worker{Addr: w1}},
		"sequence_id":      {SourceInstanceID: "s", SequenceID: math.MaxUint64, ReportTime: t0, Worker: domain.Worker{Addr: w1}},
		"dp_rank":          {SourceInstanceID: "s", SequenceID: 1, ReportTime: t0, Worker: domain.Worker{Addr: w1}, Ranks: []domain.RankLoad{{DPRank: -1}}},
		"dp_rank appears":  {SourceInstanceID: "s", SequenceID: 1, ReportTime: t0, Worker: domain.Worker{Addr: w1}, Ranks: []domain.RankLoad{{DPRank: 1}, {DPRank: 1}}},
		"report_time 1969": {SourceInstanceID: "s", SequenceID: 1, ReportTime: time.Date(1969, 1, 1, 0, 0, 0, 0, time.UTC), Worker: domain.Worker{Addr: w1}},
	}
	for name, r := range bad {
		err := s.Append(ctx, []*domain.Report{good, r})
		if domain.ErrorCode(err) != domain.CodeInvalidArgument {
			t.Errorf("Append(good, bad %s) = %v, want %s", name, err, domain.CodeInvalidArgument)
			continue
		}
		want := strings.Fields(name)[0]
		if !strings.Contains(domain.ErrorMessage(err), want) && name != "nil" {
			t.Errorf("Append(bad %s): message %q does not name %q", name, domain.ErrorMessage(err), want)
		}
	}
	page := mustReports(t, s, audit.ReportsQuery{Window: full})
	if len(page.Reports) != 0 {
		t.Errorf("a rejected batch stored %v; want nothing (all or nothing)", labels(page.Reports))
	}
}

func testConcurrentAppend(t *testing.T, s Store) {
	ctx := ctxFor(t)
	const n = 120
	var all []*domain.Report
	for i := range n {
		all = append(all, report(w1, "src-par", uint64(i+1), float64(i)/10, H, "", rk{0, .5, 0, 1}, rk{1, .25, 0, 1}))
	}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Go(func() {
			// Overlapping batches: goroutine g writes reports [g·10, g·10+50).
			lo := g * 10
			errs <- s.Append(ctx, all[lo:min(lo+50, n)])
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("concurrent Append: %v", err)
		}
	}
	if err := s.Append(ctx, all); err != nil {
		t.Fatalf("Append(all): %v", err)
	}
	page := mustReports(t, s, audit.ReportsQuery{Window: full, Limit: audit.MaxLimit})
	want := labels(all)
	equalLines(t, "reports after concurrent overlapping appends", labels(page.Reports), want)
}
