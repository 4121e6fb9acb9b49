package views

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"
	"github.com/a-h/templ"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// render renders c and parses the result as HTML.
func render(t *testing.T, c templ.Component) *goquery.Document {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var buf bytes.Buffer
	if err := c.Render(ctx, &buf); err != nil {
		t.Fatalf("render: %v", err)
	}
	doc, err := goquery.NewDocumentFromReader(&buf)
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	return doc
}

// finder is a document or a selection.
type finder interface {
	Find(string) *goquery.Selection
}

func byID(s finder, id string) *goquery.Selection {
	return s.Find(`[data-testid="` + id + `"]`)
}

func text(s *goquery.Selection) string { return strings.TrimSpace(s.Text()) }

func card(rank, usage string) RankCard {
	return RankCard{
		Rank: rank, Running: "12 / 256", Waiting: "3", WaitingTokens: "1,024 uncached tokens",
		KVUsage: usage, KVBarWidth: "42.1", KVLevel: "low", KVTokens: "110,592 / 262,144 tokens",
		Throughput: "1,234.5 tok/s", CacheHitRate: "87.0 %", Utilization: "50.0 %",
	}
}

func livePage() LivePage {
	return LivePage{
		Page:      Page{Title: "Live", Active: "live", StyleHref: "/static/style.css?v=1", ScriptHref: "/static/live.js?v=1", RefreshSeconds: 5},
		HasReport: true, Status: "HEALTHY", StatusClass: "healthy", Age: "3 s ago",
		ReportTime: "2026-11-29 08:00:00 UTC", ReportTimeISO: "2026-11-29T08:00:00Z", ReportUnixMs: "1795939200000",
		Sequence: "42", SourceID: "src-1", RoutersConnected: "2",
		Worker:          Worker{Addr: "10.0.0.1:30000", Type: "regular", Model: "llama", Zone: "—"},
		Ranks:           []RankCard{card("0", "42.1 %"), card("1", "10.0 %"), card("2", "0.0 %"), card("3", "99.9 %")},
		WatchIntervalMs: "1000",
	}
}

func TestLiveHasOneCardPerRank(t *testing.T) {
	t.Parallel()
	doc := render(t, Live(livePage()))

	cards := byID(doc, "rank-cards").Find(`[data-testid^="rank-card-"]`)
	if cards.Length() != 4 {
		t.Fatalf("rank cards = %d, want 4", cards.Length())
	}
	for i, want := range []string{"0", "1", "2", "3"} {
		c := cards.Eq(i)
		if id, _ := c.Attr("data-testid"); id != "rank-card-"+want {
			t.Errorf("card %d is %q, want rank-card-%s", i, id, want)
		}
	}
	c := byID(doc, "rank-card-0")
	for id, want := range map[string]string{
		"rank-id":             "0",
		"rank-running":        "12 / 256",
		"rank-waiting":        "3",
		"rank-waiting-tokens": "1,024 uncached tokens",
		"rank-kv-usage":       "42.1 %",
		"rank-kv-tokens":      "110,592 / 262,144 tokens",
		"rank-throughput":     "1,234.5 tok/s",
		"rank-cache-hit-rate": "87.0 %",
		"rank-utilization":    "50.0 %",
	} {
		if got := text(byID(c, id)); got != want {
			t.Errorf("%s = %q, want %q", id, got, want)
		}
	}
	if w, _ := byID(c, "rank-kv-bar").Attr("width"); w != "42.1" {
		t.Errorf("KV bar width = %q, want 42.1", w)
	}
	if got := text(byID(doc, "rank-card-3").Find(`[data-testid="rank-kv-usage"]`)); got != "99.9 %" {
		t.Errorf("rank 3 KV usage = %q", got)
	}

	if got := text(byID(doc, "report-status")); got != "HEALTHY" {
		t.Errorf("report-status = %q, want HEALTHY", got)
	}
	if got, _ := byID(doc, "report-status").Attr("data-status"); got != "healthy" {
		t.Errorf("report-status data-status = %q", got)
	}
	for id, want := range map[string]string{
		"report-age": "3 s ago", "report-sequence": "42", "routers-connected": "2",
		"worker-addr": "10.0.0.1:30000", "worker-type": "regular", "worker-model": "llama",
	} {
		if got := text(byID(doc, id)); got != want {
			t.Errorf("%s = %q, want %q", id, got, want)
		}
	}
	if _, hidden := byID(doc, "report-error").Attr("hidden"); !hidden {
		t.Error("report-error shown for a HEALTHY report")
	}
	if _, hidden := byID(doc, "rank-cards-empty").Attr("hidden"); !hidden {
		t.Error("rank-cards-empty shown although there are cards")
	}
}

