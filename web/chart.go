package web

import (
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

// rankAgg summarises one rank within one bucket.
type rankAgg struct {
	usageSum   float64
	n          int
	maxWaiting int64
}

// bucket is one time slice of the window.
type bucket struct {
	reports int
	ranks   map[int64]*rankAgg
}

// series accumulates the reports of a window into fixed time buckets, so a
// chart has a bounded number of points however many reports there are.
type series struct {
	w       audit.Window
	bw      time.Duration
	gap     time.Duration // largest distance between points still joined
	buckets []bucket
	ranks   map[int64]bool
	reports int
	// truncated says the window held more reports than were charted.
	truncated bool
}

func newSeries(w audit.Window, historyInterval time.Duration) *series {
	bw := max(w.Until.Sub(w.Since)/chartBuckets, time.Nanosecond)
	return &series{
		w:       w,
		bw:      bw,
		gap:     2*historyInterval + bw,
		buckets: make([]bucket, chartBuckets),
		ranks:   map[int64]bool{},
	}
}

func (s *series) add(r *domain.Report) {
	if !s.w.Contains(r.ReportTime) {
		return
	}
	i := min(int(r.ReportTime.Sub(s.w.Since)/s.bw), len(s.buckets)-1)
	b := &s.buckets[i]
	b.reports++
	s.reports++
	for _, rk := range r.Ranks {
		if b.ranks == nil {
			b.ranks = map[int64]*rankAgg{}
		}
		a := b.ranks[rk.DPRank]
		if a == nil {
			a = &rankAgg{}
			b.ranks[rk.DPRank] = a
		}
		if !math.IsNaN(rk.TokenUsage) && !math.IsInf(rk.TokenUsage, 0) {
			a.usageSum += rk.TokenUsage
			a.n++
		}
		a.maxWaiting = max(a.maxWaiting, rk.NumWaitingReqs)
		s.ranks[rk.DPRank] = true
	}
}

// joined says points in buckets i < j belong to one line: nothing
// recorded between them for longer than the gap.
func (s *series) joined(i, j int) bool {
	return time.Duration(j-i)*s.bw <= s.gap
}

// x is the horizontal position of t.
func (s *series) x(t time.Time) float64 {
	span := s.w.Until.Sub(s.w.Since)
	f := float64(t.Sub(s.w.Since)) / float64(span)
	return padLeft + math.Max(0, math.Min(1, f))*plotW
}

func (s *series) bucketX(i int) float64 {
	return s.x(s.w.Since.Add(s.bw*time.Duration(i) + s.bw/2))
}

func num(f float64) string { return strconv.FormatFloat(f, 'f', 1, 64) }

// path is the SVG path of one rank: a subpath per run of joined points; a
// lone point is a zero-length segment that round caps draw as a dot.
func (s *series) path(rank int64, value func(*rankAgg) (float64, bool), y func(float64) float64) string {
	var b strings.Builder
	prev, runLen := -1, 0
	for i := range s.buckets {
		a := s.buckets[i].ranks[rank]
		if a == nil {
			continue
		}
		v, ok := value(a)
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
	out := make([]int64, 0, len(s.ranks))
	for r := range s.ranks {
		out = append(out, r)
	}
	slices.Sort(out)
	return out
}

func (s *series) frame(id, title string) views.Chart {
	return views.Chart{
		ID: id, Title: title,
		Width: chartWidth, Height: chartHeight,
		Left: num(padLeft), Right: num(plotRight), Top: num(padTop), Bottom: num(plotBottom),
		XTicks: s.xTicks(),
		Empty:  len(s.ranks) == 0,
	}
}

// usageChart draws the mean token_usage of each rank per bucket.
func (s *series) usageChart() views.Chart {
	c := s.frame("chart-token-usage", "KV cache usage (token_usage) per rank")
	y := func(v float64) float64 { return plotBottom - math.Max(0, math.Min(1, v))*plotH }
	for _, f := range []float64{0, 0.25, 0.5, 0.75, 1} {
		c.YTicks = append(c.YTicks, views.Tick{Pos: num(y(f)), Label: strconv.Itoa(int(f*100)) + " %"})
	}
	mean := func(a *rankAgg) (float64, bool) {
		if a.n == 0 {
			return 0, false
		}
		return a.usageSum / float64(a.n), true
	}
	for _, rk := range s.sortedRanks() {
		c.Series = append(c.Series, s.line(rk, mean, y))
	}
	if s.truncated {
		c.Note = "Only the first " + humanize.Thousands(maxChartReports) + " reports of this window are charted; narrow the window to see the rest."
	}
	return c
}

// waitingChart draws the largest num_waiting_reqs of each rank per bucket
// (a peak matters more than an average for queues).
func (s *series) waitingChart() views.Chart {
	c := s.frame("chart-waiting", "Waiting requests per rank (peak per interval)")
	var top int64
	for _, b := range s.buckets {
		for _, a := range b.ranks {
			top = max(top, a.maxWaiting)
		}
	}
	step, hi := niceScale(top)
	y := func(v float64) float64 { return plotBottom - math.Max(0, math.Min(1, v/float64(hi)))*plotH }
	for v := int64(0); v <= hi; v += step {
		c.YTicks = append(c.YTicks, views.Tick{Pos: num(y(float64(v))), Label: humanize.Thousands(v)})
	}
	peak := func(a *rankAgg) (float64, bool) { return float64(a.maxWaiting), true }
	for _, rk := range s.sortedRanks() {
		c.Series = append(c.Series, s.line(rk, peak, y))
	}
	return c
}

func (s *series) line(rank int64, value func(*rankAgg) (float64, bool), y func(float64) float64) views.Series {
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
		if span/st <= maxChartTicks {
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
	for ; t.Before(s.w.Until) && len(out) <= maxChartTicks; t = t.Add(step) {
		out = append(out, views.Tick{Pos: num(s.x(t)), Label: t.UTC().Format(layout)})
	}
	return out
}

// timeline shows where reports were recorded and marks the outages.
func (s *series) timeline(outages []audit.Outage, historyInterval time.Duration) views.Timeline {
	tl := views.Timeline{
		Width: chartWidth, Height: timelineH,
		Left: num(padLeft), PlotWidth: num(plotW),
		XTicks: s.xTicks(),
	}
	start, last := -1, -1
	flush := func() {
		if start < 0 {
			return
		}
		from := s.w.Since.Add(s.bw * time.Duration(start))
		to := s.w.Since.Add(s.bw * time.Duration(last+1))
		tl.Recorded = append(tl.Recorded, span(s.x(from), s.x(to), "", "recorded "+clock(from)+" – "+clock(to)))
	}
	for i, b := range s.buckets {
		if b.reports == 0 {
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
	for _, o := range outages {
		end := o.End
		if o.Ongoing {
			end = o.LastSeen.Add(historyInterval)
		}
		class := outageClass(o)
		title := strings.ToUpper(class) + " " + clock(o.Start) + ", " + humanize.Duration(o.Duration)
		if o.Ongoing {
			title += ", ongoing"
		}
		if o.LastError != "" {
			title += ": " + o.LastError
		}
		tl.Outages = append(tl.Outages, span(s.x(o.Start), s.x(end), class, title))
	}
	return tl
}

// span is a band from x0 to x1, at least 2 units wide so a one-report
// outage stays visible.
func span(x0, x1 float64, class, title string) views.Span {
	w := math.Max(x1-x0, 2)
	if x0+w > plotRight {
		x0 = plotRight - w
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
