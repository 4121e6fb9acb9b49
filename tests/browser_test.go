package tests

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"
	"github.com/chromedp/cdproto/fetch"
	"github.com/chromedp/chromedp"

	"github.com/loadreporter/loadreporter/cmd/loadreporter/app"
	"github.com/loadreporter/loadreporter/domain"
	"github.com/loadreporter/loadreporter/domain/audit"
	"github.com/loadreporter/loadreporter/ports"
)

// The dashboard in a real headless Chromium (issue 5): the live page
// follows the fire loop through WatchService/Watch, the history page draws
// its charts and table, the audit page lists an outage and links its CSV.
// Pages are read through their data-testid attributes only.

// liveStateJS reads the live page's state (see web/doc.go for the
// data-testid attributes).
const liveStateJS = `(() => {` + pageJS + `
	const cards = [...document.querySelectorAll('[data-testid^="rank-card-"]')];
	const err = q("report-error");
	return {
		indicator: q("live-indicator")?.dataset.state ?? "",
		status: q("report-status")?.dataset.status ?? "",
		statusText: text(q("report-status")),
		sequence: text(q("report-sequence")),
		error: err && !err.hidden ? text(err) : "",
		ranks: cards.map((c) => c.dataset.rank),
		values: cards.map((c) => ["rank-running", "rank-waiting", "rank-kv-usage", "rank-kv-tokens",
			"rank-throughput", "rank-cache-hit-rate", "rank-utilization"].map((id) => text(q(id, c))).join(" | ")),
	};
})()`

// liveState is what liveStateJS returns.
type liveState struct {
	Indicator  string   `json:"indicator"`
	Status     string   `json:"status"`
	StatusText string   `json:"statusText"`
	Sequence   string   `json:"sequence"`
	Error      string   `json:"error"`
	Ranks      []string `json:"ranks"`
	Values     []string `json:"values"`
}

// livePredicate is a JavaScript predicate over the live page's state s.
func livePredicate(cond string) string {
	return "((s) => " + cond + ")(" + liveStateJS + ")"
}

// rankIDs are the data-rank values of n ranks, in order.
func rankIDs(n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = strconv.Itoa(i)
	}
	return ids
}

// TestBrowserLivePage: the live page goes live over Watch, shows one card
// per rank of the engine, and its numbers change with each new report.
func TestBrowserLivePage(t *testing.T) {
	t.Parallel()
	tab := newBrowser(t)
	for _, tc := range []struct {
		name   string
		engine ports.SnapshotSource // nil: the simulated engine
		ranks  int
	}{
		{"sim engine", nil, 4},
		{"eight ranks", &countingEngine{ranks: 8}, 8},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := startMain(t, screenshotConfig(testConfig()), tc.engine)
			navigate(t, tab, pageURL(m.Addr(), "/"))
			waitJS(t, tab, 5*time.Second, fmt.Sprintf("%d live rank cards", tc.ranks),
				livePredicate(fmt.Sprintf(`s.indicator === "live" && s.status === "healthy" && s.ranks.length === %d`, tc.ranks)))
			first := evalJS[liveState](t, tab, liveStateJS)
			if !slices.Equal(first.Ranks, rankIDs(tc.ranks)) || first.StatusText != "HEALTHY" || first.Error != "" {
				t.Fatalf("live page: %+v", first)
			}

			// The next reports: a new sequence and new numbers on the cards.
			values, _ := json.Marshal(first.Values)
			waitJS(t, tab, 5*time.Second, "a new report with new numbers", livePredicate(fmt.Sprintf(
				`s.sequence !== %s && JSON.stringify(s.values) !== JSON.stringify(%s)`, jsQuote(first.Sequence), values)))
			second := evalJS[liveState](t, tab, liveStateJS)
			s1, err1 := strconv.ParseUint(first.Sequence, 10, 64)
			s2, err2 := strconv.ParseUint(second.Sequence, 10, 64)
			if err1 != nil || err2 != nil || s2 <= s1 {
				t.Fatalf("report-sequence went from %q to %q", first.Sequence, second.Sequence)
			}
			if slices.Equal(first.Values, second.Values) || !slices.Equal(second.Ranks, first.Ranks) ||
				second.Indicator != "live" {
				t.Fatalf("after a new report:\nfirst  %+v\nsecond %+v", first, second)
			}
			t.Logf("report #%d → #%d; rank 0: %q → %q", s1, s2, first.Values[0], second.Values[0])
			saveScreenshot(t, tab, "live")
			if tc.engine == nil {
				if *updateScreenshots {
					// Sparklines worth showing: 20 s of the rank cards' 30.
					hold(t, testCtx(t, 30*time.Second), 20*time.Second)
				}
				saveReadmeScreenshot(t, tab, "live")
			}
		})
	}
}