func TestLivePageFrame(t *testing.T) {
	t.Parallel()
	doc := render(t, Live(livePage()))

	if got := doc.Find("head title").Text(); got != "Live · loadreporter" {
		t.Errorf("title = %q", got)
	}
	// The script is the live update; without it the page reloads itself.
	if src, _ := doc.Find("head script").Attr("src"); src != "/static/live.js?v=1" {
		t.Errorf("script src = %q", src)
	}
	noscript := doc.Find("head noscript").Text() + func() string { h, _ := doc.Find("head noscript").Html(); return h }()
	if !strings.Contains(noscript, `http-equiv="refresh"`) || !strings.Contains(noscript, `content="5"`) {
		t.Errorf("no <meta refresh> inside <noscript>: %q", noscript)
	}
	root := doc.Find("[data-live-root]")
	if v, _ := root.Attr("data-watch-interval-ms"); v != "1000" {
		t.Errorf("data-watch-interval-ms = %q", v)
	}
	if cur, _ := byID(doc, "nav-live").Attr("aria-current"); cur != "page" {
		t.Errorf("live nav entry not current: %q", cur)
	}
	for _, k := range []string{"nav-history", "nav-audit"} {
		if _, ok := byID(doc, k).Attr("aria-current"); ok {
			t.Errorf("%s marked current on the live page", k)
		}
	}
	// The script's card template is inert and never counted as a card.
	tpl := doc.Find("template#rank-card-template")
	if tpl.Length() != 1 {
		t.Fatalf("card templates = %d, want 1", tpl.Length())
	}
	if n := tpl.Find("[data-testid^=rank-card-]").Length(); n != 0 {
		t.Errorf("the card template carries a rank-card data-testid")
	}
	if n := tpl.Find(`[data-testid="rank-running"]`).Length(); n != 1 {
		t.Errorf("the card template lacks the fields the script fills")
	}
}

func TestLiveUnreachableShowsErrorAndNoCards(t *testing.T) {
	t.Parallel()
	p := livePage()
	p.Status, p.StatusClass = "UNREACHABLE", "unreachable"
	p.LastError = "load snapshot pull timed out"
	p.Ranks = nil
	doc := render(t, Live(p))

	if got := text(byID(doc, "report-status")); got != "UNREACHABLE" {
		t.Errorf("report-status = %q, want UNREACHABLE", got)
	}
	errEl := byID(doc, "report-error")
	if got := text(errEl); got != "load snapshot pull timed out" {
		t.Errorf("report-error = %q", got)
	}
	if _, hidden := errEl.Attr("hidden"); hidden {
		t.Error("report-error hidden on an UNREACHABLE report")
	}
	if n := byID(doc, "rank-cards").Children().Length(); n != 0 {
		t.Errorf("rank cards = %d, want none", n)
	}
	empty := byID(doc, "rank-cards-empty")
	if _, hidden := empty.Attr("hidden"); hidden || !strings.Contains(text(empty), "No rank data") {
		t.Errorf("rank-cards-empty = %q (hidden %t)", text(empty), hidden)
	}
}

func TestLiveBeforeTheFirstReport(t *testing.T) {
	t.Parallel()
	p := LivePage{Page: Page{Title: "Live"}, Status: "NO REPORT", StatusClass: "none", Worker: Worker{Addr: "w:1"}}
	doc := render(t, Live(p))
	if got := text(byID(doc, "report-status")); got != "NO REPORT" {
		t.Errorf("report-status = %q", got)
	}
	if got := text(byID(doc, "rank-cards-empty")); got != "No report yet." {
		t.Errorf("rank-cards-empty = %q", got)
	}
	if doc.Find("head noscript").Length() != 0 || doc.Find("head script").Length() != 0 {
		t.Error("refresh or script rendered although the page asked for neither")
	}
}

