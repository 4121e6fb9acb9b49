package tests

import (
	"fmt"
	"testing"
	"time"
)

// fleetRowJS is the state shown in the fleet page's row of a target.
func fleetRowJS(target, what string) string {
	return fmt.Sprintf(`(() => { const r = document.querySelector('[data-testid="worker"][data-target=%s]'); return r ? %s : null })()`,
		jsQuote(target), what)
}

// TestBrowserFleetPage: the fleet command's page shows one row per worker,
// Fresh with four KV bars and a link to the worker's dashboard, and turns
// the worker put into error mode Unreachable in place within a few
// seconds.
func TestBrowserFleetPage(t *testing.T) {
	tab := newBrowser(t)
	_, addrs := startWorkers(t, 3)
	f := startFleet(t, addrs)
	navigate(t, tab, pageURL(f.Addr(), "/"))
	for _, a := range addrs {
		waitJS(t, tab, 5*time.Second, a+" fresh with four ranks", fleetRowJS(a,
			`r.querySelector('[data-testid="state"]').textContent === "fresh" && r.querySelectorAll('[data-testid="rank"]').length === 4 && r.querySelector("a").href === "http://`+a+`/"`))
	}
	setSimMode(t, addrs[1], "error")
	waitJS(t, tab, 5*time.Second, addrs[1]+" unreachable", fleetRowJS(addrs[1],
		`r.querySelector('[data-testid="state"]').textContent === "unreachable"`))
	for _, a := range []string{addrs[0], addrs[2]} {
		if got := evalJS[string](t, tab, fleetRowJS(a, `r.querySelector('[data-testid="state"]').textContent`)); got != "fresh" {
			t.Errorf("%s shows %q", a, got)
		}
	}
	waitJS(t, tab, 5*time.Second, "the summary", `document.querySelector('[data-testid="summary"]').textContent === "2 of 3 workers fresh"`)
	saveScreenshot(t, tab, "fleet")
}
