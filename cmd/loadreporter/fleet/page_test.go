package fleet

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"

	"github.com/loadreporter/loadreporter/client"
	pb "github.com/loadreporter/loadreporter/gen/sglang/router/loadmonitor/v1"
	"github.com/loadreporter/loadreporter/web/views"
)

// renderPage renders the page for es at now and parses it.
func renderPage(t *testing.T, now time.Time, es []client.Standing) (*goquery.Document, string) {
	t.Helper()
	var s fleetSent
	msg, _ := s.next(now, es, dashboardOf)
	var b strings.Builder
	if err := views.Fleet(pageModelOf(msg, "/static/style.css?v=s", "/static/fleet.js?v=abc")).Render(context.Background(), &b); err != nil {
		t.Fatal(err)
	}
	doc, err := goquery.NewDocumentFromReader(strings.NewReader(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	return doc, b.String()
}

func cell(row *goquery.Selection, id string) string {
	return strings.TrimSpace(row.Find(`[data-testid="` + id + `"]`).First().Text())
}

// The page is the fleet's dashboard without JavaScript: the worker's
// pages' stylesheet and header, the aggregate, and one row per worker with
// the figures a router picks on (state, age, running, waiting, KV usage
// per rank as one bar each, throughput, model, zone, engine address,
// pending dispatches), linking to the worker's own dashboard; the
// controls only the script can work stay hidden.
func TestPageRendersRows(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	a := freshView("a:1", 7, now.Add(-1500*time.Millisecond))
	a.Report.Worker = &pb.Worker{WorkerAddr: "10.0.0.7:30000", WorkerType: pb.WorkerType_WORKER_TYPE_DECODE,
		Model: stringPtr("llama-3-8b"), Zone: stringPtr("eu-west-1a")}
	for i, k := range a.Report.Ranks {
		k.NumRunningReqs, k.MaxRunningRequests, k.NumWaitingReqs, k.GenThroughput = int64(10+i), 256, int64(2*i), 1000.25
	}
	es := entries(a, &client.View{Addr: "b:1", State: client.Disconnected, Reason: "no registered stream"})
	es[0].Pending = client.Pending{Requests: 3, Tokens: 1536}
	doc, html := renderPage(t, now, es)

	if doc.Find(`link[rel="stylesheet"][href="/static/style.css?v=s"]`).Length() != 1 ||
		doc.Find(`script[src="/static/fleet.js?v=abc"]`).Length() != 1 || doc.Find("header.site nav a").Length() != 2 ||
		doc.Find(`header.site nav a[aria-current="page"]`).Text() != "Fleet" || doc.Find("style, [style]").Length() != 0 {
		t.Fatalf("frame: %s", html)
	}
	if got := cell(doc.Selection, "summary"); got != "1 of 2 workers fresh" {
		t.Fatalf("summary %q", got)
	}
	for id, want := range map[string]string{"agg-ranks": "2", "agg-running": "21", "agg-waiting": "2", "agg-kv": "87.5 %",
		"agg-throughput": "2,001 tok/s", "agg-pending": "3 req · 1,536 tok"} {
		if got := cell(doc.Selection, id); got != want {
			t.Errorf("%s = %q, want %q", id, got, want)
		}
	}
	rows := doc.Find(`tbody [data-testid="worker"]`)
	if rows.Length() != 2 {
		t.Fatalf("rows: %s", html)
	}
	ra := rows.First()
	for id, want := range map[string]string{"state": "fresh", "age": "1.5 s", "running": "21 / 512", "waiting": "2", "kv": "87.5 %",
		"throughput": "2,001 tok/s", "model": "llama-3-8b", "zone": "eu-west-1a", "engine": "10.0.0.7:30000",
		"worker-type": "decode", "pending": "3 req · 1,536 tok"} {
		if got := cell(ra, id); got != want {
			t.Errorf("row a %s = %q, want %q", id, got, want)
		}
	}
	if ra.AttrOr("data-target", "") != "a:1" || ra.AttrOr("data-sequence", "") != "7" || ra.AttrOr("data-sort-kv", "") != "0.8750" ||
		ra.Find(`[data-testid="dashboard"]`).AttrOr("href", "") != "http://a:1/" || !ra.HasClass("fresh") ||
		ra.Find(`[data-testid="state"]`).AttrOr("class", "") != "status status-healthy" {
		t.Errorf("row a: %s", html)
	}
	if _, hidden := ra.Find(`[data-testid="reason"]`).Attr("hidden"); !hidden {
		t.Error("a fresh worker's reason is shown")
	}
	// One bar per rank, as tall as its usage (0.25 and 1.5 clamped to 1).
	var heights, titles []string
	ra.Find(`[data-testid="rank"]`).Each(func(_ int, b *goquery.Selection) {
		heights, titles = append(heights, b.AttrOr("height", "")), append(titles, strings.TrimSpace(b.Find("title").Text()))
	})
	if !slices.Equal(heights, []string{"5.00", "20.00"}) || !slices.Equal(titles, []string{"rank 0: 25.0 %", "rank 1: 150.0 %"}) {
		t.Errorf("bars %q %q", heights, titles)
	}
	rb := rows.Last()
	if cell(rb, "state") != "disconnected" || cell(rb, "reason") != "no registered stream" || cell(rb, "age") != "—" ||
		cell(rb, "running") != "—" || cell(rb, "model") != "—" || rb.Find(`[data-testid="rank"]`).Length() != 0 || cell(rb, "pending") != "0" {
		t.Errorf("row b: %s", html)
	}
	if _, hidden := doc.Find(`[data-testid="fleet-controls"]`).Attr("hidden"); !hidden {
		t.Error("the filter is shown without the script that works it")
	}
	if doc.Find("#worker-row-template tr").Length() != 1 || doc.Find("#kv-bar-template rect").Length() != 1 ||
		doc.Find("[data-fleet-root]").AttrOr("data-server-time-unix-ms", "") != "1796119200000" {
		t.Errorf("templates and root: %s", html)
	}
}

// kvBar gives n ranks' bars the chart's whole width, side by side, so a
// row never grows with its ranks: the last bar of 3, 8 or 1 024 ranks ends
// at the chart's right edge.
func TestKVBarsShareTheChart(t *testing.T) {
	t.Parallel()
	for _, n := range []int{1, 3, 8, 1024} {
		x, _, w, _ := kvBar(n-1, n, 0.5)
		xf, wf := parseF(t, x), parseF(t, w)
		slot := float64(views.KVChartWidth) / float64(n)
		if end := xf + wf; end > float64(views.KVChartWidth)+0.01 || end < float64(views.KVChartWidth)-slot {
			t.Errorf("%d ranks: the last bar ends at %.2f of %d", n, end, views.KVChartWidth)
		}
	}
	if _, y, _, h := kvBar(0, 4, 0.25); y != "15.00" || h != "5.00" {
		t.Errorf("a quarter full: y %s h %s", y, h)
	}
}

func parseF(t *testing.T, s string) float64 {
	t.Helper()
	var f float64
	if _, err := fmt.Sscan(s, &f); err != nil {
		t.Fatal(err)
	}
	return f
}

func stringPtr(s string) *string { return &s }
