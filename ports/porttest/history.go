package porttest

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loadreporter/loadreporter/domain"
	"github.com/loadreporter/loadreporter/domain/audit"
	"github.com/loadreporter/loadreporter/ports"
)

// Store is what the history contract exercises: a store that answers the
// audit queries over what was appended to it.
type Store interface {
	ports.HistoryStore
	ports.HistoryQuery
}

// HistoryStore runs the history contract. newStore must return a fresh,
// empty store on every call (each subtest makes its own, and subtests run in
// parallel) and release it through t.Cleanup.
func HistoryStore(t *testing.T, newStore func(t *testing.T) Store) {
	t.Run("AppendAndRoundTrip", func(t *testing.T) { t.Parallel(); testRoundTrip(t, newStore(t)) })
	t.Run("IdempotentAppend", func(t *testing.T) { t.Parallel(); testIdempotent(t, newStore(t)) })
	t.Run("AppendRejectsBadReports", func(t *testing.T) { t.Parallel(); testAppendErrors(t, newStore(t)) })
	t.Run("ConcurrentAppend", func(t *testing.T) { t.Parallel(); testConcurrentAppend(t, newStore(t)) })
	t.Run("ReportsFilters", func(t *testing.T) { t.Parallel(); testReportsFilters(t, loaded(t, newStore)) })
	t.Run("ReportsPaging", func(t *testing.T) { t.Parallel(); testPaging(t, loaded(t, newStore)) })
	t.Run("Outages", func(t *testing.T) { t.Parallel(); testOutages(t, loaded(t, newStore)) })
	t.Run("RankStats", func(t *testing.T) { t.Parallel(); testRankStats(t, loaded(t, newStore)) })
	t.Run("Gaps", func(t *testing.T) { t.Parallel(); testGaps(t, loaded(t, newStore)) })
	t.Run("Imbalance", func(t *testing.T) { t.Parallel(); testImbalance(t, loaded(t, newStore)) })
	t.Run("EmptyWindow", func(t *testing.T) { t.Parallel(); testEmptyWindow(t, loaded(t, newStore)) })
	t.Run("ArgumentErrors", func(t *testing.T) { t.Parallel(); testArgumentErrors(t, newStore(t)) })
	t.Run("Retention", func(t *testing.T) { t.Parallel(); testRetention(t, newStore(t)) })
}

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

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func loaded(t *testing.T, newStore func(t *testing.T) Store) Store {
	s := newStore(t)
	if err := s.Append(ctxFor(t), Fixture()); err != nil {
		t.Fatalf("Append(fixture): %v", err)
	}
	return s
}

func labels(rs []*domain.Report) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = label(r)
	}
	return out
}

func mustReports(t *testing.T, s Store, q audit.ReportsQuery) audit.ReportsPage {
	t.Helper()
	page, err := s.Reports(ctxFor(t), q)
	if err != nil {
		t.Fatalf("Reports(%+v): %v", q, err)
	}
	return page
}