// TestBrowserLivePageTurnsUnreachable: an engine failure shows on the page
// within two report intervals of the page's Watch (1 s), and its recovery
// too. It runs alone (no t.Parallel): it times the page to 2.5 s.
func TestBrowserLivePageTurnsUnreachable(t *testing.T) {
	m := startMain(t, testConfig(), nil)
	sim := m.Engine().Sim
	tab := newBrowser(t)
	navigate(t, tab, pageURL(m.Addr(), "/"))
	waitJS(t, tab, 5*time.Second, "4 healthy live rank cards",
		livePredicate(`s.indicator === "live" && s.status === "healthy" && s.ranks.length === 4`))

	// Two intervals of the page's Watch, plus room for a loaded machine.
	const bound = 2500 * time.Millisecond
	switched := time.Now()
	if err := sim.SetMode("error"); err != nil {
		t.Fatal(err)
	}
	waitJS(t, tab, bound-time.Since(switched), "UNREACHABLE within two report intervals", livePredicate(
		`s.status === "unreachable" && s.statusText === "UNREACHABLE" && s.ranks.length === 0 && s.error.includes("simulated engine error")`))
	t.Logf("UNREACHABLE on the page %s after the switch", time.Since(switched).Round(time.Millisecond))
	got := evalJS[liveState](t, tab, liveStateJS)
	empty := evalJS[string](t, tab, `(() => { const e = document.querySelector('[data-testid="rank-cards-empty"]'); return e && !e.hidden ? e.textContent.trim() : ""; })()`)
	if got.Indicator != "live" || empty == "" {
		t.Fatalf("while unreachable: %+v, rank-cards-empty %q", got, empty)
	}
	saveScreenshot(t, tab, "unreachable")

	switched = time.Now()
	if err := sim.SetMode("normal"); err != nil {
		t.Fatal(err)
	}
	waitJS(t, tab, bound-time.Since(switched), "HEALTHY again within two report intervals", livePredicate(
		`s.status === "healthy" && s.statusText === "HEALTHY" && s.ranks.length === 4 && s.error === ""`))
	t.Logf("HEALTHY on the page %s after the switch back", time.Since(switched).Round(time.Millisecond))
	saveScreenshot(t, tab, "recovered")
}

// historyConfig records a report every 200 ms.
func historyConfig() app.Config {
	c := testConfig()
	c.History.Interval = 200 * time.Millisecond
	return screenshotConfig(c)
}

// screenshotConfig is c, except that while the README's screenshots are
// being made the worker is called what `loadreporter serve` calls it by
// default (its --listen, 127.0.0.1:8080), not the tests' 127.0.0.1:0.
func screenshotConfig(c app.Config) app.Config {
	if *updateScreenshots {
		c.Worker.Addr = "127.0.0.1:8080"
	}
	return c
}

// waitLatest waits until the fire loop's latest report has status want.
func waitLatest(t *testing.T, ctx context.Context, m *app.Main, want domain.Status) {
	t.Helper()
	eventually(t, ctx, "a "+want.String()+" report", func() bool {
		r := m.FireLoop().Latest()
		return r != nil && r.Status == want
	})
}

