package web

import (
	"context"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"

	"github.com/loadreporter/loadreporter/domain"
	"github.com/loadreporter/loadreporter/domain/audit"
	"github.com/loadreporter/loadreporter/web/audittable"
	"github.com/loadreporter/loadreporter/web/internal/historytest"
)

// staleReport is a STALE report made 2 s before the page: rank 0's
// snapshot 12 s older than the report, rank 1's 3 s older.
func staleReport() *domain.Report {
	at := fixNow.Add(-2 * time.Second)
	r := fixtureReport(fixReports - 1)
	r.ReportTime = at
	r.Status = domain.StatusStale
	r.LastError = "load snapshot stale by 12000 ms"
	r.Ranks[0].SnapshotTime = at.Add(-12 * time.Second)
	r.Ranks[1].SnapshotTime = at.Add(-3 * time.Second)
	return r
}

// A STALE report is new but its numbers are old: the page shows the
// snapshot's age beside the report's, each rank's on its card, the oldest
// marked, and its last_error in the STALE colour (it read "just now" in
// the UNREACHABLE box).
func TestLivePageSaysHowOldTheNumbersAre(t *testing.T) {
	t.Parallel()
	doc := page(t, newHandler(t, Options{Live: fakeLive{report: staleReport()}}), "/", http.StatusOK)
	snap := tid(doc, "snapshot-age")
	if txt(tid(doc, "report-age")) != "2 s ago" || txt(snap) != "14 s ago" || snap.AttrOr("data-lag-ms", "") != "12000" ||
		!snap.HasClass("stale") || !strings.Contains(snap.AttrOr("title", ""), "12.000 s before the report") {
		t.Errorf("report age %q, snapshot age %q (lag %q, class %q, title %q); want 2 s and 14 s ago, marked stale",
			txt(tid(doc, "report-age")), txt(snap), snap.AttrOr("data-lag-ms", ""), snap.AttrOr("class", ""), snap.AttrOr("title", ""))
	}
	for rank, want := range map[string]struct {
		age, lag string
		stale    bool
	}{"0": {"14 s ago", "12000", true}, "1": {"5 s ago", "3000", false}} {
		age := tid(tid(doc, "rank-card-"+rank), "rank-age")
		if txt(age) != want.age || age.AttrOr("data-lag-ms", "") != want.lag || age.HasClass("stale") != want.stale {
			t.Errorf("rank %s: age %q lag %q class %q; want %q, %s, stale %t", rank, txt(age), age.AttrOr("data-lag-ms", ""), age.AttrOr("class", ""), want.age, want.lag, want.stale)
		}
	}
	if got := tid(doc, "report-error").AttrOr("data-status", ""); got != "stale" {
		t.Errorf("report-error data-status = %q, want stale (the box takes its pill's colour)", got)
	}

	// HEALTHY: a fresh snapshot, nothing marked; UNREACHABLE: no snapshot.
	doc = page(t, newHandler(t, Options{}), "/", http.StatusOK)
	if snap := tid(doc, "snapshot-age"); txt(snap) != "2 min ago" || snap.HasClass("stale") || snap.AttrOr("data-lag-ms", "") != "0" {
		t.Errorf("healthy: snapshot age %q class %q", txt(snap), snap.AttrOr("class", ""))
	}
	doc = page(t, newHandler(t, Options{Live: fakeLive{report: fixtureReport(outageFirst)}}), "/", http.StatusOK)
	if txt(tid(doc, "snapshot-age")) != "—" || tid(doc, "report-error").AttrOr("data-status", "") != "unreachable" {
		t.Errorf("unreachable: snapshot age %q, report-error data-status %q", txt(tid(doc, "snapshot-age")), tid(doc, "report-error").AttrOr("data-status", ""))
	}
	// The page says the server's time, which the script ticks ages on.
	if got := doc.Find("[data-live-root]").AttrOr("data-server-time-unix-ms", ""); got != strconv.FormatInt(fixNow.UnixMilli(), 10) {
		t.Errorf("data-server-time-unix-ms = %q", got)
	}
}