func historyPage() HistoryPage {
	ticks := []Tick{{Pos: "100", Label: "08:00"}, {Pos: "400", Label: "08:05"}}
	mk := func(id string) Chart {
		return Chart{
			ID: id, Title: id, Width: 960, Height: 240, Left: "56", Right: "944", Top: "12", Bottom: "212",
			XTicks: ticks, YTicks: []Tick{{Pos: "212", Label: "0 %"}, {Pos: "12", Label: "100 %"}},
			Series: []Series{
				{Rank: "0", Label: "rank 0", Color: "#0072b2", D: "M56 100 L60 90"},
				{Rank: "1", Label: "rank 1", Color: "#e69f00", D: "M56 150 L60 140"},
				{Rank: "2", Label: "rank 2", Color: "#009e73", D: "M56 200 h0"},
			},
		}
	}
	return HistoryPage{
		Page:    Page{Title: "History", Active: "history"},
		Windows: []WindowLink{{Key: "15m", Label: "Last 15 min", Href: "/history?window=15m", Active: true}, {Key: "1h", Label: "Last hour", Href: "/history?window=1h"}},
		Errors:  FieldErrors{}, HasWindow: true,
		Usage: mk("chart-token-usage"), Waiting: mk("chart-waiting"),
		Timeline: Timeline{Width: 960, Height: 44, Left: "56", PlotWidth: "888",
			Recorded: []Span{{X: "56", W: "800", Title: "recorded"}},
			Outages:  []Span{{X: "300", W: "20", Class: "unreachable", Title: "UNREACHABLE 08:03"}}},
		Outages: []OutageRow{{Start: "08:03", End: "08:04", Duration: "1 min", Statuses: "UNREACHABLE", Reports: "6", LastError: "boom", Class: "unreachable"}},
		Reports: ReportsTable{Rows: []ReportRow{{Time: "08:05", Sequence: "7", Status: "HEALTHY", StatusClass: "healthy"}}, NextHref: "/history?cursor=abc"},
	}
}

func TestHistoryChartHasOnePathPerRank(t *testing.T) {
	t.Parallel()
	doc := render(t, History(historyPage()))
	for _, id := range []string{"chart-token-usage", "chart-waiting"} {
		chart := byID(doc, id)
		if chart.Length() != 1 {
			t.Fatalf("%s: %d charts", id, chart.Length())
		}
		paths := chart.Find("svg path")
		if paths.Length() != 3 {
			t.Errorf("%s: %d paths, want one per rank (3)", id, paths.Length())
		}
		colors := map[string]bool{}
		paths.Each(func(i int, p *goquery.Selection) {
			c, _ := p.Attr("stroke")
			colors[c] = true
			if tid, _ := p.Attr("data-testid"); tid != "series-"+[]string{"0", "1", "2"}[i] {
				t.Errorf("%s: path %d is %q", id, i, tid)
			}
		})
		if len(colors) != 3 {
			t.Errorf("%s: %d colours for 3 ranks", id, len(colors))
		}
		if n := byID(chart, "chart-legend").Find("li").Length(); n != 3 {
			t.Errorf("%s: legend has %d entries", id, n)
		}
		if labels := chart.Find("text.xlabel").Length(); labels != 2 {
			t.Errorf("%s: %d x labels", id, labels)
		}
		if labels := chart.Find("text.ylabel").Length(); labels != 2 {
			t.Errorf("%s: %d y labels", id, labels)
		}
	}
	if n := byID(doc, "timeline-outage").Length(); n != 1 {
		t.Errorf("timeline outages = %d, want 1", n)
	}
	if n := byID(doc, "outage-row").Length(); n != 1 {
		t.Errorf("outage rows = %d", n)
	}
	if n := byID(doc, "report-row").Length(); n != 1 {
		t.Errorf("report rows = %d", n)
	}
	if href, _ := byID(doc, "next-page").Attr("href"); href != "/history?cursor=abc" {
		t.Errorf("next-page = %q", href)
	}
	if cur, _ := byID(doc, "window-15m").Attr("aria-current"); cur != "true" {
		t.Errorf("15m preset not marked current")
	}
}

func TestHistoryWithErrorsShowsOnlyTheForm(t *testing.T) {
	t.Parallel()
	p := historyPage()
	p.HasWindow = false
	p.Errors = FieldErrors{"since": `since: "x" is not a time`}
	doc := render(t, History(p))
	if got := text(byID(doc, "field-since").Find(`[data-testid="error-since"]`)); got != `since: "x" is not a time` {
		t.Errorf("since error = %q", got)
	}
	if byID(doc, "chart-token-usage").Length() != 0 || byID(doc, "reports-table").Length() != 0 {
		t.Error("charts or table rendered for a window that could not be resolved")
	}
}