// outageEpisode switches the simulated engine into error mode until a
// report is UNREACHABLE, then back until one is HEALTHY, and waits until
// the history holds the whole outage.
func outageEpisode(t *testing.T, ctx context.Context, m *app.Main, since time.Time, hold time.Duration) {
	t.Helper()
	sim := m.Engine().Sim
	waitLatest(t, ctx, m, domain.StatusHealthy)
	if err := sim.SetMode("error"); err != nil {
		t.Fatal(err)
	}
	waitLatest(t, ctx, m, domain.StatusUnreachable)
	if hold > 0 {
		timer := time.NewTimer(hold)
		select {
		case <-timer.C:
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		}
	}
	if err := sim.SetMode("normal"); err != nil {
		t.Fatal(err)
	}
	waitLatest(t, ctx, m, domain.StatusHealthy)
	eventually(t, ctx, "the outage recorded in the history", func() bool {
		res, err := m.History().Query.Outages(ctx, audit.OutagesQuery{Window: audit.Window{Since: since, Until: time.Now().Add(time.Minute)}})
		return err == nil && len(res.Outages) == 1 && !res.Outages[0].Ongoing
	})
}

// historyState reads the history page's charts, timeline and table.
const historyStateJS = `(() => {
	const series = (id) => [...document.querySelectorAll('[data-testid="' + id + '"] path[data-testid^="series-"]')]
		.map((p) => ({ rank: p.dataset.rank, testid: p.dataset.testid, d: p.getAttribute("d") || "" }));
	const count = (sel) => document.querySelectorAll(sel).length;
	return {
		usage: series("chart-token-usage"),
		waiting: series("chart-waiting"),
		timeline: count('[data-testid="status-timeline"] > svg'),
		recorded: count('[data-testid="timeline-recorded"]'),
		outages: count('[data-testid="timeline-outage"]'),
		rows: count('[data-testid="reports-table"] [data-testid="report-row"]'),
		statuses: [...document.querySelectorAll('[data-testid="report-row"] .status')].map((s) => s.textContent.trim()),
	};
})()`

type historySeries struct {
	Rank   string `json:"rank"`
	TestID string `json:"testid"`
	D      string `json:"d"`
}

type historyState struct {
	Usage    []historySeries `json:"usage"`
	Waiting  []historySeries `json:"waiting"`
	Timeline int             `json:"timeline"`
	Recorded int             `json:"recorded"`
	Outages  int             `json:"outages"`
	Rows     int             `json:"rows"`
	Statuses []string        `json:"statuses"`
}

// TestBrowserHistoryPage: the history page draws one line per rank in
// both charts, the status timeline and the table of recorded reports.
func TestBrowserHistoryPage(t *testing.T) {
	t.Parallel()
	boot := time.Now()
	m := startMain(t, historyConfig(), nil)
	ctx := testCtx(t, 30*time.Second)
	if *updateScreenshots {
		// A picture worth showing: a minute of load around a short outage.
		hold := func(d time.Duration) {
			timer := time.NewTimer(d)
			defer timer.Stop()
			select {
			case <-timer.C:
			case <-ctx.Done():
				t.Fatal(ctx.Err())
			}
		}
		hold(8 * time.Second)
		outageEpisode(t, ctx, m, boot, 2*time.Second)
		hold(5 * time.Second)
	}
	const atLeast = 5
	eventually(t, ctx, fmt.Sprintf("%d recorded reports", atLeast), func() bool {
		page, err := m.History().Query.Reports(ctx, audit.ReportsQuery{
			Window: audit.Window{Since: boot.Add(-time.Minute), Until: time.Now().Add(time.Minute)}})
		return err == nil && len(page.Reports) >= atLeast
	})

	tab := newBrowser(t)
	path := "/history"
	if *updateScreenshots {
		// The window of this test only, so the lines fill the chart.
		path += "?" + url.Values{"since": {boot.Add(-time.Second).UTC().Format(time.RFC3339)}}.Encode()
	}
	navigate(t, tab, pageURL(m.Addr(), path))
	waitJS(t, tab, 5*time.Second, "the charts", `document.querySelectorAll('[data-testid="chart-token-usage"] path[data-testid^="series-"]').length > 0`)
	got := evalJS[historyState](t, tab, historyStateJS)
	for name, series := range map[string][]historySeries{"chart-token-usage": got.Usage, "chart-waiting": got.Waiting} {
		var ranks []string
		for _, s := range series {
			ranks = append(ranks, s.Rank)
			if s.TestID != "series-"+s.Rank || !strings.HasPrefix(s.D, "M") {
				t.Errorf("%s: series %+v", name, s)
			}
		}
		if !slices.Equal(ranks, rankIDs(4)) {
			t.Errorf("%s: series of ranks %v, want one per rank 0..3", name, ranks)
		}
	}
	if got.Timeline != 1 || got.Recorded < 1 || got.Rows < atLeast || !slices.Contains(got.Statuses, "HEALTHY") {
		t.Errorf("history page: timeline %d, recorded spans %d, %d report rows (want ≥ %d) with statuses %v",
			got.Timeline, got.Recorded, got.Rows, atLeast, got.Statuses)
	}
	// The navigation links the pages.
	for _, nav := range []string{"nav-live", "nav-history", "nav-audit"} {
		href := evalJS[string](t, tab, `document.querySelector('`+testid(nav)+`')?.getAttribute("href") ?? ""`)
		if href == "" {
			t.Errorf("%s: no link", nav)
		}
	}
	saveScreenshot(t, tab, "history")
	saveReadmeScreenshot(t, tab, "history")
}

