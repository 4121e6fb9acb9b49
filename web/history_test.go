package web

import (
	"context"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loadreporter/loadreporter/domain"
	"github.com/loadreporter/loadreporter/domain/audit"
	"github.com/loadreporter/loadreporter/web/internal/historytest"
)

// chartingHistory is the fixture's history from a store that counts
// charts itself, as both of ours do: Chart counts the fixture's reports as
// a store would. It records the queries the page makes.
type chartingHistory struct {
	*historytest.Fake
	through time.Time // where Chart says it stopped counting

	mu      sync.Mutex
	charts  []audit.ChartQuery
	reports []audit.ReportsQuery
}

func newChartingHistory() *chartingHistory { return &chartingHistory{Fake: newHistory()} }

func (h *chartingHistory) Chart(ctx context.Context, q audit.ChartQuery) (audit.ChartResult, error) {
	if err := q.Validate(); err != nil {
		return audit.ChartResult{}, err
	}
	h.mu.Lock()
	h.charts = append(h.charts, q)
	h.mu.Unlock()
	b := audit.NewChartBuilder(q)
	for i := range fixReports {
		if r := fixtureReport(i); (len(q.Workers) == 0 || slices.Contains(q.Workers, r.Worker.Addr)) &&
			(h.through.IsZero() || r.ReportTime.Before(h.through)) {
			b.Report(r.ReportTime, r.Ranks)
		}
	}
	return b.Result(h.through), nil
}

func (h *chartingHistory) Reports(ctx context.Context, q audit.ReportsQuery) (audit.ReportsPage, error) {
	h.mu.Lock()
	h.reports = append(h.reports, q)
	h.mu.Unlock()
	return h.Fake.Reports(ctx, q)
}

// From a store that counts charts, the history page reads one chart and
// one page of reports, however many reports the window holds (it read
// every report of the window, 10 000 a query, up to 200 000: 11.8 s a page
// for 14 h of a busy worker), and draws what it drew from the reports.
func TestHistoryPageReadsABoundedAnswer(t *testing.T) {
	t.Parallel()
	hist := newChartingHistory()
	h := newHandler(t, Options{History: hist})
	target := "/history?window=15m"
	res := get(t, h, target)
	got, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d\n%s", target, res.StatusCode, got)
	}
	if len(hist.charts) != 1 || hist.charts[0].Buckets != chartBuckets ||
		!hist.charts[0].Since.Equal(fixNow.Add(-15*time.Minute)) || !slices.Equal(hist.charts[0].Workers, []string{fixAddr}) {
		t.Errorf("chart queries = %+v, want one of the window's %d buckets for %s", hist.charts, chartBuckets, fixAddr)
	}
	if len(hist.reports) != 1 || hist.reports[0].Limit != historyPageSize || !hist.reports[0].Descending {
		t.Errorf("reports queries = %+v, want one: the table's newest %d", hist.reports, historyPageSize)
	}
	// The same page as from a chart counted from the reports one by one.
	res = get(t, newHandler(t, Options{History: newHistory()}), target)
	want, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if string(got) != string(want) {
		t.Errorf("the page drawn from the store's chart differs from the one counted from reports:\n%s\n%s", got, want)
	}
}

func TestHistoryChartSaysWhereItsBudgetRanOut(t *testing.T) {
	t.Parallel()
	hist := newChartingHistory()
	hist.through = t0.Add(5 * time.Minute)
	doc := page(t, newHandler(t, Options{History: hist}), "/history?window=15m", http.StatusOK)
	if got := txt(tid(doc, "chart-token-usage")); !strings.Contains(got, "Only the reports before 2026-11-29 08:05:00 UTC are charted") {
		t.Errorf("usage chart = %q, want the note saying where counting stopped", got)
	}
}

// A window from the first day (0001-01-01) is about 2 000 years, past what
// a time.Duration holds: positions are still fractions of it.
func TestChartPositionsAcrossMillennia(t *testing.T) {
	t.Parallel()
	w := audit.Window{Since: time.Date(1, 1, 1, 0, 0, 0, 1000, time.UTC), Until: time.Date(4001, 1, 1, 0, 0, 0, 0, time.UTC)}
	s, _ := seriesOf(w, time.Second)
	for _, tc := range []struct {
		t    time.Time
		want float64
	}{
		{w.Since, padLeft},
		{time.Date(1001, 1, 1, 0, 0, 0, 0, time.UTC), padLeft + plotW/4},
		{time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC), padLeft + plotW/2},
		{w.Until, plotRight},
	} {
		if got := s.x(tc.t); got < tc.want-1 || got > tc.want+1 {
			t.Errorf("x(%s) = %.1f, want %.1f", tc.t, got, tc.want)
		}
	}
	s, _ = seriesOf(w, time.Second, &domain.Report{ReportTime: time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC), Ranks: []domain.RankLoad{{DPRank: 0, TokenUsage: 0.5}}})
	if d := s.usageChart().Series[0].D; !strings.HasPrefix(d, "M"+num(s.bucketX(120))+" ") || s.bucketX(120) < padLeft+plotW/2 || s.bucketX(120) > padLeft+plotW/2+plotW/240 {
		t.Errorf("a report half way lands at %q, want in the middle bucket", d)
	}
}