// pathPoints returns the (x, y) of each point of a path of M and L
// commands (a lone point's "h0" adds none).
func pathPoints(t *testing.T, d string) [][2]float64 {
	t.Helper()
	var out [][2]float64
	f := strings.Fields(strings.NewReplacer("M", " ", "L", " ", "h0", " ").Replace(d))
	if len(f)%2 != 0 {
		t.Fatalf("path %q: odd coordinates", d)
	}
	for i := 0; i < len(f); i += 2 {
		x, err1 := strconv.ParseFloat(f[i], 64)
		y, err2 := strconv.ParseFloat(f[i+1], 64)
		if err1 != nil || err2 != nil {
			t.Fatalf("path %q: %v %v", d, err1, err2)
		}
		out = append(out, [2]float64{x, y})
	}
	return out
}

// The rank cards draw their last minutes from the history store: one
// bounded chart query (5 min of this worker in 30 buckets), one point per
// bucket that holds the rank.
func TestLivePageSparklinesFromHistory(t *testing.T) {
	t.Parallel()
	hist := newChartingHistory()
	h := newHandler(t, Options{History: hist})
	doc := page(t, h, "/", http.StatusOK)
	want := audit.ChartQuery{Window: audit.Window{Since: fixNow.Add(-sparkWindow), Until: fixNow}, Workers: []string{fixAddr}, Buckets: sparkBuckets}
	if len(hist.charts) != 1 || !hist.charts[0].Since.Equal(want.Since) || !hist.charts[0].Until.Equal(want.Until) ||
		!slices.Equal(hist.charts[0].Workers, want.Workers) || hist.charts[0].Buckets != want.Buckets || len(hist.reports) != 0 {
		t.Fatalf("queries: charts %+v, reports %+v; want one chart %+v and no reports", hist.charts, hist.reports, want)
	}
	// Reports every 10 s until t0+590 s, the page at t0+720 s: the window
	// from t0+420 s holds 18, one per 10 s bucket, drawn at the buckets'
	// middles (the last at t0+595 s) up to the page's time.
	for rank, usage := range map[string]float64{"0": 0.25, "1": 0.75} {
		card := tid(doc, "rank-card-"+rank)
		spark := tid(card, "rank-spark")
		kv := pathPoints(t, tid(spark, "rank-spark-kv").AttrOr("d", ""))
		waiting := pathPoints(t, tid(spark, "rank-spark-waiting").AttrOr("d", ""))
		if len(kv) != 18 || len(waiting) != 18 || strings.Count(tid(spark, "rank-spark-kv").AttrOr("d", ""), "M") != 1 {
			t.Fatalf("rank %s: %d and %d points (%q), want 18 in one line", rank, len(kv), len(waiting), tid(spark, "rank-spark-kv").AttrOr("d", ""))
		}
		wantY := sparkH - 1 - usage*(sparkH-2)
		for _, p := range kv {
			if p[1] < wantY-0.06 || p[1] > wantY+0.06 {
				t.Errorf("rank %s: a point at y %.1f, want %.1f (usage %v)", rank, p[1], wantY, usage)
			}
		}
		if first, last := kv[0][0], kv[len(kv)-1][0]; num(first) != "1.7" || num(last) != "58.3" {
			t.Errorf("rank %s: points from x %.1f to %.1f, want 1.7 (t0+425 s) to 58.3 (t0+595 s)", rank, first, last)
		}
		if n := len(strings.Fields(spark.AttrOr("data-points", ""))); n != 18 {
			t.Errorf("rank %s: %d data-points for the script, want 18", rank, n)
		}
		if got := txt(tid(spark, "rank-spark-span")); got != "last 5 min" {
			t.Errorf("rank %s: span %q, want last 5 min (the points cover 295 s)", rank, got)
		}
	}
	if got := txt(tid(tid(doc, "rank-card-1"), "rank-spark-peak")); got != "peak 3 waiting" {
		t.Errorf("rank 1 peak = %q", got)
	}
	root := doc.Find("[data-live-root]")
	if root.AttrOr("data-spark-window-ms", "") != "300000" || root.AttrOr("data-spark-step-ms", "") != "10000" || root.AttrOr("data-spark-ring", "") != "400" {
		t.Errorf("sparkline attributes: %v", root.Nodes[0].Attr)
	}
}

