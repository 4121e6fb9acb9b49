package porttest

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/loadreporter/loadreporter/domain"
	"github.com/loadreporter/loadreporter/domain/audit"
)

// A longer history than the fixture's, over several minutes, for stores
// that summarise time (by minute, by hour): outages, gaps and imbalance
// that last whole minutes, two source instances taking turns within a
// minute, reports at the same instant, ranks that come and go. It is
// appended out of order in batches of assorted sizes, and every query,
// over windows that cut minutes anywhere, must answer what a brute-force
// reference computes from the reports.

var (
	longStart = time.Date(2026, 3, 4, 7, 58, 13, 500_000_000, time.UTC)
	w3        = "10.0.0.3:30000"
)

// longHistory generates the reports of three workers over about nine
// minutes.
func longHistory() []*domain.Report {
	rng := rand.New(rand.NewPCG(14, 2026))
	var rs []*domain.Report
	add := func(worker, source string, seq uint64, t time.Time, st domain.Status, lastErr string, usages ...float64) {
		r := report(worker, source, seq, 0, st, lastErr)
		r.ReportTime = t
		for dp, u := range usages {
			r.Ranks = append(r.Ranks, domain.RankLoad{
				DPRank: int64(dp), SnapshotTime: t, NumWaitingReqs: int64(rng.IntN(20)), TokenUsage: u,
				GenThroughput: float64(rng.IntN(1000)), NumTotalTokens: 1024,
			})
		}
		rs = append(rs, r)
	}
	// Worker 1, every second: healthy, a 150 s outage (UNREACHABLE, its
	// error changing, a STALE stretch), healthy, a 130 s gap, a restart,
	// 90 s of imbalance.
	for i := range 540 {
		t := longStart.Add(time.Duration(i) * time.Second)
		switch {
		case i >= 60 && i < 210:
			if i >= 150 && i < 170 {
				add(w1, "src-1a", uint64(i), t, S, "stale", .5, .5)
			} else {
				add(w1, "src-1a", uint64(i), t, U, fmt.Sprintf("down %d", i/50))
			}
		case i >= 300 && i < 430:
		case i >= 430 && i < 520:
			add(w1, "src-1b", uint64(i), t, H, "", .125, .875)
		case i >= 430:
			add(w1, "src-1b", uint64(i), t, H, "", .5, .5+float64(i%3)/8)
		default:
			add(w1, "src-1a", uint64(i), t, H, "", rng.Float64(), rng.Float64())
		}
	}
	// Worker 2, every half second, random statuses and usages; now and
	// then two reports at the same instant, or a pause of a few seconds.
	t := longStart.Add(-20 * time.Second)
	for i := range 1000 {
		st, lastErr := H, ""
		if p := rng.IntN(100); p < 8 {
			st, lastErr = U, []string{"", "timeout", "refused"}[rng.IntN(3)]
		} else if p < 12 {
			st = S
		}
		var usages []float64
		if st != U {
			usages = []float64{rng.Float64(), rng.Float64(), float64(rng.IntN(9)) / 8}
		}
		add(w2, "src-2", uint64(i+1), t, st, lastErr, usages...)
		switch p := rng.IntN(100); {
		case p < 3:
		case p < 6:
			t = t.Add(time.Duration(2+rng.IntN(5)) * time.Second)
		default:
			t = t.Add(500 * time.Millisecond)
		}
	}
	// Worker 3: two source instances taking turns, ranks coming and going.
	for i := range 400 {
		t := longStart.Add(time.Duration(i)*1300*time.Millisecond + time.Duration(rng.IntN(1000))*time.Microsecond)
		src := []string{"src-3a", "src-3b"}[i/7%2]
		usages := []float64{rng.Float64()}
		if i%5 != 0 {
			usages = append(usages, rng.Float64())
		}
		add(w3, src, uint64(i+1), t, H, "", usages...)
	}
	return rs
}

func testAgainstReference(t *testing.T, s Store) {
	ctx := ctxFor(t)
	rs := longHistory()
	rng := rand.New(rand.NewPCG(3, 4))
	shuffled := slices.Clone(rs)
	rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	for len(shuffled) > 0 {
		n := min(len(shuffled), 1+rng.IntN(300))
		if err := s.Append(ctx, shuffled[:n]); err != nil {
			t.Fatalf("Append: %v", err)
		}
		shuffled = shuffled[n:]
	}
	if err := s.Append(ctx, rs[100:900]); err != nil { // a retried batch
		t.Fatalf("Append(again): %v", err)
	}
	ref := newReference(rs)
	at := func(sec float64) time.Time { return longStart.Add(time.Duration(sec * float64(time.Second))) }
	windows := []audit.Window{
		{Since: at(-3600), Until: at(3600)},
		{Since: at(-13.5 + 60), Until: at(-13.5 + 360)},    // whole minutes
		{Since: at(37.3), Until: at(312.7)},                // cutting minutes
		{Since: at(100.25), Until: at(100.75)},             // within a minute
		{Since: at(61), Until: at(509.000001).In(zone5)},   // inside an outage, in another zone
		{Since: at(200), Until: at(209.999999)},            // the end of an outage
		{Since: at(-13.5 + 120), Until: at(-13.5 + 180.5)}, // a minute and a bit
	}
	for _, w := range windows {
		for _, workers := range [][]string{nil, {w1}, {w2, w3}} {
			name := fmt.Sprintf("[%s, %s) workers %v", ts(w.Since.UTC()), ts(w.Until.UTC()), workers)
			compareAll(t, s, ref, name, w, workers)
		}
	}
}

