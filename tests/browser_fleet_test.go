package tests

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/loadreporter/loadreporter/client"
)

// fleetRowJS is the state shown in the fleet page's row of a target.
func fleetRowJS(target, what string) string {
	return fmt.Sprintf(`(() => { const r = document.querySelector('[data-testid="worker"][data-target=%s]'); return r ? %s : null })()`,
		jsQuote(target), what)
}

// requestLog counts the requests a tab sends to one host, by path.
type requestLog struct {
	mu     sync.Mutex
	byPath map[string]int
}

// logRequests starts counting the requests tab sends to host.
func logRequests(t *testing.T, tab context.Context, host string) *requestLog {
	t.Helper()
	l := &requestLog{byPath: map[string]int{}}
	err := chromedp.Listen(tab, func(ev any) {
		e, ok := ev.(*network.EventRequestWillBeSent)
		if !ok {
			return
		}
		u, err := url.Parse(e.Request.URL)
		if err != nil || u.Host != host {
			return
		}
		l.mu.Lock()
		l.byPath[u.Path]++
		l.mu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func (l *requestLog) counts() map[string]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[string]int, len(l.byPath))
	for p, n := range l.byPath {
		out[p] = n
	}
	return out
}

// TestBrowserFleetPage: the fleet command's page shows one row per worker,
// Fresh with four KV bars and a link to the worker's dashboard, and keeps
// it current from one WatchFleet stream, never by polling: each row's
// report sequence moves on in the same <tr> the page started with, the
// worker put into error mode turns Unreachable in place with its reason
// and no bars, and all the while the page loaded once, opened one stream
// and never asked /v1/fleet/loads.
func TestBrowserFleetPage(t *testing.T) {
	t.Parallel()
	tab := newBrowser(t)
	_, addrs := startWorkers(t, 3)
	f := startFleet(t, addrs)
	requests := logRequests(t, tab, f.Addr())
	navigate(t, tab, pageURL(f.Addr(), "/"))
	for _, a := range addrs {
		waitJS(t, tab, 5*time.Second, a+" fresh with four ranks", fleetRowJS(a,
			`r.querySelector('[data-testid="state"]').textContent === "fresh" && r.querySelectorAll('[data-testid="rank"]').length === 4 && r.querySelector("a").href === "http://`+a+`/"`))
	}
	waitJS(t, tab, 5*time.Second, "the live indicator", `document.querySelector('[data-testid="fleet-indicator"]').dataset.state === "live"`)

	// Keep the rows themselves: updated in place, they stay these elements.
	sequences := evalJS[map[string]float64](t, tab, `(() => {
		window.fleetRows = [...document.querySelectorAll('[data-testid="worker"]')];
		return Object.fromEntries(window.fleetRows.map((r) => [r.dataset.target, Number(r.dataset.sequence)]));
	})()`)
	if len(sequences) != 3 {
		t.Fatalf("rows %v", sequences)
	}
	sameRows := `(() => { const now = [...document.querySelectorAll('[data-testid="worker"]')];
		return now.length === 3 && now.every((r) => window.fleetRows.includes(r)); })()`
	for _, a := range addrs {
		waitJS(t, tab, 5*time.Second, a+"'s row three reports on", fleetRowJS(a,
			fmt.Sprintf(`Number(r.dataset.sequence) >= %d && window.fleetRows.includes(r)`, int(sequences[a])+3)))
	}
	if !evalJS[bool](t, tab, sameRows) {
		failWithScreenshot(t, tab, "the rows were replaced, not updated in place")
	}

	setSimMode(t, addrs[1], "error")
	waitJS(t, tab, 5*time.Second, addrs[1]+" unreachable", fleetRowJS(addrs[1],
		`r.querySelector('[data-testid="state"]').textContent === "unreachable"`))
	row := evalJS[map[string]any](t, tab, fleetRowJS(addrs[1], `({
		reason: r.querySelector('[data-testid="reason"]').textContent,
		reasonShown: !r.querySelector('[data-testid="reason"]').hidden,
		stateClass: r.querySelector('[data-testid="state"]').className,
		ranks: r.querySelectorAll('[data-testid="rank"]').length,
		inPlace: window.fleetRows.includes(r),
	})`))
	if reason, _ := row["reason"].(string); row["reasonShown"] != true || row["stateClass"] != "status status-unreachable" ||
		row["ranks"] != float64(0) || row["inPlace"] != true || !containsAll(reason, "UNREACHABLE", "simulated engine error") {
		failWithScreenshot(t, tab, "%s's row while unreachable: %v", addrs[1], row)
	}
	for _, a := range []string{addrs[0], addrs[2]} {
		if got := evalJS[string](t, tab, fleetRowJS(a, `r.querySelector('[data-testid="state"]').textContent`)); got != "fresh" {
			t.Errorf("%s shows %q", a, got)
		}
	}
	waitJS(t, tab, 5*time.Second, "the summary", `document.querySelector('[data-testid="summary"]').textContent === "2 of 3 workers fresh"`)
	if !evalJS[bool](t, tab, sameRows) {
		failWithScreenshot(t, tab, "the rows were replaced, not updated in place")
	}

	got := requests.counts()
	if got["/"] != 1 || got["/loadreporter.v1.FleetService/WatchFleet"] != 1 || got["/v1/fleet/loads"] != 0 {
		t.Fatalf("requests to the fleet command by path: %v; want the page once, one WatchFleet stream and no polling", got)
	}
	t.Logf("requests by path: %v", got)
	saveScreenshot(t, tab, "fleet")
}

// containsAll says s contains every part.
func containsAll(s string, parts ...string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}

// TestBrowserFleetDashboard: the fleet page is the fleet's dashboard, in
// the worker's pages' look. Over four workers (one of 32 ranks) it shows
// the aggregate and, per worker, the figures a router picks on, its
// engine address, model and zone, and a link to the worker's own
// dashboard that answers; each KV chart holds every rank's bar on one line
// (the 32-rank row is as tall as the others); the requests the fleet's
// client dispatched to a worker whose snapshots stopped show as pending,
// in its row and in the aggregate; sorting by pending puts that worker
// first and sorting by worker undoes it; the filter finds a worker by its
// model and by its state. The page is saved as a screenshot for a look.
func TestBrowserFleetDashboard(t *testing.T) {
	t.Parallel()
	tab := newBrowser(t)
	var addrs []string
	models := []string{"llama-3.1-8b-instruct", "llama-3.1-8b-instruct", "qwen2.5-32b", "llama-3.1-8b-instruct"}
	for i := range 4 {
		c := testConfig()
		c.Worker.Addr, c.Worker.Model, c.Worker.Zone = fmt.Sprintf("10.0.0.%d:30000", 11+i), models[i], []string{"eu-west-1a", "eu-west-1b"}[i%2]
		c.Source.Sim.Seed = uint64(i + 1)
		if i == 2 {
			c.Source.DPSize = 32
		}
		addrs = append(addrs, startMain(t, c, nil).Addr())
	}
	f := startFleet(t, addrs)
	navigate(t, tab, pageURL(f.Addr(), "/"))
	for i, a := range addrs {
		ranks := 4
		if i == 2 {
			ranks = 32
		}
		waitJS(t, tab, 10*time.Second, a+" fresh with its ranks", fleetRowJS(a, fmt.Sprintf(
			`r.querySelector('[data-testid="state"]').textContent === "fresh" && r.querySelectorAll('[data-testid="rank"]').length === %d`, ranks)))
	}
	waitJS(t, tab, 5*time.Second, "the aggregate", `document.querySelector('[data-testid="agg-ranks"]').textContent === "44"`)

	// The figures of each row and the page's look.
	for i, a := range addrs {
		row := evalJS[map[string]any](t, tab, fleetRowJS(a, `(() => {
			const t = (id) => r.querySelector('[data-testid="' + id + '"]').textContent;
			const chart = r.querySelector('[data-testid="kv-chart"]').getBoundingClientRect();
			const bars = [...r.querySelectorAll('[data-testid="rank"]')].map((b) => b.getBoundingClientRect());
			return { running: t("running"), waiting: t("waiting"), kv: t("kv"), throughput: t("throughput"), engine: t("engine"),
				model: t("model"), zone: t("zone"), pending: t("pending"), link: r.querySelector('[data-testid="dashboard"]').href,
				rowHeight: r.getBoundingClientRect().height, chartWidth: chart.width,
				barsInside: bars.every((b) => b.left >= chart.left - 0.5 && b.right <= chart.right + 0.5 && Math.abs(b.bottom - chart.bottom) < 0.5) };
		})()`))
		running, _ := row["running"].(string)
		if !strings.Contains(running, " / ") || !strings.HasSuffix(row["kv"].(string), " %") ||
			!strings.HasSuffix(row["throughput"].(string), " tok/s") || row["engine"] != fmt.Sprintf("10.0.0.%d:30000", 11+i) ||
			row["model"] != models[i] || row["pending"] != "0" || row["link"] != "http://"+a+"/" || row["barsInside"] != true ||
			row["chartWidth"] != float64(96) {
			failWithScreenshot(t, tab, "row of %s: %v", a, row)
		}
		if h, _ := row["rowHeight"].(float64); h > 60 {
			failWithScreenshot(t, tab, "row of %s is %.0f px tall: its cells wrap", a, h)
		}
	}
	look := evalJS[map[string]string](t, tab, `({
		body: getComputedStyle(document.body).backgroundColor,
		header: getComputedStyle(document.querySelector("header.site")).backgroundColor,
		nav: document.querySelector('header.site nav a[aria-current="page"]').textContent,
		pill: getComputedStyle(document.querySelector('[data-testid="state"]')).borderRadius,
	})`)
	if look["body"] != "rgb(246, 247, 249)" || look["header"] != "rgb(20, 32, 46)" || look["nav"] != "Fleet" || look["pill"] != "999px" {
		failWithScreenshot(t, tab, "the page does not wear the worker's pages' stylesheet: %v", look)
	}
	resp, err := http.Get("http://" + addrs[0] + "/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `data-testid="rank-cards"`) {
		t.Fatalf("a row's link, %s: %d", addrs[0], resp.StatusCode)
	}

	// Dispatches to a worker whose snapshots froze stay pending: no report
	// counts them.
	setSimMode(t, addrs[3], "stall")
	w := f.Fleet().Worker(addrs[3])
	for range 3 {
		f.Fleet().Dispatch(w, client.Request{Tokens: 512})
	}
	waitJS(t, tab, 5*time.Second, addrs[3]+"'s pending dispatches", fleetRowJS(addrs[3],
		`r.querySelector('[data-testid="pending"]').textContent === "3 req · 1,536 tok"`))
	waitJS(t, tab, 5*time.Second, "the pending dispatches in the aggregate",
		`document.querySelector('[data-testid="agg-pending"]').textContent === "3 req · 1,536 tok"`)
	waitJS(t, tab, 10*time.Second, addrs[3]+" stale", fleetRowJS(addrs[3], `r.querySelector('[data-testid="state"]').textContent === "stale"`))

	firstRow := `document.querySelector('tbody [data-testid="worker"]:not([hidden])').dataset.target`
	evalJS[bool](t, tab, `(document.querySelector('[data-testid="sort-pending"]').click(), document.querySelector('[data-testid="sort-pending"]').click(), true)`)
	if got := evalJS[string](t, tab, firstRow); got != addrs[3] {
		failWithScreenshot(t, tab, "sorted by pending, descending: %s first, want %s", got, addrs[3])
	}
	if got := evalJS[string](t, tab, `document.querySelector('th[data-sort="pending"]').getAttribute("aria-sort")`); got != "descending" {
		t.Errorf("aria-sort %q", got)
	}
	saveScreenshot(t, tab, "fleet-dashboard")

	filter := func(text, state string) []string {
		return evalJS[[]string](t, tab, fmt.Sprintf(`(() => {
			const f = document.querySelector('[data-testid="fleet-filter"]');
			f.value = %s; f.dispatchEvent(new Event("input"));
			const s = document.querySelector('[data-testid="fleet-state-filter"]');
			s.value = %s; s.dispatchEvent(new Event("change"));
			return [...document.querySelectorAll('tbody [data-testid="worker"]:not([hidden])')].map((r) => r.dataset.target);
		})()`, jsQuote(text), jsQuote(state)))
	}
	if got := filter("QWEN", ""); len(got) != 1 || got[0] != addrs[2] {
		t.Errorf("filtered by model: %v, want %s", got, addrs[2])
	}
	if got := evalJS[string](t, tab, `document.querySelector('[data-testid="fleet-shown"]').textContent`); got != "1 of 4 workers shown" {
		t.Errorf("shown: %q", got)
	}
	if got := filter("", "not-fresh"); len(got) != 1 || got[0] != addrs[3] {
		t.Errorf("filtered by state: %v, want %s", got, addrs[3])
	}
	if got := filter("no such worker", ""); len(got) != 0 || !evalJS[bool](t, tab, `!document.querySelector('[data-testid="fleet-none-shown"]').hidden`) {
		t.Errorf("a filter matching none: %v", got)
	}
	filter("", "")
	evalJS[bool](t, tab, `(document.querySelector('[data-testid="sort-target"]').click(), true)`)
	sorted := slices.Clone(addrs)
	slices.Sort(sorted)
	if got := evalJS[string](t, tab, firstRow); got != sorted[0] {
		failWithScreenshot(t, tab, "sorted by worker: %s first, want %s", got, sorted[0])
	}

	// Without JavaScript the server-rendered table shows every worker, in
	// the fleet's order, and no control that needs the script.
	noScript := tab
	var rows []*chromedp.Node
	var controls, indicator chromedp.AttributeResult
	err = within(noScript, 15*time.Second, func(ctx context.Context) error {
		err := chromedp.Do(ctx, chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			_, err := cdp.Call(ctx, tg, emulation.SetScriptExecutionDisabled, emulation.SetScriptExecutionDisabledParams{Value: true})
			return err
		}),
			chromedp.Navigate(pageURL(f.Addr(), "/")))
		if err != nil {
			return err
		}
		if rows, err = chromedp.Run(ctx, chromedp.Nodes(chromedp.CSSAll(`tbody [data-testid="worker"]`))); err != nil {
			return err
		}
		if controls, err = chromedp.Run(ctx, chromedp.AttributeValue(chromedp.CSS(testid("fleet-controls")), "hidden")); err != nil {
			return err
		}
		indicator, err = chromedp.Run(ctx, chromedp.AttributeValue(chromedp.CSS(testid("fleet-indicator")), "data-state"))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	var shown []string
	for _, r := range rows {
		shown = append(shown, r.AttributeValue("data-target"))
	}
	if !slices.Equal(shown, sorted) || !controls.Exists || indicator.Value != "off" {
		saveScreenshot(t, noScript, "fleet-no-script")
		t.Fatalf("without JavaScript: rows %v (want %v), controls hidden %t, indicator %q", shown, sorted, controls.Exists, indicator.Value)
	}
	saveScreenshot(t, noScript, "fleet-no-script")
}