func equalLines(t *testing.T, what string, got, want []string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("%s:\n got:\n  %s\n want:\n  %s", what, strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

func ts(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	if t.Location() != time.UTC {
		return "NOT-UTC:" + t.String()
	}
	return t.Sub(t0).String()
}

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

func testReportsFilters(t *testing.T, s Store) {
	cases := []struct {
		name string
		q    audit.ReportsQuery
		want []string
	}{
		{"worker and status", audit.ReportsQuery{Window: full, Workers: []string{w1}, Statuses: []domain.Status{U}},
			[]string{"src-a#4", "src-a#5", "src-b#2"}},
		{"two statuses", audit.ReportsQuery{Window: full, Statuses: []domain.Status{S, U}},
			[]string{"src-c#1", "src-a#3", "src-a#4", "src-a#5", "src-b#2", "src-b#3"}},
		{"two workers", audit.ReportsQuery{Window: full, Workers: []string{w2, w1}, Statuses: []domain.Status{H}, Limit: 3},
			[]string{"src-a#1", "src-a#2", "src-c#2"}},
		{"unknown worker", audit.ReportsQuery{Window: full, Workers: []string{"10.9.9.9:1"}}, nil},
		{"half-open window", audit.ReportsQuery{Window: audit.Window{Since: at(1), Until: at(4)}},
			[]string{"src-a#2", "src-c#2", "src-a#3", "src-c#3", "src-a#4"}},
		{"window in another zone", audit.ReportsQuery{Window: audit.Window{Since: at(20).In(zone5), Until: at(30).In(zone5)}},
			[]string{"src-b#1", "src-b#2", "src-b#3"}},
	}
	for _, c := range cases {
		page := mustReports(t, s, c.q)
		equalLines(t, c.name, labels(page.Reports), c.want)
	}

	// Ranks filter: trims ranks, keeps every report.
	page := mustReports(t, s, audit.ReportsQuery{Window: full, Workers: []string{w2}, Ranks: []int64{2, 0}})
	var got []string
	for _, r := range page.Reports {
		var dps []string
		for _, k := range r.Ranks {
			dps = append(dps, fmt.Sprintf("%d:%g", k.DPRank, k.TokenUsage))
		}
		got = append(got, label(r)+" "+strings.Join(dps, ","))
	}
	equalLines(t, "ranks 0 and 2 of worker 2", got, []string{
		"src-c#1 ", "src-c#2 0:0.125,2:0.5", "src-c#3 0:0.25,2:0.25", "src-c#4 0:0.5,2:0.5", "src-c#5 0:0.75,2:0.5",
	})
	page = mustReports(t, s, audit.ReportsQuery{Window: full, Workers: []string{w1}, Ranks: []int64{2}, Limit: 4})
	for _, r := range page.Reports {
		if len(r.Ranks) != 0 {
			t.Errorf("%s has ranks %v; worker 1 has no rank 2", label(r), r.Ranks)
		}
	}
	equalLines(t, "worker 1, rank 2 (none)", labels(page.Reports), []string{"src-a#1", "src-a#2", "src-a#3", "src-a#4"})
}

func testPaging(t *testing.T, s Store) {
	for _, desc := range []bool{false, true} {
		for _, size := range []int{1, 3, 16, 17} {
			q := audit.ReportsQuery{Window: full, Limit: size, Descending: desc}
			var got []string
			for pages := 0; ; pages++ {
				if pages > len(fixtureOrder) {
					t.Fatalf("desc=%t size=%d: paging does not end", desc, size)
				}
				page := mustReports(t, s, q)
				if len(page.Reports) > size {
					t.Fatalf("desc=%t size=%d: page of %d", desc, size, len(page.Reports))
				}
				got = append(got, labels(page.Reports)...)
				if page.NextCursor == "" {
					break
				}
				if len(page.Reports) != size {
					t.Errorf("desc=%t size=%d: short page (%d) with a next cursor", desc, size, len(page.Reports))
				}
				q.Cursor = page.NextCursor
			}
			want := slices.Clone(fixtureOrder)
			if desc {
				slices.Reverse(want)
			}
			equalLines(t, fmt.Sprintf("pages desc=%t size=%d", desc, size), got, want)
		}
	}
	// Paging with filters.
	q := audit.ReportsQuery{Window: full, Workers: []string{w1}, Statuses: []domain.Status{H}, Limit: 2}
	var got []string
	for {
		page := mustReports(t, s, q)
		got = append(got, labels(page.Reports)...)
		if page.NextCursor == "" {
			break
		}
		q.Cursor = page.NextCursor
	}
	equalLines(t, "filtered pages", got, []string{"src-a#1", "src-a#2", "src-a#6", "src-a#7", "src-a#8", "src-b#1"})

	// A cursor is tied to its order.
	page := mustReports(t, s, audit.ReportsQuery{Window: full, Limit: 2})
	_, err := s.Reports(ctxFor(t), audit.ReportsQuery{Window: full, Limit: 2, Cursor: page.NextCursor, Descending: true})
	wantInvalid(t, "cursor used with the other order", err, "cursor")
}

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

func describeStat(st audit.RankStat) string {
	return fmt.Sprintf("%s/%d n=%d avg=%.6f max=%.6f p95=%.6f maxwait=%d gen=%.6f", st.WorkerAddr, st.DPRank,
		st.Reports, st.AvgTokenUsage, st.MaxTokenUsage, st.P95TokenUsage, st.MaxWaitingReqs, st.MeanGenThroughput)
}

func testRankStats(t *testing.T, s Store) {
	ctx := ctxFor(t)
	check := func(name string, q audit.RankStatsQuery, want []string) {
		t.Helper()
		res, err := s.RankStats(ctx, q)
		if err != nil {
			t.Fatalf("RankStats(%s): %v", name, err)
		}
		var got []string
		for _, st := range res.Stats {
			got = append(got, describeStat(st))
		}
		equalLines(t, name, got, want)
	}
	// Worker 1 rank 0: usages .5 .5 .375 .875 .75 .375 .125 .125 (p95 at
	// position 6.65 of the sorted values: .75 + .65·.125).
	check("every rank", audit.RankStatsQuery{Window: full}, []string{
		w1 + "/0 n=8 avg=0.453125 max=0.875000 p95=0.831250 maxwait=9 gen=52.500000",
		w1 + "/1 n=8 avg=0.375000 max=0.875000 p95=0.787500 maxwait=1 gen=77.500000",
		w2 + "/0 n=4 avg=0.406250 max=0.750000 p95=0.712500 maxwait=5 gen=25.000000",
		w2 + "/1 n=4 avg=0.375000 max=0.500000 p95=0.500000 maxwait=0 gen=10.000000",
		w2 + "/2 n=4 avg=0.437500 max=0.500000 p95=0.500000 maxwait=0 gen=10.000000",
	})
	check("worker 2, rank 1", audit.RankStatsQuery{Window: full, Workers: []string{w2}, Ranks: []int64{1}}, []string{
		w2 + "/1 n=4 avg=0.375000 max=0.500000 p95=0.500000 maxwait=0 gen=10.000000",
	})
	check("window [1s, 4s)", audit.RankStatsQuery{Window: audit.Window{Since: at(1), Until: at(4)}, Ranks: []int64{0}}, []string{
		w1 + "/0 n=2 avg=0.437500 max=0.500000 p95=0.493750 maxwait=2 gen=50.000000",
		w2 + "/0 n=2 avg=0.187500 max=0.250000 p95=0.243750 maxwait=5 gen=15.000000",
	})
	res, err := s.RankStats(ctx, audit.RankStatsQuery{Window: full, Limit: 3})
	if err != nil {
		t.Fatalf("RankStats(limit 3): %v", err)
	}
	if len(res.Stats) != 3 || !res.Truncated {
		t.Errorf("RankStats(limit 3) = %d rows, truncated=%t; want 3, true", len(res.Stats), res.Truncated)
	}
}

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

func testEmptyWindow(t *testing.T, s Store) {
	ctx := ctxFor(t)
	w := audit.Window{Since: t0.Add(-48 * time.Hour), Until: t0.Add(-47 * time.Hour)}
	page, err := s.Reports(ctx, audit.ReportsQuery{Window: w})
	if err != nil || len(page.Reports) != 0 || page.NextCursor != "" {
		t.Errorf("Reports(empty window) = %d reports, cursor %q, %v", len(page.Reports), page.NextCursor, err)
	}
	o, err := s.Outages(ctx, audit.OutagesQuery{Window: w})
	if err != nil || len(o.Outages) != 0 {
		t.Errorf("Outages(empty window) = %v, %v", o, err)
	}
	st, err := s.RankStats(ctx, audit.RankStatsQuery{Window: w})
	if err != nil || len(st.Stats) != 0 {
		t.Errorf("RankStats(empty window) = %v, %v", st, err)
	}
	g, err := s.Gaps(ctx, audit.GapsQuery{Window: w, Interval: time.Second})
	if err != nil || len(g.Gaps) != 0 || len(g.Restarts) != 0 {
		t.Errorf("Gaps(empty window) = %v, %v", g, err)
	}
	im, err := s.Imbalance(ctx, audit.ImbalanceQuery{Window: w})
	if err != nil || len(im.Spans) != 0 {
		t.Errorf("Imbalance(empty window) = %v, %v", im, err)
	}
}

func wantInvalid(t *testing.T, what string, err error, arg string) {
	t.Helper()
	if domain.ErrorCode(err) != domain.CodeInvalidArgument {
		t.Errorf("%s: error %v, want %s", what, err, domain.CodeInvalidArgument)
		return
	}
	if !strings.Contains(domain.ErrorMessage(err), arg) {
		t.Errorf("%s: message %q does not name %q", what, domain.ErrorMessage(err), arg)
	}
}

func testArgumentErrors(t *testing.T, s Store) {
	ctx := ctxFor(t)
	backwards := audit.Window{Since: t0, Until: t0.Add(-time.Second)}
	cases := []struct {
		name string
		arg  string
		call func() error
	}{
		{"no since", "since", func() error {
			_, err := s.Reports(ctx, audit.ReportsQuery{Window: audit.Window{Until: t0}})
			return err
		}},
		{"no until", "until", func() error {
			_, err := s.Outages(ctx, audit.OutagesQuery{Window: audit.Window{Since: t0}})
			return err
		}},
		{"until before since", "until", func() error {
			_, err := s.Reports(ctx, audit.ReportsQuery{Window: backwards})
			return err
		}},
		{"empty window", "until", func() error {
			_, err := s.Gaps(ctx, audit.GapsQuery{Window: audit.Window{Since: t0, Until: t0}, Interval: time.Second})
			return err
		}},
		{"negative limit", "limit", func() error {
			_, err := s.Reports(ctx, audit.ReportsQuery{Window: full, Limit: -1})
			return err
		}},
		{"huge page", "limit", func() error {
			_, err := s.Reports(ctx, audit.ReportsQuery{Window: full, Limit: audit.MaxLimit + 1})
			return err
		}},
		{"huge outage limit", "limit", func() error {
			_, err := s.Outages(ctx, audit.OutagesQuery{Window: full, Limit: 1 << 30})
			return err
		}},
		{"unknown status", "statuses", func() error {
			_, err := s.Reports(ctx, audit.ReportsQuery{Window: full, Statuses: []domain.Status{7}})
			return err
		}},
		{"unspecified status", "statuses", func() error {
			_, err := s.Reports(ctx, audit.ReportsQuery{Window: full, Statuses: []domain.Status{domain.StatusUnspecified}})
			return err
		}},
		{"negative rank", "ranks", func() error {
			_, err := s.Reports(ctx, audit.ReportsQuery{Window: full, Ranks: []int64{-1}})
			return err
		}},
		{"rank beyond int32", "ranks", func() error {
			_, err := s.RankStats(ctx, audit.RankStatsQuery{Window: full, Ranks: []int64{1 << 40}})
			return err
		}},
		{"blank worker", "workers", func() error {
			_, err := s.Imbalance(ctx, audit.ImbalanceQuery{Window: full, Workers: []string{" "}})
			return err
		}},
		{"garbage cursor", "cursor", func() error {
			_, err := s.Reports(ctx, audit.ReportsQuery{Window: full, Cursor: "not-a-cursor!"})
			return err
		}},
		{"zero interval", "interval", func() error {
			_, err := s.Gaps(ctx, audit.GapsQuery{Window: full})
			return err
		}},
		{"huge interval", "interval", func() error {
			_, err := s.Gaps(ctx, audit.GapsQuery{Window: full, Interval: 25 * time.Hour})
			return err
		}},
		{"negative threshold", "threshold", func() error {
			_, err := s.Imbalance(ctx, audit.ImbalanceQuery{Window: full, Threshold: -0.1})
			return err
		}},
		{"NaN threshold", "threshold", func() error {
			_, err := s.Imbalance(ctx, audit.ImbalanceQuery{Window: full, Threshold: math.NaN()})
			return err
		}},
		{"threshold above 1", "threshold", func() error {
			_, err := s.Imbalance(ctx, audit.ImbalanceQuery{Window: full, Threshold: 1.5})
			return err
		}},
		{"retention limit", "limit", func() error {
			_, err := s.DeleteBefore(ctx, t0, 0)
			return err
		}},
	}
	for _, c := range cases {
		wantInvalid(t, c.name, c.call(), c.arg)
	}
}

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