func auditPage() AuditPage {
	return AuditPage{
		Page: Page{Title: "Audit", Active: "audit"},
		Form: AuditForm{
			Queries:  []Option{{Value: "outages", Label: "Outages", Selected: true}, {Value: "reports", Label: "Reports"}},
			Statuses: []Option{{Value: "", Label: "any", Selected: true}},
			Since:    "garbage", Worker: "w:1",
		},
		Errors: FieldErrors{"since": `since: "garbage" is not a time`, "threshold": "threshold must be within [0, 1]"},
	}
}

func TestAuditErrorsNextToTheirField(t *testing.T) {
	t.Parallel()
	doc := render(t, Audit(auditPage()))

	for field, want := range map[string]string{
		"since":     `since: "garbage" is not a time`,
		"threshold": "threshold must be within [0, 1]",
	} {
		f := byID(doc, "field-"+field)
		if got := text(byID(f, "error-"+field)); got != want {
			t.Errorf("error in field-%s = %q, want %q", field, got, want)
		}
		in := f.Find("#f-" + field)
		if v, _ := in.Attr("aria-invalid"); v != "true" {
			t.Errorf("%s input not aria-invalid", field)
		}
		if v, _ := in.Attr("aria-describedby"); v != "error-"+field {
			t.Errorf("%s input described by %q", field, v)
		}
	}
	if n := doc.Find(".field-error").Length(); n != 2 {
		t.Errorf("%d field errors on the page, want 2", n)
	}
	if _, ok := byID(doc, "field-until").Find("input").Attr("aria-invalid"); ok {
		t.Error("until marked invalid")
	}
	if v, _ := byID(doc, "field-since").Find("input").Attr("value"); v != "garbage" {
		t.Errorf("since keeps %q, want what was typed", v)
	}
	if sel, _ := byID(doc, "field-query").Find("option[selected]").Attr("value"); sel != "outages" {
		t.Errorf("selected query = %q", sel)
	}
	if byID(doc, "audit-result").Length() != 0 {
		t.Error("a result is shown without one")
	}
}

func TestAuditResultTable(t *testing.T) {
	t.Parallel()
	p := auditPage()
	p.Errors = nil
	p.Result = &ResultTable{
		Query: "outages", Columns: []string{"Worker", "Start"},
		Rows:    [][]Cell{{{Text: "w:1"}, {Text: "08:00"}}, {{Text: "w:2"}, {Text: "09:00"}}},
		Summary: "2 rows", Truncated: true,
	}
	p.CSVHref = "/audit.csv?query=outages"
	p.GeneralError = "history store unavailable"
	doc := render(t, Audit(p))

	if n := byID(doc, "result-row").Length(); n != 2 {
		t.Errorf("rows = %d", n)
	}
	if got := text(byID(doc, "audit-table").Find("th").First()); got != "Worker" {
		t.Errorf("first column = %q", got)
	}
	if href, _ := byID(doc, "csv-link").Attr("href"); href != "/audit.csv?query=outages" {
		t.Errorf("csv-link = %q", href)
	}
	if byID(doc, "audit-truncated").Length() != 1 {
		t.Error("truncation not shown")
	}
	if got := text(byID(doc, "form-error")); got != "history store unavailable" {
		t.Errorf("form-error = %q", got)
	}
}

// TestFleetPageFrame: a page served elsewhere (the fleet command's) wears
// the same frame with its own name and navigation; the worker's pages keep
// theirs. The fleet's rows and KV bars carry the data-testids fleet.js
// fills, and the controls it works stay hidden without it.
func TestFleetPageFrame(t *testing.T) {
	t.Parallel()
	nav := []NavItem{{Key: "fleet", Label: "Fleet", Href: "/"}, {Key: "loads", Label: "JSON", Href: "/v1/fleet/loads"}}
	p := FleetPage{
		Page:    Page{Title: "Fleet", Active: "fleet", StyleHref: "/static/style.css?v=1", ScriptHref: "/static/fleet.js?v=1", Brand: "loadreporter fleet", Nav: nav},
		Summary: FleetSummary{Fresh: "1 of 1 workers fresh", KVBarWidth: "40.0", KVLevel: "low"},
		Rows: []FleetRow{{Target: "a:1", Dashboard: "http://a:1/", State: "fresh", StateClass: "healthy", Model: "llama",
			KVBars: []KVBar{{Rank: "0", X: "1", Y: "10", W: "8", H: "10", Level: "low", Title: "rank 0: 50.0 %"}}}},
	}
	doc := render(t, Fleet(p))
	if got := doc.Find("header.site .brand").Text(); got != "loadreporter fleet" {
		t.Errorf("brand %q", got)
	}
	if n, cur := doc.Find("header.site nav a").Length(), byID(doc, "nav-fleet").AttrOr("aria-current", ""); n != 2 || cur != "page" ||
		byID(doc, "nav-history").Length() != 0 {
		t.Errorf("nav: %d entries, fleet current %q", n, cur)
	}
	row := byID(doc, "workers").Find(`[data-testid="worker"]`)
	if row.Length() != 1 || row.AttrOr("data-target", "") != "a:1" || text(byID(row, "model")) != "llama" ||
		byID(row, "rank").AttrOr("height", "") != "10" || text(byID(row, "rank").Find("title")) != "rank 0: 50.0 %" {
		t.Errorf("row: %d", row.Length())
	}
	if _, hidden := byID(doc, "fleet-controls").Attr("hidden"); !hidden {
		t.Error("the controls show without the script")
	}
	if doc.Find("[style], style").Length() != 0 {
		t.Error("an inline style: the page's policy allows none")
	}
	if live := render(t, Live(livePage())); live.Find("header.site .brand").Text() != "loadreporter" ||
		live.Find("header.site nav a").Length() != len(Nav) {
		t.Error("the worker's pages lost their frame")
	}
}

