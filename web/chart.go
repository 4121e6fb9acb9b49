package web

import (
	"cmp"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/loadreporter/loadreporter/domain/audit"
	"github.com/loadreporter/loadreporter/web/humanize"

	"github.com/loadreporter/loadreporter/domain"
	"github.com/loadreporter/loadreporter/web/views"
)

// Chart geometry, in viewBox units. The charts and the timeline share the
// horizontal scale so that an outage lines up with the lines above it.
const (
	chartWidth    = 960
	chartHeight   = 240
	padLeft       = 56
	padRight      = 40 // room for half an hh:mm:ss label at the last tick
	padTop        = 12
	padBottom     = 28
	timelineH     = 44
	chartBuckets  = 240
	plotW         = chartWidth - padLeft - padRight
	plotH         = chartHeight - padTop - padBottom
	plotBottom    = chartHeight - padBottom
	plotRight     = chartWidth - padRight
	maxChartTicks = 8
)

// palette gives each rank its colour (by dp_rank, so a rank keeps its
// colour across windows); chosen to stay apart for common colour vision
// deficiencies (Okabe–Ito, then Tableau).
var palette = []string{
	"#0072b2", "#e69f00", "#009e73", "#cc79a7", "#56b4e9", "#d55e00", "#f0e442", "#000000",
	"#4e79a7", "#f28e2b", "#59a14f", "#b07aa1", "#76b7b2", "#edc948", "#9c755f", "#bab0ac",
}

func rankColor(rank int64) string {
	return palette[int(((rank%int64(len(palette)))+int64(len(palette)))%int64(len(palette)))]
}

// geom is a chart's viewBox and the plot area inside it.
type geom struct {
	width, height            int
	left, right, top, bottom float64
	maxTicks                 int // labelled time ticks at most
}

func (g geom) plotW() float64 { return g.right - g.left }
func (g geom) plotH() float64 { return g.bottom - g.top }

// wide is the history page's full-width charts and timeline; panel one
// chart of a small multiple (one rank's waiting).
var (
	wide  = geom{width: chartWidth, height: chartHeight, left: padLeft, right: plotRight, top: padTop, bottom: plotBottom, maxTicks: maxChartTicks}
	panel = geom{width: 320, height: 120, left: 36, right: 292, top: 8, bottom: 98, maxTicks: 3}
)

// series is the charts' view of a window: its buckets (audit.ChartQuery),
// as the history store counted them, and the outages drawn behind them.
type series struct {
	g       geom
	w       audit.Window
	bounds  []time.Time   // of the buckets: audit.ChartQuery.Bounds
	silence time.Duration // the longest silence a line spans: 2 × the history interval
	counted audit.ChartResult
	// outages are shaded behind the charts; an ongoing one ends a history
	// interval after its last report (ongoingTail).
	outages     []audit.Outage
	ongoingTail time.Duration
}

// chartQuery is the chart of w the page asks the store for.
func chartQuery(w audit.Window, workers []string) audit.ChartQuery {
	return audit.ChartQuery{Window: w, Workers: workers, Buckets: chartBuckets}
}

func newSeries(w audit.Window, historyInterval time.Duration, counted audit.ChartResult) *series {
	return &series{g: wide, w: w, bounds: chartQuery(w, nil).Bounds(), silence: 2 * historyInterval, counted: counted, ongoingTail: historyInterval}
}

// in is s drawn in geometry g.
func (s *series) in(g geom) *series {
	c := *s
	c.g = g
	return &c
}

func (s *series) chart() audit.ChartResult { return s.counted }

// rankIn returns the summary of rank in bucket b, or nil.
func rankIn(b *audit.ChartBucket, rank int64) *audit.ChartRank {
	i, ok := slices.BinarySearchFunc(b.Ranks, rank, func(r audit.ChartRank, dp int64) int { return cmp.Compare(r.DPRank, dp) })
	if !ok {
		return nil
	}
	return &b.Ranks[i]
}

// joined says points in buckets i < j belong to one line: nothing
// recorded between them for longer than the silence a line spans.
func (s *series) joined(i, j int) bool {
	return s.bounds[j].Sub(s.bounds[i+1]) <= s.silence
}

// x is the horizontal position of t.
func (s *series) x(t time.Time) float64 {
	f := nanosBetween(s.w.Since, t) / nanosBetween(s.w.Since, s.w.Until)
	return s.g.left + math.Max(0, math.Min(1, f))*s.g.plotW()
}

