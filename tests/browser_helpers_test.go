package tests

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// The browser tests drive Debian's Chromium, headless, through chromedp.

// chromiumPath is Debian's Chromium; tests/services.sh (run by `make test`)
// installs it when it is missing.
const chromiumPath = "/usr/bin/chromium"

// Viewport of every page the browser tests open, and of the README's
// screenshots.
const (
	viewportWidth  = 1280
	viewportHeight = 900
)

// maxReadmeScreenshot bounds one README screenshot's size.
const maxReadmeScreenshot = 200 << 10

var updateScreenshots = flag.Bool("update-screenshots", false,
	"write the README's screenshots of /, /history and /audit to testdata/screenshots")

// browserLife bounds a browser's whole life in one test, start included.
const browserLife = 60 * time.Second

// browsers holds a slot for each Chromium running: a few at once, each
// several processes that compute while the tests around them wait.
var browsers = make(chan struct{}, 2)

// newBrowser starts a headless Chromium with a fresh profile and returns
// the context of its first tab, viewport set; the browser is closed at
// cleanup. It skips when Chromium is missing, except under CI=true, where
// the browser tests must run.
func newBrowser(t *testing.T) context.Context {
	t.Helper()
	if _, err := os.Stat(chromiumPath); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("browser tests must run under CI, but %s is missing (%v): run `apt-get install -y chromium`, or `make test`, which installs it", chromiumPath, err)
		}
		t.Skipf("%s is missing (%v): run `apt-get install -y chromium`, or `make test`, which installs it, to run the browser tests", chromiumPath, err)
	}
	select {
	case browsers <- struct{}{}:
	case <-time.After(5 * browserLife):
		t.Fatalf("no browser slot free within %s", 5*browserLife)
	}
	t.Cleanup(func() { <-browsers }) // after the browser has exited
	// Created first, so it is removed after the browser has exited.
	profile := t.TempDir()

	opts := append(chromedp.DefaultExecAllocatorOptions[:], // headless, among others
		chromedp.ExecPath(chromiumPath),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-quic", true),
		chromedp.UserDataDir(profile),
	)
	life, cancelLife := context.WithTimeout(context.Background(), browserLife)
	alloc, cancelAlloc := chromedp.NewExecAllocator(life, opts...)
	tab, cancelTab := chromedp.NewContext(alloc)
	t.Cleanup(func() {
		// A graceful close lets Chromium stop its own child processes
		// before the profile folder is removed.
		ctx, cancel := context.WithTimeout(tab, 10*time.Second)
		defer cancel()
		if err := chromedp.Cancel(ctx); err != nil && !errors.Is(err, context.Canceled) {
			t.Logf("closing chromium: %v", err)
		}
		cancelTab()
		cancelAlloc()
		cancelLife()
	})
	// The first action starts the browser; its deadline is the browser's
	// life, since a shorter one would stop the browser when it expires.
	if err := chromedp.Do(tab, chromedp.EmulateViewport(viewportWidth, viewportHeight)); err != nil {
		t.Fatalf("starting %s: %v", chromiumPath, err)
	}
	return tab
}

// within runs f with tab bounded by d.
func within(tab context.Context, d time.Duration, f func(ctx context.Context) error) error {
	ctx, cancel := context.WithTimeout(tab, d)
	defer cancel()
	return f(ctx)
}

// navigate opens url in tab and waits for it to load.
func navigate(t *testing.T, tab context.Context, url string) {
	t.Helper()
	err := within(tab, 10*time.Second, func(ctx context.Context) error {
		return chromedp.Do(ctx, chromedp.Navigate(url))
	})
	if err != nil {
		failWithScreenshot(t, tab, "navigate to %s: %v", url, err)
	}
}

// evalJS evaluates expr in the page and decodes its value into T.
func evalJS[T any](t *testing.T, tab context.Context, expr string) T {
	t.Helper()
	var v T
	err := within(tab, 5*time.Second, func(ctx context.Context) error {
		var err error
		v, err = chromedp.Run(ctx, chromedp.Evaluate[T](expr))
		return err
	})
	if err != nil {
		failWithScreenshot(t, tab, "evaluate %s: %v", expr, err)
	}
	return v
}

// waitJS polls the JavaScript predicate expr in the page until it is
// truthy, at most d; what names the wait in the failure.
func waitJS(t *testing.T, tab context.Context, d time.Duration, what, expr string) {
	t.Helper()
	if err := pollJS(tab, d, expr); err != nil {
		failWithScreenshot(t, tab, "waiting %s for %s: %v", d, what, err)
	}
}