func compareAll(t *testing.T, s Store, ref reference, name string, w audit.Window, workers []string) {
	t.Helper()
	ctx := ctxFor(t)
	o, err := s.Outages(ctx, audit.OutagesQuery{Window: w, Workers: workers, Limit: audit.MaxLimit})
	if err != nil {
		t.Fatalf("Outages %s: %v", name, err)
	}
	equalLines(t, "outages "+name, describeAll(o.Outages, describeOutage), describeAll(ref.outages(w, workers), describeOutage))
	for _, ranks := range [][]int64{nil, {1}} {
		st, err := s.RankStats(ctx, audit.RankStatsQuery{Window: w, Workers: workers, Ranks: ranks, Limit: audit.MaxLimit})
		if err != nil {
			t.Fatalf("RankStats %s: %v", name, err)
		}
		equalLines(t, fmt.Sprintf("rank stats %s ranks %v", name, ranks), describeAll(st.Stats, describeStat),
			describeAll(ref.rankStats(w, workers, ranks), describeStat))
	}
	for _, iv := range []time.Duration{400 * time.Millisecond, time.Second, 5 * time.Second, 40 * time.Second} {
		g, err := s.Gaps(ctx, audit.GapsQuery{Window: w, Workers: workers, Interval: iv, Limit: audit.MaxLimit})
		if err != nil {
			t.Fatalf("Gaps %s: %v", name, err)
		}
		want := ref.gaps(w, workers, iv)
		equalLines(t, fmt.Sprintf("gaps %s interval %s", name, iv), describeAll(g.Gaps, describeGap), describeAll(want.Gaps, describeGap))
		equalLines(t, fmt.Sprintf("restarts %s interval %s", name, iv), describeAll(g.Restarts, describeRestart),
			describeAll(want.Restarts, describeRestart))
	}
	for _, th := range []float64{0, .3, .5, .75, .9} {
		im, err := s.Imbalance(ctx, audit.ImbalanceQuery{Window: w, Workers: workers, Threshold: th, Limit: audit.MaxLimit})
		if err != nil {
			t.Fatalf("Imbalance %s: %v", name, err)
		}
		equalLines(t, fmt.Sprintf("imbalance %s threshold %g", name, th), describeAll(im.Spans, describeImbalance),
			describeAll(ref.imbalance(w, workers, th), describeImbalance))
	}
}

func describeAll[T any](vs []T, f func(T) string) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = f(v)
	}
	return out
}

func describeGap(g audit.Gap) string {
	return fmt.Sprintf("%s %s..%s (%s)", g.WorkerAddr, ts(g.Start), ts(g.End), g.Duration)
}

func describeRestart(r audit.Restart) string {
	return fmt.Sprintf("%s %s at %s after %s at %s", r.WorkerAddr, r.SourceInstanceID, ts(r.FirstTime),
		r.PreviousSourceInstanceID, ts(r.PreviousLastTime))
}

func describeImbalance(sp audit.Imbalance) string {
	return fmt.Sprintf("%s start=%s end=%s ongoing=%t last=%s dur=%s peak=%g@%s n=%d", sp.WorkerAddr, ts(sp.Start),
		ts(sp.End), sp.Ongoing, ts(sp.LastSeen), sp.Duration, sp.PeakSpread, ts(sp.PeakTime), sp.Reports)
}

// reference answers the audit queries by brute force over every report.
type reference struct{ reports []*domain.Report }

func newReference(rs []*domain.Report) reference {
	out := make([]*domain.Report, len(rs))
	for i, r := range rs {
		c := utcCopy(r)
		c.ReportTime = c.ReportTime.Truncate(time.Microsecond)
		out[i] = c
	}
	slices.SortFunc(out, func(a, b *domain.Report) int { return audit.KeyOf(a).Compare(audit.KeyOf(b)) })
	return reference{out}
}

func (ref reference) window(w audit.Window, workers []string) []*domain.Report {
	var out []*domain.Report
	for _, r := range ref.reports {
		if w.Contains(r.ReportTime) && (len(workers) == 0 || slices.Contains(workers, r.Worker.Addr)) {
			out = append(out, r)
		}
	}
	return out
}

