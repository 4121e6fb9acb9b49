package tests

import (
	"context"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"

	"github.com/loadreporter/loadreporter/domain"
	"github.com/loadreporter/loadreporter/domain/audit"
)

// The dashboard's pictures in a real headless Chromium (issue 29, items
// 17 and 19): a STALE report says how old its numbers are, the rank cards
// draw their last minutes, the history page shades outages and draws the
// imbalance and small multiples, the audit page draws rank-stats as bars.

// agesJS reads the live page's ages and its last_error box's colours
// against the status pills'.
const agesJS = `(() => {` + pageJS + `
	const bg = (el) => el ? getComputedStyle(el).backgroundColor : "";
	const pill = (cls) => { const s = document.createElement("span"); s.className = "status status-" + cls; document.body.append(s); const c = bg(s); s.remove(); return c; };
	const err = q("report-error");
	const cards = [...document.querySelectorAll('[data-testid^="rank-card-"]')];
	return {
		status: q("report-status")?.dataset.status ?? "",
		reportAge: text(q("report-age")),
		snapshotAge: text(q("snapshot-age")),
		snapshotClass: q("snapshot-age")?.className ?? "",
		error: err && !err.hidden ? text(err) : "",
		errorBg: bg(err), staleBg: pill("stale"), unreachableBg: pill("unreachable"),
		rankAges: cards.map((c) => text(q("rank-age", c))),
		sparks: cards.map((c) => q("rank-spark-kv", c)?.getAttribute("d") ?? ""),
		waits: cards.map((c) => q("rank-spark-waiting", c)?.getAttribute("d") ?? ""),
	};
})()`

type agesState struct {
	Status        string   `json:"status"`
	ReportAge     string   `json:"reportAge"`
	SnapshotAge   string   `json:"snapshotAge"`
	SnapshotClass string   `json:"snapshotClass"`
	Error         string   `json:"error"`
	ErrorBg       string   `json:"errorBg"`
	StaleBg       string   `json:"staleBg"`
	UnreachableBg string   `json:"unreachableBg"`
	RankAges      []string `json:"rankAges"`
	Sparks        []string `json:"sparks"`
	Waits         []string `json:"waits"`
}

var secondsAgo = regexp.MustCompile(`^(\d+) s ago$`)

