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