// nanosBetween is t − from in nanoseconds, also beyond the 292 years a
// time.Duration holds (a window may span years 0001 to 9999).
func nanosBetween(from, t time.Time) float64 {
	if d := t.Sub(from); d > math.MinInt64 && d < math.MaxInt64 {
		return float64(d)
	}
	return float64(t.Unix()-from.Unix())*1e9 + float64(t.Nanosecond()-from.Nanosecond())
}

// bucketX is the horizontal position of the middle of bucket i.
func (s *series) bucketX(i int) float64 {
	return s.x(s.bounds[i].Add(s.bounds[i+1].Sub(s.bounds[i]) / 2))
}

func num(f float64) string { return strconv.FormatFloat(f, 'f', 1, 64) }

// path is the SVG path of one rank: a subpath per run of joined points; a
// lone point is a zero-length segment that round caps draw as a dot.
func (s *series) path(rank int64, value func(*audit.ChartRank) (float64, bool), y func(float64) float64) string {
	buckets := s.chart().Buckets
	return s.pathOf(func(i int) (float64, bool) {
		a := rankIn(&buckets[i], rank)
		if a == nil {
			return 0, false
		}
		return value(a)
	}, y)
}

// pathOf is the SVG path of value over the buckets (false: nothing to
// draw in bucket i), broken where recording stopped.
func (s *series) pathOf(value func(i int) (float64, bool), y func(float64) float64) string {
	var b strings.Builder
	prev, runLen := -1, 0
	for i := range s.chart().Buckets {
		v, ok := value(i)
		if !ok {
			continue
		}
		if prev >= 0 && s.joined(prev, i) {
			b.WriteString(" L")
			runLen++
		} else {
			if runLen == 1 {
				b.WriteString(" h0")
			}
			if b.Len() > 0 {
				b.WriteByte(' ')
			}
			b.WriteByte('M')
			runLen = 1
		}
		b.WriteString(num(s.bucketX(i)) + " " + num(y(v)))
		prev = i
	}
	if runLen == 1 {
		b.WriteString(" h0")
	}
	return b.String()
}

func (s *series) sortedRanks() []int64 {
	var out []int64
	for _, b := range s.chart().Buckets {
		for _, r := range b.Ranks {
			if i, found := slices.BinarySearch(out, r.DPRank); !found {
				out = slices.Insert(out, i, r.DPRank)
			}
		}
	}
	return out
}

func (s *series) frame(id, title string) views.Chart {
	return views.Chart{
		ID: id, Title: title,
		Width: s.g.width, Height: s.g.height,
		Left: num(s.g.left), Right: num(s.g.right), Top: num(s.g.top), Bottom: num(s.g.bottom),
		PlotWidth: num(s.g.plotW()), PlotHeight: num(s.g.plotH()),
		XTicks: s.xTicks(),
		Empty:  len(s.sortedRanks()) == 0,
		Bands:  s.outageSpans(),
	}
}

// y is the vertical position of v on a scale from 0 to top.
func (s *series) y(top float64) func(float64) float64 {
	return func(v float64) float64 { return s.g.bottom - math.Max(0, math.Min(1, v/top))*s.g.plotH() }
}

// usageChart draws the mean token_usage of each rank per bucket.
func (s *series) usageChart() views.Chart {
	c := s.frame("chart-token-usage", "KV cache usage (token_usage) per rank")
	y := s.y(1)
	for _, f := range []float64{0, 0.25, 0.5, 0.75, 1} {
		c.YTicks = append(c.YTicks, views.Tick{Pos: num(y(f)), Label: strconv.Itoa(int(f*100)) + " %"})
	}
	mean := func(a *audit.ChartRank) (float64, bool) {
		m := a.UsageSum / float64(a.Reports)
		return m, a.Reports > 0 && !math.IsNaN(m) && !math.IsInf(m, 0)
	}
	for _, rk := range s.sortedRanks() {
		c.Series = append(c.Series, s.line(rk, mean, y))
	}
	if through := s.chart().Through; !through.IsZero() {
		c.Note = "Only the reports before " + clock(through) + " are charted: the window holds more than a chart reads. Narrow the window or pick a worker to see the rest."
	}
	return c
}

// waitingChart draws the largest num_waiting_reqs of each rank per bucket
// (a peak matters more than an average for queues).
func (s *series) waitingChart() views.Chart {
	c := s.frame("chart-waiting", "Waiting requests per rank (peak per interval)")
	step, hi := niceScale(s.peakWaiting())
	y := s.y(float64(hi))
	for v := int64(0); v <= hi; v += step {
		c.YTicks = append(c.YTicks, views.Tick{Pos: num(y(float64(v))), Label: humanize.Thousands(v)})
	}
	for _, rk := range s.sortedRanks() {
		c.Series = append(c.Series, s.line(rk, peakWaiting, y))
	}
	return c
}