// TestBrowserAuditPage: after an outage of the simulated engine, the
// audit form's outages query lists it, and its CSV link downloads it.
func TestBrowserAuditPage(t *testing.T) {
	t.Parallel()
	boot := time.Now()
	m := startMain(t, historyConfig(), nil)
	ctx := testCtx(t, 30*time.Second)
	hold := time.Duration(0)
	if *updateScreenshots {
		hold = 2 * time.Second // an outage of a few reports
	}
	outageEpisode(t, ctx, m, boot, hold)

	tab := newBrowser(t)
	runAuditForm(t, tab, m.Addr(), "outages", "result-row")
	rows := evalJS[[]string](t, tab, `[...document.querySelectorAll('[data-testid="audit-table"] [data-testid="result-row"]')].map((r) => r.textContent)`)
	if len(rows) < 1 || !strings.Contains(rows[0], "UNREACHABLE") || !strings.Contains(rows[0], "simulated engine error") {
		failWithScreenshot(t, tab, "outage rows: %q", rows)
	}
	location := evalJS[string](t, tab, `location.href`)
	if u, err := url.Parse(location); err != nil || u.Path != "/audit" || u.Query().Get("query") != "outages" || u.Query().Get("last") != "10m" {
		t.Errorf("the form ran %s", location)
	}
	saveScreenshot(t, tab, "audit")
	saveReadmeScreenshot(t, tab, "audit")

	// The CSV link downloads the same rows.
	href := evalJS[string](t, tab, `document.querySelector('`+testid("csv-link")+`')?.href ?? ""`)
	if !strings.HasPrefix(href, pageURL(m.Addr(), "/audit.csv?")) {
		t.Fatalf("csv-link href %q", href)
	}
	resp := getWithin(t, ctx, href)
	defer resp.Body.Close()
	var lines []string
	for sc := bufio.NewScanner(resp.Body); sc.Scan(); {
		lines = append(lines, sc.Text())
	}
	const header = "worker_addr,start,end,ongoing,duration_ms,statuses,reports,last_error"
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/csv") ||
		len(lines) != 1+len(rows) || lines[0] != header || !strings.Contains(lines[1], "UNREACHABLE") {
		t.Fatalf("%s: %s %q, CSV:\n%s", href, resp.Status, resp.Header.Get("Content-Type"), strings.Join(lines, "\n"))
	}

	// A wrong field is named next to it.
	navigate(t, tab, pageURL(m.Addr(), "/audit?query=outages&last=banana"))
	msg := evalJS[string](t, tab, `(() => {
		const e = document.querySelector('[data-testid="field-last"] [data-testid="error-last"]');
		return e && document.querySelector("#f-last").getAttribute("aria-invalid") === "true" ? e.textContent : "";
	})()`)
	if !strings.Contains(msg, "banana") {
		failWithScreenshot(t, tab, "error-last: %q", msg)
	}
}

