package web

import (
	"strings"
	"testing"
	"time"

	"github.com/loadreporter/loadreporter/domain"
	"github.com/loadreporter/loadreporter/domain/audit"
)

func at(sec int, usage float64, waiting int64, ranks ...int64) *domain.Report {
	r := &domain.Report{ReportTime: t0.Add(time.Duration(sec) * time.Second), Status: domain.StatusHealthy}
	for _, k := range ranks {
		r.Ranks = append(r.Ranks, domain.RankLoad{DPRank: k, TokenUsage: usage, NumWaitingReqs: waiting})
	}
	return r
}

// seriesOf is the series of w with reports counted as a store counts them.
func seriesOf(w audit.Window, historyInterval time.Duration, reports ...*domain.Report) (*series, int) {
	b := audit.NewChartBuilder(chartQuery(w, nil))
	in := 0
	for _, r := range reports {
		if b.Report(r.ReportTime, r.Ranks) {
			in++
		}
	}
	return newSeries(w, historyInterval, b.Result(time.Time{})), in
}

func TestSeriesPaths(t *testing.T) {
	t.Parallel()
	// 240 s window: one bucket a second. Rank 0 is recorded for 10 s,
	// then after a 60 s gap for one lone second; rank 5 only at the start.
	win := audit.Window{Since: t0, Until: t0.Add(240 * time.Second)}
	var reports []*domain.Report
	for sec := range 10 {
		reports = append(reports, at(sec, 0.5, 4, 0, 5))
	}
	reports = append(reports, at(70, 1, 8, 0),
		at(-1, 1, 1, 0),  // before the window: ignored
		at(240, 1, 1, 0)) // at Until: ignored
	s, in := seriesOf(win, time.Second, reports...)
	if in != 11 {
		t.Errorf("reports = %d, want 11", in)
	}

	c := s.usageChart()
	if len(c.Series) != 2 || c.Series[0].Rank != "0" || c.Series[1].Rank != "5" {
		t.Fatalf("series = %+v", c.Series)
	}
	d := c.Series[0].D
	if strings.Count(d, "M") != 2 || strings.Count(d, "L") != 9 || !strings.HasSuffix(d, " h0") {
		t.Errorf("rank 0 path = %q: want a 10-point line and a lone dot", d)
	}
	// Usage 0.5 sits half way up the plot; 1 at the top.
	mid := num(plotBottom - 0.5*plotH)
	if !strings.HasPrefix(d, "M"+num(s.bucketX(0))+" "+mid+" L") {
		t.Errorf("rank 0 starts %q, want at y %s", d[:20], mid)
	}
	if !strings.Contains(d, " "+num(padTop)+" h0") {
		t.Errorf("lone point not at the top: %q", d)
	}
	if c.Series[0].Color == c.Series[1].Color {
		t.Error("two ranks share a colour")
	}
	if c.Empty {
		t.Error("chart marked empty")
	}

	w := s.waitingChart()
	if top := w.YTicks[len(w.YTicks)-1].Label; top != "8" {
		t.Errorf("waiting axis top = %q, want 8", top)
	}

	s.outages = []audit.Outage{{Episode: audit.Episode{Span: audit.Span{Start: t0.Add(30 * time.Second), End: t0.Add(30 * time.Second)}}, Statuses: []domain.Status{domain.StatusStale}}}
	tl := s.timeline()
	if len(tl.Recorded) != 2 {
		t.Errorf("recorded spans = %d, want 2", len(tl.Recorded))
	}
	if len(tl.Outages) != 1 || tl.Outages[0].Class != "stale" || tl.Outages[0].W != "2.0" {
		t.Errorf("outage span = %+v: want a minimum-width stale band", tl.Outages)
	}
}

func TestEmptySeries(t *testing.T) {
	t.Parallel()
	s, _ := seriesOf(audit.Window{Since: t0, Until: t0.Add(time.Hour)}, time.Second)
	c := s.usageChart()
	if !c.Empty || len(c.Series) != 0 {
		t.Errorf("empty chart = %+v", c)
	}
	if got := len(c.XTicks); got < 4 || got > maxChartTicks+1 {
		t.Errorf("x ticks = %d", got)
	}
	if c.XTicks[0].Label != "08:00" {
		t.Errorf("first tick = %q", c.XTicks[0].Label)
	}
}

func TestNiceScale(t *testing.T) {
	t.Parallel()
	for peak, want := range map[int64][2]int64{
		0: {1, 4}, 3: {1, 4}, 5: {2, 6}, 8: {2, 8}, 19: {5, 20}, 100: {25, 100}, 101: {50, 150}, 12345: {5000, 15000},
	} {
		step, top := niceScale(peak)
		if step != want[0] || top != want[1] {
			t.Errorf("niceScale(%d) = %d, %d; want %d, %d", peak, step, top, want[0], want[1])
		}
		if top < peak || top/step > 5 {
			t.Errorf("niceScale(%d): top %d step %d", peak, top, step)
		}
	}
}

func TestRankColorsAreStable(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for r := range int64(len(palette)) {
		seen[rankColor(r)] = true
	}
	if len(seen) != len(palette) {
		t.Errorf("%d distinct colours for %d ranks", len(seen), len(palette))
	}
	if rankColor(3) != rankColor(3+int64(len(palette))) || rankColor(-1) == "" {
		t.Error("colours are not a function of the rank")
	}
}
