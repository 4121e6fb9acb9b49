package postgres_test

import (
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/loadreporter/loadreporter/domain"
	"github.com/loadreporter/loadreporter/domain/audit"
)

// chartOf counts a chart of q from reports (in time order) one by one, as
// the in-memory store does: the reference the rollups must match.
func chartOf(q audit.ChartQuery, reports []*domain.Report) audit.ChartResult {
	var mine []*domain.Report
	for _, r := range reports {
		if (len(q.Workers) == 0 || slices.Contains(q.Workers, r.Worker.Addr)) &&
			!r.ReportTime.Before(q.Since.Truncate(time.Minute)) && r.ReportTime.Before(q.Until) {
			mine = append(mine, r)
		}
	}
	through := audit.ChartThrough(q, mine)
	b := audit.NewChartBuilder(q)
	for _, r := range mine {
		if through.IsZero() || r.ReportTime.Before(through) {
			b.Report(r.ReportTime, r.Ranks)
		}
	}
	return b.Result(through)
}

// The PostgreSQL store counts a chart from its minute rollups and the
// reports of the minutes the window cuts; it answers as counting every
// report does, also where the budget cuts the chart short. (The contract
// suite, ports/porttest, does not know charts yet: ports.HistoryQuery has
// no Chart.)
func TestChartAnswersAsCountingEveryReport(t *testing.T) {
	t.Parallel()
	pg, _ := newStore(t)
	t0 := time.Date(2026, 11, 30, 6, 0, 0, 0, time.UTC)
	var reports []*domain.Report
	add := func(worker string, every time.Duration, span time.Duration, ranks int) {
		for i := 0; time.Duration(i)*every < span; i++ {
			at := t0.Add(time.Duration(i) * every)
			r := &domain.Report{Worker: domain.Worker{Addr: worker}, SourceInstanceID: worker, SequenceID: uint64(i + 1),
				ReportTime: at, Status: domain.StatusHealthy}
			if m := at.Sub(t0) / time.Minute; m%45 >= 40 { // five minutes of UNREACHABLE reports every 45
				r.Status, r.LastError = domain.StatusUnreachable, "load snapshot pull timed out"
			} else {
				for dp := range ranks {
					r.Ranks = append(r.Ranks, domain.RankLoad{DPRank: int64(dp),
						TokenUsage: 0.5 + 0.45*math.Sin(float64(i)/37+float64(dp)), NumWaitingReqs: int64((i*7 + dp) % 11)})
				}
			}
			reports = append(reports, r)
		}
	}
	add("10.0.0.7:30000", 10*time.Second, 6*time.Hour, 2)
	add("10.0.0.8:30000", 7*time.Second+333*time.Microsecond, 3*time.Hour, 3)
	add("10.0.0.9:30000", 61*time.Second, 6*time.Hour, 8)
	// Appended in batches, out of order, as the recorder's retries may.
	for i := 0; i < len(reports); i += 500 {
		batch := reports[i:min(i+500, len(reports))]
		if i/500%2 == 1 {
			batch = slices.Clone(batch)
			slices.Reverse(batch)
		}
		if err := pg.Append(t.Context(), batch); err != nil {
			t.Fatal(err)
		}
	}
	slices.SortFunc(reports, func(a, b *domain.Report) int { return audit.KeyOf(a).Compare(audit.KeyOf(b)) })

	at := func(d time.Duration) time.Time { return t0.Add(d) }
	window := func(since, until time.Duration) audit.Window { return audit.Window{Since: at(since), Until: at(until)} }
	for _, q := range []audit.ChartQuery{
		{Window: window(17500*time.Millisecond, time.Hour), Buckets: 240},
		{Window: window(17500*time.Millisecond, time.Hour), Buckets: 240, Workers: []string{"10.0.0.8:30000"}},
		{Window: window(12345678901, 5*time.Hour+30*time.Minute), Buckets: 240},
		{Window: window(-time.Hour-1, 7*time.Hour+500), Buckets: 240},
		{Window: window(90*time.Second, 5*time.Hour+90*time.Second), Buckets: 7},
		{Window: window(0, 6*time.Hour), Buckets: 240, Workers: []string{"10.0.0.7:30000", "10.0.0.9:30000"}},
		{Window: window(500, time.Hour+1500), Buckets: 240},
		{Window: audit.Window{Since: time.Date(1, 1, 1, 0, 0, 0, 1000, time.UTC), Until: time.Date(9999, 12, 31, 23, 59, 59, 999_999_999, time.UTC)}, Buckets: 240},
		{Window: window(17500*time.Millisecond, time.Hour), Buckets: 240, Budget: 500},
		{Window: window(12345678901, 5*time.Hour+30*time.Minute), Buckets: 240, Budget: 50},
		{Window: window(12345678901, 5*time.Hour+30*time.Minute), Buckets: 240, Budget: 1},
	} {
		name := fmt.Sprintf("[%s, %s) in %d, workers %v, budget %d", q.Since.Format(time.RFC3339Nano), q.Until.Format(time.RFC3339Nano), q.Buckets, q.Workers, q.Budget)
		want := chartOf(q, reports)
		got, err := pg.Chart(t.Context(), q)
		if err != nil {
			t.Fatalf("%s: postgres: %v", name, err)
		}
		if q.Budget > 0 && want.Through.IsZero() {
			t.Errorf("%s: the budget did not cut the chart; the case tests nothing", name)
		}
		if !got.Through.Equal(want.Through) || len(got.Buckets) != len(want.Buckets) {
			t.Errorf("%s: through %s, %d buckets; want %s, %d", name, got.Through, len(got.Buckets), want.Through, len(want.Buckets))
			continue
		}
		var counted int64
		for i, w := range want.Buckets {
			g := got.Buckets[i]
			counted += w.Reports
			same := g.Reports == w.Reports && len(g.Ranks) == len(w.Ranks)
			for j := 0; same && j < len(w.Ranks); j++ {
				a, b := g.Ranks[j], w.Ranks[j]
				// The sums add the same values in another order.
				same = a.DPRank == b.DPRank && a.Reports == b.Reports && a.MaxWaitingReqs == b.MaxWaitingReqs &&
					math.Abs(a.UsageSum-b.UsageSum) <= 1e-9*math.Max(1, math.Abs(b.UsageSum))
			}
			if !same {
				t.Errorf("%s: bucket %d = %+v, want %+v", name, i, g, w)
			}
		}
		if counted == 0 && q.Budget != 1 {
			t.Errorf("%s: no report counted; the case tests nothing", name)
		}
	}
}