func peakWaiting(a *audit.ChartRank) (float64, bool) { return float64(a.MaxWaitingReqs), true }

// peakWaiting is the largest num_waiting_reqs of any rank in the window.
func (s *series) peakWaiting() int64 {
	var top int64
	for _, b := range s.chart().Buckets {
		for _, a := range b.Ranks {
			top = max(top, a.MaxWaitingReqs)
		}
	}
	return top
}

// Small multiples of the waiting chart.
const (
	// multiplesAbove is the rank count above which the waiting chart is
	// drawn as one small chart per rank: past it, lines on one chart
	// hide each other.
	multiplesAbove = 4
	// maxPanels bounds the small charts of one page.
	maxPanels = 64
)

// waitingPanels is the waiting chart as one small chart per rank, on a
// shared scale so that equal heights are equal queues; nil when there
// are multiplesAbove ranks or fewer (the one chart reads well then). A
// note says when ranks are left out (beyond maxPanels).
func (s *series) waitingPanels() ([]views.Chart, string) {
	ranks := s.sortedRanks()
	if len(ranks) <= multiplesAbove {
		return nil, ""
	}
	note := ""
	if len(ranks) > maxPanels {
		note = "Ranks " + strconv.FormatInt(ranks[0], 10) + " to " + strconv.FormatInt(ranks[maxPanels-1], 10) +
			" of " + strconv.Itoa(len(ranks)) + " are drawn; the audit page's per-rank statistics list every rank."
		ranks = ranks[:maxPanels]
	}
	p := s.in(panel)
	_, hi := niceScale(s.peakWaiting())
	y := p.y(float64(hi))
	out := make([]views.Chart, 0, len(ranks))
	for _, rk := range ranks {
		r := strconv.FormatInt(rk, 10)
		c := p.frame("waiting-rank-"+r, "rank "+r)
		c.YTicks = []views.Tick{{Pos: num(y(0)), Label: "0"}, {Pos: num(y(float64(hi))), Label: humanize.Thousands(hi)}}
		c.Series = []views.Series{p.line(rk, peakWaiting, y)}
		out = append(out, c)
	}
	return out, note
}

// spreadTops are the tops the imbalance chart's scale may take: each
// cut in quarters at round percentages.
var spreadTops = []float64{0.1, 0.2, 0.4, 0.6, 0.8, 1}

// spreadChart draws the imbalance across ranks: per bucket, the largest
// rank's mean token_usage minus the smallest's (the audit imbalance query
// measures the same spread report by report), with threshold drawn and
// the part of the plot above it shaded.
func (s *series) spreadChart(threshold float64) views.Chart {
	c := s.frame("chart-imbalance", "Imbalance: KV cache usage spread across ranks (max − min of the ranks' means per interval)")
	buckets := s.chart().Buckets
	spread := func(i int) (float64, bool) {
		lo, hi, n := math.Inf(1), math.Inf(-1), 0
		for _, a := range buckets[i].Ranks {
			m := a.UsageSum / float64(a.Reports)
			if a.Reports == 0 || math.IsNaN(m) || math.IsInf(m, 0) {
				continue
			}
			lo, hi, n = math.Min(lo, m), math.Max(hi, m), n+1
		}
		return hi - lo, n >= 2
	}
	peak, drawn := threshold, false
	for i := range buckets {
		if v, ok := spread(i); ok {
			peak, drawn = math.Max(peak, v), true
		}
	}
	top := spreadTops[len(spreadTops)-1]
	for _, t := range spreadTops {
		if t >= peak*1.1 {
			top = t
			break
		}
	}
	y := s.y(top)
	for i := range 5 {
		f := top * float64(i) / 4
		c.YTicks = append(c.YTicks, views.Tick{Pos: num(y(f)), Label: humanize.Percent(f)})
	}
	c.Threshold = &views.Threshold{Pos: num(y(threshold)), Label: "threshold " + humanize.Percent(threshold), Above: num(y(threshold) - s.g.top)}
	c.Empty = !drawn
	if !drawn {
		c.EmptyText = "No interval in this window holds two ranks or more: there is no spread to draw."
		return c
	}
	c.Series = []views.Series{{Rank: "spread", Label: "spread (max − min)", Color: "#1b1f24", D: s.pathOf(spread, y)}}
	return c
}