func byStart[T any](vs []T, span func(T) (time.Time, string)) {
	slices.SortStableFunc(vs, func(a, b T) int {
		ta, wa := span(a)
		tb, wb := span(b)
		return cmp.Or(ta.Compare(tb), cmp.Compare(wa, wb))
	})
}

func (ref reference) outages(w audit.Window, workers []string) []audit.Outage {
	var out []audit.Outage
	for _, rn := range audit.Runs(ref.window(w, workers), audit.Unhealthy) {
		o := audit.Outage{Episode: rn.Episode()}
		for _, r := range rn.Reports {
			if !slices.Contains(o.Statuses, r.Status) {
				o.Statuses = append(o.Statuses, r.Status)
			}
			if r.LastError != "" {
				o.LastError = r.LastError
			}
		}
		slices.Sort(o.Statuses)
		out = append(out, o)
	}
	byStart(out, func(o audit.Outage) (time.Time, string) { return o.Start, o.WorkerAddr })
	return out
}

func (ref reference) imbalance(w audit.Window, workers []string, threshold float64) []audit.Imbalance {
	var out []audit.Imbalance
	hot := func(r *domain.Report) bool { return audit.Spread(r) > threshold }
	for _, rn := range audit.Runs(ref.window(w, workers), hot) {
		sp := audit.Imbalance{Episode: rn.Episode(), PeakSpread: math.Inf(-1)}
		for _, r := range rn.Reports {
			if v := audit.Spread(r); v > sp.PeakSpread {
				sp.PeakSpread, sp.PeakTime = v, r.ReportTime
			}
		}
		out = append(out, sp)
	}
	byStart(out, func(s audit.Imbalance) (time.Time, string) { return s.Start, s.WorkerAddr })
	return out
}

func (ref reference) gaps(w audit.Window, workers []string, interval time.Duration) audit.GapsResult {
	var res audit.GapsResult
	prev := map[string]*domain.Report{}
	for _, r := range ref.window(w, workers) {
		if p := prev[r.Worker.Addr]; p != nil {
			if d := r.ReportTime.Sub(p.ReportTime); d > 2*interval {
				res.Gaps = append(res.Gaps, audit.Gap{Span: audit.Span{WorkerAddr: r.Worker.Addr, Start: p.ReportTime, End: r.ReportTime, Duration: d}})
			}
			if p.SourceInstanceID != r.SourceInstanceID {
				res.Restarts = append(res.Restarts, audit.Restart{WorkerAddr: r.Worker.Addr, SourceInstanceID: r.SourceInstanceID,
					FirstTime: r.ReportTime, PreviousSourceInstanceID: p.SourceInstanceID, PreviousLastTime: p.ReportTime})
			}
		}
		prev[r.Worker.Addr] = r
	}
	byStart(res.Gaps, func(g audit.Gap) (time.Time, string) { return g.Start, g.WorkerAddr })
	byStart(res.Restarts, func(r audit.Restart) (time.Time, string) { return r.FirstTime, r.WorkerAddr })
	return res
}

func (ref reference) rankStats(w audit.Window, workers []string, ranks []int64) []audit.RankStat {
	type key struct {
		worker string
		dp     int64
	}
	values := map[key][]domain.RankLoad{}
	for _, r := range ref.window(w, workers) {
		for _, k := range r.Ranks {
			if len(ranks) == 0 || slices.Contains(ranks, k.DPRank) {
				values[key{r.Worker.Addr, k.DPRank}] = append(values[key{r.Worker.Addr, k.DPRank}], k)
			}
		}
	}
	var out []audit.RankStat
	for k, ks := range values {
		st := audit.RankStat{WorkerAddr: k.worker, DPRank: k.dp, Reports: int64(len(ks)), MaxTokenUsage: math.Inf(-1), MaxWaitingReqs: math.MinInt64}
		var usage []float64
		var sum, gen float64
		for _, rk := range ks {
			usage = append(usage, rk.TokenUsage)
			sum += rk.TokenUsage
			gen += rk.GenThroughput
			st.MaxTokenUsage = max(st.MaxTokenUsage, rk.TokenUsage)
			st.MaxWaitingReqs = max(st.MaxWaitingReqs, rk.NumWaitingReqs)
		}
		st.AvgTokenUsage, st.MeanGenThroughput = sum/float64(len(ks)), gen/float64(len(ks))
		st.P95TokenUsage = audit.Percentile(usage, .95)
		out = append(out, st)
	}
	slices.SortFunc(out, func(a, b audit.RankStat) int {
		return cmp.Or(cmp.Compare(a.WorkerAddr, b.WorkerAddr), cmp.Compare(a.DPRank, b.DPRank))
	})
	return out
}
