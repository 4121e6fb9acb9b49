package porttest

import (
	"fmt"
	"testing"
	"time"

	"github.com/loadreporter/loadreporter/domain"
	"github.com/loadreporter/loadreporter/domain/audit"
)

// testChart: a chart says what the window's reports say, bucket by
// bucket, whether the store counts the reports themselves (buckets under a
// minute) or its own summaries of whole minutes.
func testChart(t *testing.T, s Store) {
	for _, q := range []audit.ChartQuery{
		{Window: audit.Window{Since: at(-30), Until: at(600)}, Buckets: 63},
		{Window: audit.Window{Since: at(0.5), Until: at(6.5)}, Buckets: 4},
		{Window: audit.Window{Since: at(-30), Until: at(600)}, Workers: []string{w2}, Buckets: 7},
		{Window: audit.Window{Since: t0.Add(-3 * time.Hour), Until: t0.Add(5 * time.Hour)}, Buckets: 8},
		{Window: audit.Window{Since: t0.Add(-90 * time.Minute), Until: t0.Add(90*time.Minute + 3*time.Second)}, Workers: []string{w1}, Buckets: 3},
		// The budget counts whole minutes, the last one too although the
		// window ends inside it: 13 reports lie before Until, 16 in its
		// minute, so every store stops at that minute's start.
		{Window: audit.Window{Since: at(-30), Until: at(10.5)}, Buckets: 20, Budget: 13},
	} {
		got, err := s.Chart(ctxFor(t), q)
		if err != nil {
			t.Fatalf("Chart(%+v): %v", q, err)
		}
		equalLines(t, fmt.Sprintf("Chart(%s … %s, workers %v, %d buckets)", ts(q.Since), ts(q.Until), q.Workers, q.Buckets),
			describeChart(got), describeChart(countChart(t, s, q)))
	}
}

// countChart counts q's chart from the reports one by one, stopping where
// the budget, counted over the whole minutes that hold the window, ends.
func countChart(t *testing.T, s Store, q audit.ChartQuery) audit.ChartResult {
	var reports []*domain.Report
	for cursor := ""; ; {
		page := mustReports(t, s, audit.ReportsQuery{Window: q.Minutes(), Workers: q.Workers, Limit: audit.MaxLimit, Cursor: cursor})
		reports = append(reports, page.Reports...)
		if cursor = page.NextCursor; cursor == "" {
			break
		}
	}
	through := audit.ChartThrough(q, reports)
	b := audit.NewChartBuilder(q)
	for _, r := range reports {
		if through.IsZero() || r.ReportTime.Before(through) {
			b.Report(r.ReportTime, r.Ranks)
		}
	}
	return b.Result(through)
}

func describeChart(c audit.ChartResult) []string {
	out := []string{"through " + ts(c.Through)}
	for i, b := range c.Buckets {
		line := fmt.Sprintf("bucket %d: %d reports", i, b.Reports)
		for _, r := range b.Ranks {
			line += fmt.Sprintf("; rank %d: %d, usage sum %.6f, max waiting %d", r.DPRank, r.Reports, r.UsageSum, r.MaxWaitingReqs)
		}
		out = append(out, line)
	}
	return out
}