// TestBrowserLivePageWithoutJavaScript: the server renders the latest
// report into the live page, so a client without JavaScript sees the
// rank cards too.
func TestBrowserLivePageWithoutJavaScript(t *testing.T) {
	t.Parallel()
	m := startMain(t, testConfig(), nil)
	ctx := testCtx(t, 10*time.Second)
	waitLatest(t, ctx, m, domain.StatusHealthy)
	resp := getWithin(t, ctx, pageURL(m.Addr(), "/"))
	defer resp.Body.Close()
	doc, err := goquery.NewDocumentFromReader(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var ranks []string
	doc.Find(`[data-testid^="rank-card-"]`).Each(func(_ int, s *goquery.Selection) {
		ranks = append(ranks, s.AttrOr("data-rank", "?"))
	})
	status := doc.Find(testid("report-status"))
	// The reload that keeps such a page current is in <noscript>, which
	// the HTML parser reads as text (as a browser with JavaScript on does).
	if resp.StatusCode != http.StatusOK || !slices.Equal(ranks, rankIDs(4)) ||
		status.AttrOr("data-status", "") != "healthy" || strings.TrimSpace(status.Text()) != "HEALTHY" ||
		doc.Find(testid("live-indicator")).AttrOr("data-state", "") != "off" ||
		!strings.Contains(doc.Find("head noscript").Text(), `http-equiv="refresh"`) {
		html, _ := doc.Html()
		t.Fatalf("%s: rank cards %v, status %q (%s):\n%s", resp.Status, ranks, status.Text(), status.AttrOr("data-status", ""), html)
	}
}

// TestBrowserLivePageBehindAToken: with --auth-token, the browser is
// challenged for Basic authentication; the user answers once with the
// token as the password, and the page loads and goes live: its script's
// Watch stream carries the same credentials, which the browser keeps for
// the origin.
func TestBrowserLivePageBehindAToken(t *testing.T) {
	t.Parallel()
	c := testConfig()
	c.Security.AuthToken = "s3cret-token"
	m := startMain(t, c, nil)
	tab := newBrowser(t)
	// The user at the browser's prompt: devtools pauses every request
	// (let through as is) and hands each challenge here.
	var challenges atomic.Int32
	err := chromedp.Listen(tab, func(ev any) {
		switch ev := ev.(type) {
		case *fetch.EventRequestPaused:
			go func() {
				_, _ = chromedp.Call(tab, fetch.ContinueRequest, fetch.ContinueRequestParams{RequestID: ev.RequestID})
			}()
		case *fetch.EventAuthRequired:
			challenges.Add(1)
			go func() {
				_, _ = chromedp.Call(tab, fetch.ContinueWithAuth, fetch.ContinueWithAuthParams{
					RequestID: ev.RequestID,
					AuthChallengeResponse: &fetch.AuthChallengeResponse{
						Response: fetch.AuthChallengeResponseResponseProvideCredentials,
						Username: "operator", Password: c.Security.AuthToken,
					},
				})
			}()
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	handleAuth := true
	if err := within(tab, 5*time.Second, func(ctx context.Context) error {
		_, err := chromedp.Call(ctx, fetch.Enable, fetch.EnableParams{HandleAuthRequests: &handleAuth})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	navigate(t, tab, pageURL(m.Addr(), "/"))
	waitJS(t, tab, 5*time.Second, "4 healthy live rank cards behind the token",
		livePredicate(`s.indicator === "live" && s.status === "healthy" && s.ranks.length === 4`))
	if n := challenges.Load(); n < 1 {
		t.Fatalf("the page loaded without asking for credentials (%d challenges)", n)
	}
}