// A store that fails or stalls leaves the live page up, its sparklines
// drawn from the report alone.
func TestLivePageWithoutItsHistory(t *testing.T) {
	t.Parallel()
	for name, h := range map[string]*Handler{
		"unavailable": newHandler(t, Options{History: failingHistory{err: domain.Errorf(domain.CodeUnavailable, "connection refused")}}),
		"stalled":     newHandler(t, Options{History: stalledHistory{}}),
	} {
		t.Run(name, func(t *testing.T) {
			doc := page(t, h, "/", http.StatusOK)
			// The report, 130 s before the page, in a 3 min span.
			d := tid(tid(doc, "rank-card-0"), "rank-spark-kv").AttrOr("d", "")
			if txt(tid(doc, "report-status")) != "HEALTHY" || d != "M27.8 14.5 h0" {
				t.Errorf("status %q, sparkline %q; want the report's one point", txt(tid(doc, "report-status")), d)
			}
		})
	}
}

// stalledHistory's chart answers only when its context ends.
type stalledHistory struct{ failingHistory }

func (stalledHistory) Chart(ctx context.Context, _ audit.ChartQuery) (audit.ChartResult, error) {
	<-ctx.Done()
	return audit.ChartResult{}, ctx.Err()
}

func TestSparkPaths(t *testing.T) {
	t.Parallel()
	const w = 300_000
	end := int64(1_000_000)
	pts := []sparkPoint{
		{t: end - w - 1, u: 1, w: 50, d: 1000}, // before the window: not drawn, not the peak
		{t: end - 60_000, u: 0, w: 0, d: 10_000},
		{t: end - 50_000, u: 0.5, w: 4, d: 10_000},
		{t: end - 30_000, u: 1, w: 8, d: 10_000}, // 20 s later: joined (twice 10 s)
		{t: end - 5000, u: 2, w: 2, d: 1000},     // 25 s later: a new line; usage clamped
		{t: end - 4000, u: 0.5, w: 8, d: 1000},
		{t: end - 1000, u: 0.5, w: 1, d: 1000}, // 3 s later: a lone point
	}
	kv, waiting, peak := sparkPaths(pts, end, w)
	if peak != 8 {
		t.Errorf("peak = %d, want 8", peak)
	}
	if want := "M80.0 19.0 L83.3 10.0 L90.0 1.0 M98.3 1.0 L98.7 10.0 M99.7 10.0 h0"; kv != want {
		t.Errorf("kv = %q\nwant %q", kv, want)
	}
	if want := "M80.0 19.0 L83.3 10.0 L90.0 1.0 M98.3 14.5 L98.7 1.0 M99.7 16.8 h0"; waiting != want {
		t.Errorf("waiting = %q\nwant %q", waiting, want)
	}
	if kv, waiting, peak := sparkPaths(nil, end, w); kv != "" || waiting != "" || peak != 1 {
		t.Errorf("no points: %q %q %d", kv, waiting, peak)
	}
	for covered, want := range map[int64]int64{0: 30_000, 30_000: 30_000, 30_001: 60_000, 150_000: 180_000, 200_000: 300_000, 10_000_000: 300_000} {
		if got := sparkSpan(end-covered, end); got != want {
			t.Errorf("sparkSpan over %d ms = %d, want %d", covered, got, want)
		}
	}
	if spanText(30_000) != "last 30 s" || spanText(180_000) != "last 3 min" {
		t.Errorf("spanText: %q %q", spanText(30_000), spanText(180_000))
	}
}