// TestLiveAgesAndSparklines: the status bar says how old the snapshot is
// beside the report's age, each card its rank's, the oldest of a STALE
// report marked; each card draws its sparklines, and the script's card
// template carries the same elements empty, for the script to fill.
func TestLiveAgesAndSparklines(t *testing.T) {
	t.Parallel()
	p := livePage()
	p.Status, p.StatusClass, p.LastError = "STALE", "stale", "load snapshot stale by 12000 ms"
	p.Age, p.SnapshotAge, p.SnapshotLagMs, p.SnapshotStale, p.SnapshotTitle = "just now", "12 s ago", "12000", true, "snapshot taken …"
	p.Ranks[0].Age, p.Ranks[0].LagMs, p.Ranks[0].AgeStale = "12 s ago", "12000", true
	p.Ranks[1].Age, p.Ranks[1].LagMs = "3 s ago", "3000"
	p.Ranks[0].SparkKV, p.Ranks[0].SparkWaiting, p.Ranks[0].SparkSpan, p.Ranks[0].SparkPeak = "M0 10 L100 5", "M0 19 L100 1", "last 2 min", "peak 7 waiting"
	p.Ranks[0].SparkPoints = "1795939200000,0.5000,3"
	p.ServerTimeUnixMs = "1795939201000"
	doc := render(t, Live(p))

	snap := byID(doc, "snapshot-age")
	if text(byID(doc, "report-age")) != "just now" || text(snap) != "12 s ago" || !snap.HasClass("stale") ||
		snap.AttrOr("data-lag-ms", "") != "12000" || snap.AttrOr("title", "") != "snapshot taken …" {
		t.Errorf("ages: report %q, snapshot %q (%s)", text(byID(doc, "report-age")), text(snap), snap.AttrOr("class", ""))
	}
	if got := byID(doc, "report-error").AttrOr("data-status", ""); got != "stale" {
		t.Errorf("report-error data-status = %q", got)
	}
	if got := doc.Find("[data-live-root]").AttrOr("data-server-time-unix-ms", ""); got != "1795939201000" {
		t.Errorf("data-server-time-unix-ms = %q", got)
	}
	c0, c1 := byID(doc, "rank-card-0"), byID(doc, "rank-card-1")
	if a := byID(c0, "rank-age"); text(a) != "12 s ago" || !a.HasClass("stale") || a.AttrOr("data-lag-ms", "") != "12000" {
		t.Errorf("rank 0 age %q (%s)", text(a), a.AttrOr("class", ""))
	}
	if a := byID(c1, "rank-age"); text(a) != "3 s ago" || a.HasClass("stale") {
		t.Errorf("rank 1 age %q (%s)", text(a), a.AttrOr("class", ""))
	}
	spark := byID(c0, "rank-spark")
	if byID(spark, "rank-spark-kv").AttrOr("d", "") != "M0 10 L100 5" || byID(spark, "rank-spark-waiting").AttrOr("d", "") != "M0 19 L100 1" ||
		text(byID(spark, "rank-spark-span")) != "last 2 min" || text(byID(spark, "rank-spark-peak")) != "peak 7 waiting" ||
		spark.AttrOr("data-points", "") != "1795939200000,0.5000,3" {
		h, _ := spark.Html()
		t.Errorf("rank 0 sparkline:\n%s", h)
	}
	tpl := doc.Find("template#rank-card-template")
	for _, id := range []string{"rank-age", "rank-spark", "rank-spark-kv", "rank-spark-waiting", "rank-spark-span", "rank-spark-peak"} {
		if tpl.Find(`[data-testid="`+id+`"]`).Length() != 1 {
			t.Errorf("the card template lacks %s", id)
		}
	}
	if doc.Find("[style], style").Length() != 0 {
		t.Error("an inline style: the page's policy allows none")
	}
}