// pollJS polls the JavaScript predicate expr until it is truthy, at most d.
func pollJS(tab context.Context, d time.Duration, expr string) error {
	return within(tab, d+time.Second, func(ctx context.Context) error {
		_, err := chromedp.Run(ctx, chromedp.Poll[chromedp.Void](expr,
			chromedp.WithPollingInterval(25*time.Millisecond), chromedp.WithPollingTimeout(d)))
		return err
	})
}

// pageJS declares, for a script reading a page, q(id, root), the element
// of a data-testid (in root, else the document), and text(el), its
// trimmed text ("" for none).
const pageJS = `
	const q = (id, root = document) => root.querySelector('[data-testid="' + id + '"]');
	const text = (el) => el ? el.textContent.trim() : "";`

// testid is the CSS selector of a data-testid.
func testid(id string) string { return `[data-testid="` + id + `"]` }

// jsQuote is s as a JavaScript string literal.
func jsQuote(s string) string { return strconv.Quote(s) }

// saveScreenshot saves the whole page as a PNG test artifact and logs
// where.
func saveScreenshot(t *testing.T, tab context.Context, name string) {
	t.Helper()
	saveShot(t, tab, name, chromedp.FullScreenshot(100))
}

// saveElementScreenshot saves the element sel as a PNG test artifact, to
// look at one picture closely.
func saveElementScreenshot(t *testing.T, tab context.Context, sel, name string) {
	t.Helper()
	saveShot(t, tab, name, chromedp.Screenshot(chromedp.CSS(sel)))
}

// capture takes shot of tab, within 10 s.
func capture(tab context.Context, shot chromedp.Action[[]byte]) ([]byte, error) {
	var png []byte
	err := within(tab, 10*time.Second, func(ctx context.Context) error {
		var err error
		png, err = chromedp.Run(ctx, shot)
		return err
	})
	return png, err
}

// saveShot saves shot of tab as the PNG test artifact name and logs
// where.
func saveShot(t *testing.T, tab context.Context, name string, shot chromedp.Action[[]byte]) {
	t.Helper()
	png, err := capture(tab, shot)
	if err != nil {
		t.Errorf("screenshot %s: %v", name, err)
		return
	}
	path := filepath.Join(t.ArtifactDir(), name+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Errorf("screenshot %s: %v", name, err)
		return
	}
	t.Logf("screenshot: %s", path)
}

// saveReadmeScreenshot writes the viewport (1280×900) to
// testdata/screenshots/<name>.png when -update-screenshots is given.
func saveReadmeScreenshot(t *testing.T, tab context.Context, name string) {
	t.Helper()
	if !*updateScreenshots {
		return
	}
	png, err := capture(tab, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatalf("README screenshot %s: %v", name, err)
	}
	if len(png) > maxReadmeScreenshot {
		t.Errorf("README screenshot %s is %d KiB, want at most %d KiB", name, len(png)>>10, maxReadmeScreenshot>>10)
	}
	dir := filepath.Join("testdata", "screenshots")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("README screenshot: %s (%d KiB)", path, len(png)>>10)
}

// failWithScreenshot saves what the page showed, then fails the test.
func failWithScreenshot(t *testing.T, tab context.Context, format string, args ...any) {
	t.Helper()
	saveScreenshot(t, tab, "failure")
	t.Fatalf(format, args...)
}

// runAuditForm opens the audit page of the service at addr, runs query
// over the last 10 minutes from its form and waits until the element of
// data-testid result shows.
func runAuditForm(t *testing.T, tab context.Context, addr, query, result string) {
	t.Helper()
	navigate(t, tab, pageURL(addr, "/audit"))
	err := within(tab, 10*time.Second, func(ctx context.Context) error {
		return chromedp.Do(ctx,
			chromedp.WaitVisible(chromedp.CSS(testid("audit-form"))),
			chromedp.SetValue(chromedp.CSS("#f-query"), query),
			chromedp.SetValue(chromedp.CSS("#f-last"), "10m"),
			chromedp.Click(chromedp.CSS(testid("audit-run"))),
			chromedp.WaitVisible(chromedp.CSS(testid(result))),
		)
	})
	if err != nil {
		failWithScreenshot(t, tab, "running the %s query from the form: %v", query, err)
	}
}

// getWithin GETs url, bounded by ctx, on a client whose connections close
// when the test ends; the caller closes the body.
func getWithin(t *testing.T, ctx context.Context, url string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{}
	t.Cleanup(client.CloseIdleConnections)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// pageURL is the absolute URL of path on m's address.
func pageURL(addr, path string) string { return fmt.Sprintf("http://%s%s", addr, path) }