func (s *series) line(rank int64, value func(*audit.ChartRank) (float64, bool), y func(float64) float64) views.Series {
	r := strconv.FormatInt(rank, 10)
	return views.Series{Rank: r, Label: "rank " + r, Color: rankColor(rank), D: s.path(rank, value, y)}
}

// niceScale returns a round step and a top ≥ peak that is a multiple of
// it, with at most five steps.
func niceScale(peak int64) (step, top int64) {
	if peak <= 4 {
		return 1, 4
	}
	raw := float64(peak) / 4
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if m*mag >= raw {
			step = int64(math.Ceil(m * mag))
			break
		}
	}
	top = (peak + step - 1) / step * step
	return step, top
}

// tickSteps are the time steps an axis may use, smallest first.
var tickSteps = []time.Duration{
	time.Second, 2 * time.Second, 5 * time.Second, 10 * time.Second, 15 * time.Second, 30 * time.Second,
	time.Minute, 2 * time.Minute, 5 * time.Minute, 10 * time.Minute, 15 * time.Minute, 30 * time.Minute,
	time.Hour, 2 * time.Hour, 3 * time.Hour, 6 * time.Hour, 12 * time.Hour,
	24 * time.Hour, 2 * 24 * time.Hour, 7 * 24 * time.Hour, 14 * 24 * time.Hour, 28 * 24 * time.Hour,
}

// xTicks places labelled ticks at round UTC times inside the window.
func (s *series) xTicks() []views.Tick {
	span := s.w.Until.Sub(s.w.Since)
	step := tickSteps[len(tickSteps)-1]
	for _, st := range tickSteps {
		if span/st <= time.Duration(s.g.maxTicks) {
			step = st
			break
		}
	}
	layout := "15:04"
	switch {
	case step < time.Minute:
		layout = shortLayout
	case span > 24*time.Hour:
		layout = "Jan 2 15:04"
	}
	var out []views.Tick
	t := s.w.Since.UTC().Truncate(step)
	if t.Before(s.w.Since) {
		t = t.Add(step)
	}
	for ; t.Before(s.w.Until) && len(out) <= s.g.maxTicks; t = t.Add(step) {
		out = append(out, views.Tick{Pos: num(s.x(t)), Label: t.UTC().Format(layout)})
	}
	return out
}

// timeline shows where reports were recorded and marks the outages.
func (s *series) timeline() views.Timeline {
	tl := views.Timeline{
		Width: s.g.width, Height: timelineH,
		Left: num(s.g.left), PlotWidth: num(s.g.plotW()),
		XTicks:  s.xTicks(),
		Outages: s.outageSpans(),
	}
	start, last := -1, -1
	flush := func() {
		if start < 0 {
			return
		}
		from, to := s.bounds[start], s.bounds[last+1]
		tl.Recorded = append(tl.Recorded, s.span(s.x(from), s.x(to), "", "recorded "+clock(from)+" – "+clock(to)))
	}
	for i, b := range s.chart().Buckets {
		if b.Reports == 0 {
			continue
		}
		if start >= 0 && s.joined(last, i) {
			last = i
			continue
		}
		flush()
		start, last = i, i
	}
	flush()
	return tl
}

// outageSpans are the outages' bands, on the timeline and behind the
// charts.
func (s *series) outageSpans() []views.Span {
	var out []views.Span
	for _, o := range s.outages {
		end := o.End
		if o.Ongoing {
			end = o.LastSeen.Add(s.ongoingTail)
		}
		class := outageClass(o)
		title := strings.ToUpper(class) + " " + clock(o.Start) + ", " + humanize.Duration(o.Duration)
		if o.Ongoing {
			title += ", ongoing"
		}
		if o.LastError != "" {
			title += ": " + o.LastError
		}
		out = append(out, s.span(s.x(o.Start), s.x(end), class, title))
	}
	return out
}

// span is a band from x0 to x1, at least 2 units wide so a one-report
// outage stays visible.
func (s *series) span(x0, x1 float64, class, title string) views.Span {
	w := math.Max(x1-x0, 2)
	if x0+w > s.g.right {
		x0 = s.g.right - w
	}
	return views.Span{X: num(x0), W: num(w), Class: class, Title: title}
}

// outageClass is "unreachable" when the run had an UNREACHABLE report,
// else "stale".
func outageClass(o audit.Outage) string {
	if slices.Contains(o.Statuses, domain.StatusUnreachable) {
		return "unreachable"
	}
	return "stale"
}
