package web

import (
	"context"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/loadreporter/loadreporter/domain"
	"github.com/loadreporter/loadreporter/domain/audit"
	"github.com/loadreporter/loadreporter/web/humanize"
)

// A rank card's sparkline: that rank's KV usage and waiting requests over
// the last sparkWindow. The server draws it from the history store's
// chart of the window (sparkBuckets buckets, one bounded query) and the
// report shown; the script (web/live/src/spark.ts) keeps drawing it from
// the reports Watch brings, in a ring of at most sparkRing points. Both
// draw alike (sparkPaths, sparkPaths in spark.ts); keep them in step.
const (
	sparkWindow  = 5 * time.Minute
	sparkBuckets = 30
	// sparkRing bounds the points the script keeps per rank: a point
	// every 750 ms over sparkWindow, more than a card is wide, and
	// reports at the page's 1 s are never merged.
	sparkRing = 400
	// sparkTimeout bounds the history query of one live page: past it
	// the sparklines start from the report shown rather than wait on a
	// slow store.
	sparkTimeout = time.Second
	// The sparkline's viewBox: sparkW × sparkH.
	sparkW = 100
	sparkH = 20
)

// sparkSpans are the spans a sparkline's time axis may take: the
// shortest that holds the oldest point, so a page that has seen a few
// seconds draws them across the card; at most sparkWindow.
var sparkSpans = []time.Duration{30 * time.Second, time.Minute, 2 * time.Minute, 3 * time.Minute, sparkWindow}

// sparkSpan is the span of the sparklines ending at end whose oldest
// point is at oldest (unix ms).
func sparkSpan(oldest, end int64) int64 {
	for _, s := range sparkSpans {
		if end-oldest <= s.Milliseconds() {
			return s.Milliseconds()
		}
	}
	return sparkWindow.Milliseconds()
}

// spanText labels a sparkline's span: "last 30 s", "last 2 min".
func spanText(span int64) string {
	if span < time.Minute.Milliseconds() {
		return "last " + strconv.FormatInt(span/1000, 10) + " s"
	}
	return "last " + strconv.FormatInt(span/time.Minute.Milliseconds(), 10) + " min"
}

// oldestPoint is the time of the oldest point of spark within the window
// ending at end; end when there is none.
func oldestPoint(spark map[int64][]sparkPoint, end int64) int64 {
	oldest := end
	for _, pts := range spark {
		for _, p := range pts {
			if p.t >= end-sparkWindow.Milliseconds() {
				oldest = min(oldest, p.t)
				break
			}
		}
	}
	return oldest
}

// sparkPoint is one sample of a rank: at t (unix ms), KV usage u and
// waiting requests w; d is the spacing it was sampled at (ms): a line
// joins two points no further apart than twice the larger of theirs.
type sparkPoint struct {
	t int64
	u float64
	w int64
	d int64
}

// sparkSeeds returns each rank's points over the last sparkWindow before
// now, from the history of worker (nil when there is no history, no
// worker, or the store did not answer within sparkTimeout).
func (h *Handler) sparkSeeds(ctx context.Context, worker string, now time.Time) map[int64][]sparkPoint {
	if h.o.Chart == nil || worker == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, min(sparkTimeout, h.o.QueryTimeout))
	defer cancel()
	q := audit.ChartQuery{Window: audit.Window{Since: now.Add(-sparkWindow), Until: now}, Workers: []string{worker}, Buckets: sparkBuckets}
	res, err := h.o.Chart.Chart(ctx, q)
	if err != nil {
		h.o.Logger.Debug("web: live page drawn without history", "err", err)
		return nil
	}
	bounds := q.Bounds()
	step := sparkWindow.Milliseconds() / sparkBuckets
	out := map[int64][]sparkPoint{}
	for i, b := range res.Buckets {
		mid := bounds[i].Add(bounds[i+1].Sub(bounds[i]) / 2).UnixMilli()
		for _, a := range b.Ranks {
			m := a.UsageSum / float64(a.Reports)
			if a.Reports == 0 || math.IsNaN(m) || math.IsInf(m, 0) {
				continue
			}
			out[a.DPRank] = append(out[a.DPRank], sparkPoint{t: mid, u: m, w: a.MaxWaitingReqs, d: step})
		}
	}
	return out
}

// withReport is seeds with rep's ranks added as the newest points.
func withReport(seeds map[int64][]sparkPoint, rep *domain.Report, watch time.Duration) map[int64][]sparkPoint {
	if rep == nil || len(rep.Ranks) == 0 {
		return seeds
	}
	if seeds == nil {
		seeds = map[int64][]sparkPoint{}
	}
	t := rep.ReportTime.UnixMilli()
	for _, rk := range rep.Ranks {
		pts := seeds[rk.DPRank]
		if n := len(pts); n > 0 && pts[n-1].t >= t {
			continue // the history already holds it
		}
		seeds[rk.DPRank] = append(pts, sparkPoint{t: t, u: rk.TokenUsage, w: rk.NumWaitingReqs, d: watch.Milliseconds()})
	}
	return seeds
}

// encodeSpark writes points as the script reads them back (data-points):
// "t,u,w" joined by spaces; their spacing is the page's data-spark-step-ms.
func encodeSpark(pts []sparkPoint) string {
	var b strings.Builder
	for i, p := range pts {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(strconv.FormatInt(p.t, 10) + "," + strconv.FormatFloat(p.u, 'f', 4, 64) + "," + strconv.FormatInt(p.w, 10))
	}
	return b.String()
}

// sparkPaths draws points (in time order) over the span window ending at
// end (unix ms): the SVG paths of KV usage (0 to 1) and of waiting (0 to
// peak), and peak, the largest waiting in the window (at least 1).
func sparkPaths(pts []sparkPoint, end, window int64) (kv, waiting string, peak int64) {
	start := end - window
	peak = 1
	for _, p := range pts {
		if p.t >= start && p.t <= end {
			peak = max(peak, p.w)
		}
	}
	x := func(t int64) float64 { return float64(t-start) / float64(window) * sparkW }
	yu := func(u float64) float64 { return sparkH - 1 - math.Max(0, math.Min(1, u))*(sparkH-2) }
	yw := func(w int64) float64 { return sparkH - 1 - float64(w)/float64(peak)*(sparkH-2) }
	var k, q strings.Builder
	var prev *sparkPoint
	run := 0
	for i := range pts {
		p := &pts[i]
		if p.t < start || p.t > end {
			continue
		}
		joined := prev != nil && p.t-prev.t <= 2*max(p.d, prev.d)
		if joined {
			k.WriteString(" L")
			q.WriteString(" L")
			run++
		} else {
			if run == 1 {
				k.WriteString(" h0")
				q.WriteString(" h0")
			}
			if k.Len() > 0 {
				k.WriteByte(' ')
				q.WriteByte(' ')
			}
			k.WriteByte('M')
			q.WriteByte('M')
			run = 1
		}
		k.WriteString(num(x(p.t)) + " " + num(yu(p.u)))
		q.WriteString(num(x(p.t)) + " " + num(yw(p.w)))
		prev = p
	}
	if run == 1 {
		k.WriteString(" h0")
		q.WriteString(" h0")
	}
	return k.String(), q.String(), peak
}

// peakText labels a sparkline's waiting scale.
func peakText(peak int64) string { return "peak " + humanize.Thousands(peak) + " waiting" }