// The history page shades the outage behind its charts where the status
// timeline marks it, and draws the spread across ranks with the
// threshold, linking the spans over it on the audit page.
func TestHistoryPageShadesOutagesAndDrawsTheImbalance(t *testing.T) {
	t.Parallel()
	doc := page(t, newHandler(t, Options{History: newHistory()}), "/history?window=15m", http.StatusOK)
	mark := tid(doc, "timeline-outage")
	for _, id := range []string{"chart-token-usage", "chart-waiting", "chart-imbalance"} {
		bands := tid(tid(doc, id), "chart-outage")
		if bands.Length() != 1 || !bands.HasClass("unreachable") || bands.AttrOr("x", "a") != mark.AttrOr("x", "b") ||
			bands.AttrOr("width", "a") != mark.AttrOr("width", "b") || bands.AttrOr("height", "") != num(plotH) {
			t.Errorf("%s: %d bands (x %q w %q h %q), want the timeline's outage (x %q w %q) over the plot's height %s", id, bands.Length(),
				bands.AttrOr("x", ""), bands.AttrOr("width", ""), bands.AttrOr("height", ""), mark.AttrOr("x", ""), mark.AttrOr("width", ""), num(plotH))
		}
	}

	// The fixture's ranks sit at 25 % and 75 %: a spread of 50 % on a
	// 0–60 % scale, broken by the outage; the threshold at 20 %.
	im := tid(doc, "chart-imbalance")
	d := tid(im, "series-spread").AttrOr("d", "")
	y := func(v float64) float64 { return plotBottom - v/0.6*plotH }
	pts := pathPoints(t, d)
	if strings.Count(d, "M") != 2 || len(pts) < 10 {
		t.Fatalf("spread path %q: want two lines, one each side of the outage", d)
	}
	for _, p := range pts {
		if num(p[1]) != num(y(0.5)) {
			t.Fatalf("spread point at y %.1f, want %s (50 %%)", p[1], num(y(0.5)))
		}
	}
	if got := tid(im, "chart-threshold").AttrOr("data-y", ""); got != num(y(audittable.DefaultThreshold)) || txt(tid(im, "chart-threshold-label")) != "threshold 20.0 %" {
		t.Errorf("threshold at %q labelled %q, want at %s", got, txt(tid(im, "chart-threshold-label")), num(y(0.2)))
	}
	if top := im.Find("text.ylabel").Last().Text(); top != "60.0 %" {
		t.Errorf("spread axis top = %q, want 60.0 %%", top)
	}
	link, err := url.Parse(tid(doc, "imbalance-link").AttrOr("href", ""))
	if err != nil || link.Path != "/audit" || link.Query().Get("query") != "imbalance" || link.Query().Get("threshold") != "0.2" ||
		link.Query().Get("worker") != fixAddr || link.Query().Get("since") != isoTime(fixNow.Add(-15*time.Minute)) {
		t.Errorf("imbalance link %v", link)
	}
	// Two ranks: the waiting chart stays one chart.
	if n := tid(doc, "chart-waiting").Find(`[data-testid^="waiting-rank-"]`).Length(); n != 0 {
		t.Errorf("%d small multiples for 2 ranks", n)
	}
}

// manyRanks answers the history page as a store holding reports of n
// ranks, every 10 s for 10 min, rank k waiting k.
func manyRanks(n int) *historytest.Fake {
	h := newHistory()
	h.ChartFunc = func(q audit.ChartQuery) (audit.ChartResult, error) {
		b := audit.NewChartBuilder(q)
		for i := range 60 {
			var ranks []domain.RankLoad
			for k := range n {
				ranks = append(ranks, domain.RankLoad{DPRank: int64(k), TokenUsage: float64(k) / float64(n), NumWaitingReqs: int64(k)})
			}
			b.Report(t0.Add(time.Duration(i)*10*time.Second), ranks)
		}
		return b.Result(time.Time{}), nil
	}
	return h
}

// Past four ranks the waiting chart is one small chart per rank, on one
// scale; past maxPanels ranks the rest are named, not drawn.
func TestWaitingSmallMultiples(t *testing.T) {
	t.Parallel()
	doc := page(t, newHandler(t, Options{History: manyRanks(6)}), "/history?window=15m", http.StatusOK)
	w := tid(doc, "chart-waiting")
	var panels []string
	var tops []string
	w.Find(`[data-testid^="waiting-rank-"]`).Each(func(i int, p *goquery.Selection) {
		panels = append(panels, p.AttrOr("data-testid", ""))
		if p.Find(`path[data-testid="series-`+strconv.Itoa(i)+`"]`).Length() != 1 || p.Find("path").Length() != 1 {
			t.Errorf("panel %d: want one line, rank %d's", i, i)
		}
		tops = append(tops, p.Find("text.ylabel").Last().Text())
	})
	if !slices.Equal(panels, []string{"waiting-rank-0", "waiting-rank-1", "waiting-rank-2", "waiting-rank-3", "waiting-rank-4", "waiting-rank-5"}) {
		t.Fatalf("panels %v, want one per rank 0..5", panels)
	}
	if tops = slices.Compact(tops); !slices.Equal(tops, []string{"6"}) {
		t.Errorf("panel scales %v, want one shared top (6, over rank 5's 5 waiting)", tops)
	}
	if tid(w, "panels-note").Length() != 0 || tid(doc, "chart-token-usage").Find(`path[data-testid^="series-"]`).Length() != 6 {
		t.Error("a note for six ranks, or the usage chart lost its lines")
	}

	doc = page(t, newHandler(t, Options{History: manyRanks(maxPanels + 6)}), "/history?window=15m", http.StatusOK)
	w = tid(doc, "chart-waiting")
	if n := w.Find(`[data-testid^="waiting-rank-"]`).Length(); n != maxPanels || !strings.Contains(txt(tid(w, "panels-note")), "Ranks 0 to 63 of 70 are drawn") {
		t.Errorf("%d panels, note %q; want %d and a note", n, txt(tid(w, "panels-note")), maxPanels)
	}
}