// agoSeconds reads "12 s ago" as 12; -1 for anything else.
func agoSeconds(s string) int {
	m := secondsAgo.FindStringSubmatch(s)
	if m == nil {
		return -1
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// points counts the points of an SVG path (its M and L commands).
func points(d string) int { return strings.Count(d, "M") + strings.Count(d, "L") }

// TestBrowserLivePageStale: when the engine's snapshots stop advancing,
// the page says the report is new but its numbers are old: the snapshot's
// age beside the report's, each rank's on its card, ticking between
// reports, in an amber box (the STALE pill's colour; UNREACHABLE keeps
// red). The sparklines go on drawing each report.
func TestBrowserLivePageStale(t *testing.T) {
	t.Parallel()
	c := historyConfig()
	c.Fire.StaleAfter = time.Second
	m := startMain(t, c, nil)
	ctx := testCtx(t, 40*time.Second)
	waitLatest(t, ctx, m, domain.StatusHealthy)
	// A few seconds of history, so the first paint draws sparklines.
	hold(t, ctx, 6*time.Second)

	// Without a script the page draws them from the history.
	code, body := httpGet(t, pageURL(m.Addr(), "/"))
	doc, err := goquery.NewDocumentFromReader(strings.NewReader(body))
	if err != nil || code != 200 {
		t.Fatalf("GET /: %d %v", code, err)
	}
	doc.Find(`[data-testid^="rank-card-"]`).Each(func(i int, c *goquery.Selection) {
		d := c.Find(testid("rank-spark-kv")).AttrOr("d", "")
		if n := points(d); n < 2 || c.Find(testid("rank-spark")).AttrOr("data-points", "") == "" {
			t.Errorf("server-rendered rank %d: sparkline %q (%d points), want the history's", i, d, n)
		}
	})
	if got := strings.TrimSpace(doc.Find(testid("snapshot-age")).Text()); got != "just now" {
		t.Errorf("server-rendered snapshot age %q", got)
	}

	tab := newBrowser(t)
	navigate(t, tab, pageURL(m.Addr(), "/"))
	waitJS(t, tab, 5*time.Second, "4 healthy live rank cards",
		livePredicate(`s.indicator === "live" && s.status === "healthy" && s.ranks.length === 4`))
	healthy := evalJS[agesState](t, tab, agesJS)
	if healthy.SnapshotAge != "just now" || len(healthy.RankAges) != 4 || healthy.RankAges[0] != "just now" || healthy.Error != "" {
		t.Fatalf("healthy: %+v", healthy)
	}
	for i, d := range healthy.Sparks {
		if points(d) < 2 || points(healthy.Waits[i]) != points(d) {
			t.Errorf("rank %d: sparkline %q / %q, want the history's points and the live ones", i, d, healthy.Waits[i])
		}
	}

	if err := m.Engine().Sim.SetMode("stall"); err != nil {
		t.Fatal(err)
	}
	waitJS(t, tab, 5*time.Second, "STALE", livePredicate(`s.status === "stale" && s.statusText === "STALE"`))
	stale := evalJS[agesState](t, tab, agesJS)
	first := agoSeconds(stale.SnapshotAge)
	if first < 1 || !strings.Contains(stale.SnapshotClass, "stale") || !strings.HasPrefix(stale.Error, "load snapshot stale by ") {
		t.Fatalf("STALE: %+v; want the snapshot at least 1 s old (--stale-after), marked stale", stale)
	}
	if agoSeconds(stale.ReportAge) > 1 && stale.ReportAge != "just now" {
		t.Errorf("STALE: report age %q, want the report itself new", stale.ReportAge)
	}
	if stale.ErrorBg != stale.StaleBg || stale.ErrorBg == stale.UnreachableBg {
		t.Errorf("STALE: last_error box %s, want the STALE pill's %s (UNREACHABLE's is %s)", stale.ErrorBg, stale.StaleBg, stale.UnreachableBg)
	}
	for i, a := range stale.RankAges {
		if agoSeconds(a) < 1 {
			t.Errorf("STALE: rank %d's age %q, want its frozen snapshot's", i, a)
		}
	}
	// The ages tick on: a second later the snapshot is a second older.
	waitJS(t, tab, 3*time.Second, "the snapshot's age ticking", fmt.Sprintf(
		`((s) => { const m = /^(\d+) s ago$/.exec(s.snapshotAge); return m && Number(m[1]) > %d; })(%s)`, first, agesJS))
	after := evalJS[agesState](t, tab, agesJS)
	for i := range after.Sparks {
		if points(after.Sparks[i]) <= points(healthy.Sparks[i]) {
			t.Errorf("rank %d: the sparkline did not grow with the reports: %d → %d points", i, points(healthy.Sparks[i]), points(after.Sparks[i]))
		}
	}
	t.Logf("STALE: report %q, snapshot %q → %q, ranks %v, box %s", stale.ReportAge, stale.SnapshotAge, after.SnapshotAge, after.RankAges, after.ErrorBg)
	saveScreenshot(t, tab, "live-stale")
	saveElementScreenshot(t, tab, testid("rank-card-0"), "live-stale-card")

	// UNREACHABLE keeps the red box, and no snapshot age.
	if err := m.Engine().Sim.SetMode("error"); err != nil {
		t.Fatal(err)
	}
	waitJS(t, tab, 5*time.Second, "UNREACHABLE", livePredicate(`s.status === "unreachable"`))
	down := evalJS[agesState](t, tab, agesJS)
	if down.ErrorBg != down.UnreachableBg || down.SnapshotAge != "—" {
		t.Errorf("UNREACHABLE: box %s (want %s), snapshot age %q (want —)", down.ErrorBg, down.UnreachableBg, down.SnapshotAge)
	}
}

// TestBrowserHistoryPictures: with eight ranks and an outage, the history
// page shades the outage behind its charts, draws the spread across ranks
// with the threshold, and the waiting chart as one small chart per rank.
func TestBrowserHistoryPictures(t *testing.T) {
	t.Parallel()
	boot := time.Now()
	c := historyConfig()
	c.Source.DPSize = 8
	m := startMain(t, c, nil)
	ctx := testCtx(t, 40*time.Second)
	hold(t, ctx, 4*time.Second)
	outageEpisode(t, ctx, m, boot, 2*time.Second)
	hold(t, ctx, 3*time.Second)

	tab := newBrowser(t)
	path := "/history?" + url.Values{"since": {boot.Add(-time.Second).UTC().Format(time.RFC3339)}}.Encode()
	navigate(t, tab, pageURL(m.Addr(), path))
	type pictures struct {
		UsageBands  int      `json:"usageBands"`
		BandClasses []string `json:"bandClasses"`
		Spread      string   `json:"spread"`
		Threshold   string   `json:"threshold"`
		Panels      []string `json:"panels"`
		PanelPaths  int      `json:"panelPaths"`
		Link        string   `json:"link"`
	}
	got := evalJS[pictures](t, tab, `(() => {
		const q = (sel) => document.querySelector(sel);
		const all = (sel) => [...document.querySelectorAll(sel)];
		return {
			usageBands: all('[data-testid="chart-token-usage"] [data-testid="chart-outage"]').length,
			bandClasses: all('[data-testid="chart-token-usage"] [data-testid="chart-outage"]').map((b) => b.getAttribute("class")),
			spread: q('[data-testid="chart-imbalance"] [data-testid="series-spread"]')?.getAttribute("d") ?? "",
			threshold: q('[data-testid="chart-imbalance"] [data-testid="chart-threshold"]') ? q('[data-testid="chart-imbalance"] [data-testid="chart-threshold-label"]')?.textContent.trim() ?? "" : "",
			panels: all('[data-testid="chart-waiting"] [data-testid^="waiting-rank-"]').map((p) => p.dataset.testid),
			panelPaths: all('[data-testid="chart-waiting"] [data-testid^="waiting-rank-"] path[data-testid^="series-"]').length,
			link: q('[data-testid="imbalance-link"]')?.getAttribute("href") ?? "",
		};
	})()`)
	var want []string
	for r := range 8 {
		want = append(want, fmt.Sprintf("waiting-rank-%d", r))
	}
	if got.UsageBands != 1 || !slices.Equal(got.BandClasses, []string{"band unreachable"}) {
		t.Errorf("outage bands behind the usage chart: %d %v, want one unreachable", got.UsageBands, got.BandClasses)
	}
	if !strings.HasPrefix(got.Spread, "M") || got.Threshold != "threshold 20.0 %" {
		t.Errorf("imbalance chart: spread %q, threshold %q", got.Spread, got.Threshold)
	}
	if !slices.Equal(got.Panels, want) || got.PanelPaths != 8 {
		t.Errorf("waiting small multiples: %v with %d lines, want one per rank 0..7", got.Panels, got.PanelPaths)
	}
	if u, err := url.Parse(got.Link); err != nil || u.Path != "/audit" || u.Query().Get("query") != "imbalance" {
		t.Errorf("imbalance link %q", got.Link)
	}
	saveScreenshot(t, tab, "history-pictures")
	for _, id := range []string{"chart-token-usage", "chart-waiting", "chart-imbalance"} {
		saveElementScreenshot(t, tab, testid(id), "history-"+id)
	}
}

// TestBrowserAuditRankStatsBars: the rank-stats query from the audit form
// draws a bar row per rank, as long as the table's figures say.
func TestBrowserAuditRankStatsBars(t *testing.T) {
	t.Parallel()
	c := historyConfig()
	m := startMain(t, c, nil)
	ctx := testCtx(t, 30*time.Second)
	eventually(t, ctx, "20 recorded reports", func() bool {
		page, err := m.History().Query.Reports(ctx, audit.ReportsQuery{
			Window: audit.Window{Since: time.Now().Add(-time.Minute), Until: time.Now().Add(time.Minute)}})
		return err == nil && len(page.Reports) >= 20
	})
	tab := newBrowser(t)
	runAuditForm(t, tab, m.Addr(), "rank-stats", "rank-bars")
	type bar struct {
		Rank    string  `json:"rank"`
		Avg     float64 `json:"avg"`
		P95     float64 `json:"p95"`
		Waiting float64 `json:"waiting"`
		Text    string  `json:"text"`
	}
	bars := evalJS[[]bar](t, tab, `[...document.querySelectorAll('[data-testid="rank-bar"]')].map((g) => ({
		rank: g.dataset.rank,
		avg: Number(g.querySelector('[data-testid="rank-bar-avg"]').getAttribute("width")),
		p95: Number(g.querySelector('[data-testid="rank-bar-p95"]').getAttribute("width")),
		waiting: Number(g.querySelector('[data-testid="rank-bar-waiting"]').getAttribute("width")),
		text: g.querySelector(".bar-value").textContent,
	}))`)
	rows := evalJS[[][]string](t, tab, `[...document.querySelectorAll('[data-testid="audit-table"] [data-testid="result-row"]')].map((r) => [...r.cells].map((c) => c.textContent.trim()))`)
	if len(bars) != 4 || len(rows) != 4 {
		failWithScreenshot(t, tab, "%d bar rows and %d table rows, want one per rank (4)", len(bars), len(rows))
	}
	for i, b := range bars {
		// Columns: worker, rank, reports, avg, p95, max, max waiting, throughput.
		avg, p95 := rows[i][3], rows[i][4]
		if b.Rank != rows[i][1] || b.Text != "avg "+avg+" · p95 "+p95 || b.Avg <= 0 || b.P95 < b.Avg {
			t.Errorf("bar %d: %+v against table row %v", i, b, rows[i])
		}
		// The KV panel is 400 units wide: the bar is the table's percentage of it.
		if pct, err := strconv.ParseFloat(strings.TrimSuffix(avg, " %"), 64); err != nil || b.Avg < pct*4-1 || b.Avg > pct*4+1 {
			t.Errorf("bar %d: avg bar %.1f units for %s", i, b.Avg, avg)
		}
	}
	saveScreenshot(t, tab, "audit-rank-stats")
}

// hold waits d, or fails when ctx ends first.
func hold(t *testing.T, ctx context.Context, d time.Duration) {
	t.Helper()
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
	case <-ctx.Done():
		t.Fatal(ctx.Err())
	}
}
