package tests

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
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
	if reason, _ := row["reason"].(string); row["reasonShown"] != true || row["stateClass"] != "state unreachable" ||
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