// One rank has no spread: the imbalance chart says so.
func TestImbalanceOfOneRank(t *testing.T) {
	t.Parallel()
	doc := page(t, newHandler(t, Options{History: manyRanks(1)}), "/history?window=15m", http.StatusOK)
	im := tid(doc, "chart-imbalance")
	if im.Find(`path[data-testid="series-spread"]`).Length() != 0 || !strings.Contains(txt(im.Find(".empty")), "two ranks or more") {
		t.Errorf("one rank's imbalance chart: %q", txt(im))
	}
}

// rank-stats draws a bar row per rank from the table's own rows: KV
// usage avg over p95, max waiting on its own scale.
func TestAuditRankStatsBars(t *testing.T) {
	t.Parallel()
	h := newHandler(t, Options{History: newHistory()})
	doc := page(t, h, "/audit?query=rank-stats&last=1h", http.StatusOK)
	rows := tid(tid(doc, "rank-bars"), "rank-bar")
	if rows.Length() != fixRanks {
		t.Fatalf("%d bar rows, want %d", rows.Length(), fixRanks)
	}
	// Fixture: rank 0 at 25 % waiting 0, rank 1 at 75 % waiting 3 (scale 0–4).
	for i, want := range []struct{ avg, p95, wait, level, text, label string }{
		{"100.0", "100.0", "0.0", "low", "avg 25.0 % · p95 25.0 %", "rank 0"},
		{"300.0", "300.0", "127.5", "mid", "avg 75.0 % · p95 75.0 %", "rank 1"},
	} {
		r := rows.Eq(i)
		got := []string{tid(r, "rank-bar-avg").AttrOr("width", ""), tid(r, "rank-bar-p95").AttrOr("width", ""), tid(r, "rank-bar-waiting").AttrOr("width", ""),
			strings.TrimPrefix(tid(r, "rank-bar-avg").AttrOr("class", ""), "avg level-"), r.Find(".bar-value").First().Text(), r.Find(".bar-label").Text()}
		if !slices.Equal(got, []string{want.avg, want.p95, want.wait, want.level, want.text, want.label}) {
			t.Errorf("rank %d: %q, want %+v", i, got, want)
		}
	}
	for _, q := range []string{"outages", "reports", "imbalance&threshold=0.4"} {
		if tid(page(t, h, "/audit?last=1h&query="+q, http.StatusOK), "rank-bars").Length() != 0 {
			t.Errorf("%s: bars drawn", q)
		}
	}
}

// Many workers' ranks are labelled by worker; past maxBarRows rows the
// rest are left to the table.
func TestRankBarsOfAFleet(t *testing.T) {
	t.Parallel()
	tbl := audittable.Table{Columns: []audittable.Column{
		{Name: "worker_addr"}, {Name: "dp_rank"}, {Name: "avg_token_usage"}, {Name: "p95_token_usage"}, {Name: "max_waiting_reqs"},
	}}
	for w := range 20 {
		for r := range 4 {
			addr := "worker-with-a-long-name-" + strconv.Itoa(w) + ".example:30000"
			tbl.Rows = append(tbl.Rows, []audittable.Cell{{Raw: addr, Text: addr}, {Raw: strconv.Itoa(r)}, {Raw: "0.5", Text: "50.0 %"}, {Raw: "0.9", Text: "90.0 %"}, {Raw: "7"}})
		}
	}
	b := rankBars(tbl)
	if len(b.Rows) != maxBarRows || !strings.Contains(b.Note, "The first 64 of 80 rows") {
		t.Fatalf("%d rows, note %q", len(b.Rows), b.Note)
	}
	if l := b.Rows[5].Label; !strings.HasSuffix(l, "… · rank 1") || len([]rune(l)) > maxLabelRunes {
		t.Errorf("label %q: want the worker cut to fit %d runes, then the rank", l, maxLabelRunes)
	}
	if rankBars(audittable.Table{Columns: tbl.Columns}) != nil {
		t.Error("bars for an empty result")
	}
}