// TestHistoryPictures: outages shaded behind a chart, a threshold drawn
// and in the legend, and a chart drawn as small multiples.
func TestHistoryPictures(t *testing.T) {
	t.Parallel()
	p := historyPage()
	p.Usage.Bands = []Span{{X: "300", W: "20", Class: "unreachable", Title: "UNREACHABLE 08:03"}}
	p.Usage.PlotHeight = "200"
	p.Imbalance = p.Usage
	p.Imbalance.ID, p.Imbalance.Series = "chart-imbalance", []Series{{Rank: "spread", Label: "spread", Color: "#000", D: "M56 100 L60 90"}}
	p.Imbalance.Threshold = &Threshold{Pos: "172", Label: "threshold 20.0 %", Above: "160"}
	p.ImbalanceHref = "/audit?query=imbalance"
	panel := p.Waiting
	panel.ID, panel.Title, panel.Series = "waiting-rank-5", "rank 5", panel.Series[:1]
	p.WaitingPanels, p.WaitingNote = []Chart{panel, panel}, "Ranks 0 to 63 of 70 are drawn"
	doc := render(t, History(p))

	band := byID(byID(doc, "chart-token-usage"), "chart-outage")
	if band.Length() != 1 || !band.HasClass("unreachable") || band.AttrOr("y", "") != "12" || band.AttrOr("height", "") != "200" {
		t.Errorf("usage chart bands: %d", band.Length())
	}
	im := byID(doc, "chart-imbalance")
	if byID(im, "chart-threshold").AttrOr("data-y", "") != "172" || text(byID(im, "chart-threshold-label")) != "threshold 20.0 %" ||
		im.Find("rect.over").AttrOr("height", "") != "160" || byID(im, "series-spread").Length() != 1 {
		t.Error("imbalance chart: threshold, its shading or the spread missing")
	}
	if href := byID(doc, "imbalance-link").AttrOr("href", ""); href != "/audit?query=imbalance" {
		t.Errorf("imbalance-link = %q", href)
	}
	w := byID(doc, "chart-waiting")
	if n := byID(w, "waiting-rank-5").Length(); n != 2 || w.Find("svg").Length() != 2 || text(byID(w, "panels-note")) != p.WaitingNote {
		t.Errorf("small multiples: %d panels", n)
	}
	if byID(byID(doc, "chart-token-usage"), "chart-threshold").Length() != 0 {
		t.Error("a threshold on a chart that has none")
	}
}

// TestAuditRankBars: rank-stats drawn as bars above the table.
func TestAuditRankBars(t *testing.T) {
	t.Parallel()
	p := auditPage()
	p.Errors = nil
	p.Result = &ResultTable{Query: "rank-stats", Columns: []string{"Rank"}, Rows: [][]Cell{{{Text: "0"}}}}
	p.Bars = &RankBars{Width: 960, Height: 70, Rows: []RankBarRow{
		{Rank: "0", Worker: "w:1", Label: "rank 0", AvgW: "100.0", P95W: "200.0", WaitW: "50.0", Level: "mid", KVText: "avg 25.0 % · p95 50.0 %", WaitText: "3"},
	}}
	doc := render(t, Audit(p))
	row := byID(byID(doc, "rank-bars"), "rank-bar")
	if row.Length() != 1 || row.AttrOr("data-rank", "") != "0" || byID(row, "rank-bar-avg").AttrOr("width", "") != "100.0" ||
		!byID(row, "rank-bar-avg").HasClass("level-mid") || byID(row, "rank-bar-p95").AttrOr("width", "") != "200.0" ||
		byID(row, "rank-bar-waiting").AttrOr("width", "") != "50.0" || !strings.Contains(text(row), "avg 25.0 % · p95 50.0 %") {
		h, _ := row.Html()
		t.Errorf("bar row:\n%s", h)
	}
	if byID(doc, "audit-table").Length() != 1 {
		t.Error("the table went with the bars")
	}
}
