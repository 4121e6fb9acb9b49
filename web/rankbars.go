package web

import (
	"math"
	"strconv"

	"github.com/loadreporter/loadreporter/web/audittable"
	"github.com/loadreporter/loadreporter/web/humanize"
	"github.com/loadreporter/loadreporter/web/views"
)

// The rank-stats bars: one row per (worker, rank) of the result, the KV
// usage panel (avg as a bar, p95 as a lighter bar behind it) and the max
// waiting panel. Geometry in viewBox units.
const (
	barsWidth    = 960
	barsLabelEnd = 150 // labels end here, right-aligned
	barsKVLeft   = 160
	barsKVRight  = 560
	barsKVText   = 570 // "avg … · p95 …" starts here
	barsWLeft    = 730
	barsWRight   = 900
	barsWText    = 906
	barsTop      = 26 // below the panels' titles
	barsRowH     = 22
	barsAxisH    = 22
	// maxBarRows bounds the rows drawn; the table lists them all.
	maxBarRows = 64
	// maxLabelRunes is what fits left of barsLabelEnd.
	maxLabelRunes = 24
)

// rankBars draws a rank-stats table as bars, from the same rows the table
// shows (their raw values); nil when t holds none.
func rankBars(t audittable.Table) *views.RankBars {
	col := map[string]int{}
	for i, c := range t.Columns {
		col[c.Name] = i
	}
	type stat struct {
		worker, rank   string
		avg, p95       float64
		waiting        int64
		avgTxt, p95Txt string
	}
	var rows []stat
	workers := map[string]bool{}
	for _, r := range t.Rows {
		cell := func(name string) audittable.Cell { return r[col[name]] }
		avg, err1 := strconv.ParseFloat(cell("avg_token_usage").Raw, 64)
		p95, err2 := strconv.ParseFloat(cell("p95_token_usage").Raw, 64)
		w, err3 := strconv.ParseInt(cell("max_waiting_reqs").Raw, 10, 64)
		if err1 != nil || err2 != nil || err3 != nil {
			continue
		}
		s := stat{worker: cell("worker_addr").Text, rank: cell("dp_rank").Raw, avg: avg, p95: p95, waiting: w,
			avgTxt: cell("avg_token_usage").Text, p95Txt: cell("p95_token_usage").Text}
		workers[s.worker] = true
		rows = append(rows, s)
	}
	if len(rows) == 0 {
		return nil
	}
	b := &views.RankBars{Width: barsWidth}
	if len(rows) > maxBarRows {
		b.Note = "The first " + strconv.Itoa(maxBarRows) + " of " + humanize.Thousands(int64(len(rows))) +
			" rows are drawn; the table lists them all. Pick a worker or ranks to see the others."
		rows = rows[:maxBarRows]
	}
	var peak int64
	for _, r := range rows {
		peak = max(peak, r.waiting)
	}
	step, top := niceScale(peak)
	kvX := func(f float64) float64 {
		if math.IsNaN(f) {
			f = 0
		}
		return barsKVLeft + math.Max(0, math.Min(1, f))*(barsKVRight-barsKVLeft)
	}
	wX := func(v int64) float64 { return barsWLeft + float64(v)/float64(top)*(barsWRight-barsWLeft) }
	bottom := float64(barsTop + len(rows)*barsRowH)
	b.Height = int(bottom) + barsAxisH
	b.Top, b.Bottom = num(barsTop-4), num(bottom)
	b.WaitTextX = num(barsWText)
	b.LabelX, b.KVLeft, b.KVRight, b.KVText = num(barsLabelEnd), num(barsKVLeft), num(barsKVRight), num(barsKVText)
	b.WaitLeft, b.WaitRight = num(barsWLeft), num(barsWRight)
	for _, f := range []float64{0, 0.25, 0.5, 0.75, 1} {
		b.KVTicks = append(b.KVTicks, views.Tick{Pos: num(kvX(f)), Label: strconv.Itoa(int(f*100)) + " %"})
	}
	for v := int64(0); v <= top; v += step {
		b.WaitTicks = append(b.WaitTicks, views.Tick{Pos: num(wX(v)), Label: humanize.Thousands(v)})
	}
	for i, r := range rows {
		y := float64(barsTop + i*barsRowH)
		label := "rank " + r.rank
		if len(workers) > 1 {
			label = humanize.Ellipsize(r.worker, maxLabelRunes-len(label)-3) + " · " + label
		}
		b.Rows = append(b.Rows, views.RankBarRow{
			Rank: r.rank, Worker: r.worker, Label: label,
			Y: num(y), TextY: num(y + barsRowH/2 + 4),
			P95Y: num(y + 4), P95H: num(barsRowH - 8), AvgY: num(y + 7), AvgH: num(barsRowH - 14),
			AvgW: num(kvX(r.avg) - barsKVLeft), P95W: num(kvX(r.p95) - barsKVLeft), Level: humanize.UsageLevel(r.avg),
			KVText:   "avg " + r.avgTxt + " · p95 " + r.p95Txt,
			WaitW:    num(wX(r.waiting) - barsWLeft),
			WaitText: humanize.Thousands(r.waiting),
		})
	}
	return b
}
