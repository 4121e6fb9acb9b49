package fleet

import (
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/loadreporter/loadreporter/client"
)

// fleetViews is n workers, all up or all down.
func fleetViews(n int, up bool) []*client.View {
	vs := make([]*client.View, n)
	for i := range vs {
		vs[i] = &client.View{Addr: fmt.Sprintf("10.0.0.%d:8080", i), State: client.Fresh}
		if !up {
			vs[i].State, vs[i].Reason = client.Disconnected, "no registered stream: connection refused"
		}
	}
	return vs
}

// TestWorkerLogIsBounded: 500 workers flapping 40 times in a window make
// workerLogBurst lines as it happens and one line at the window's end,
// not 20 000; the next window starts afresh.
func TestWorkerLogIsBounded(t *testing.T) {
	t.Parallel()
	var out strings.Builder
	l := newWorkerLog(slog.New(slog.NewTextHandler(&out, nil)))
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	l.observe(fleetViews(500, false)) // not connected yet: no news
	if out.Len() != 0 {
		t.Fatalf("workers never connected were logged:\n%s", out.String())
	}
	for i := range 40 {
		l.observe(fleetViews(500, i%2 == 0))
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != workerLogBurst || strings.Count(out.String(), `msg="fleet: worker connected"`) != workerLogBurst {
		t.Fatalf("%d lines during the window, want %d:\n%s", len(lines), workerLogBurst, out.String())
	}
	out.Reset()
	l.endWindow(t0.Add(workerLogWindow))
	if lines := strings.Split(strings.TrimSpace(out.String()), "\n"); len(lines) != 1 ||
		!strings.Contains(lines[0], "workers=500") || !strings.Contains(lines[0], "connected_now=0 lost_now=500") ||
		!strings.Contains(lines[0], "changes=19980") || !strings.Contains(lines[0], "first=") {
		t.Fatalf("the window's end: %q", out.String())
	}
	out.Reset()
	l.observe(fleetViews(500, true))
	if n := strings.Count(out.String(), "\n"); n != workerLogBurst {
		t.Fatalf("the next window: %d lines, want %d", n, workerLogBurst)
	}
}

// TestWorkerLogSaysEachWorker: a worker's first change in a window is
// said at once, with why it was lost; its further changes are said at the
// window's end, once, with how many were held back and its state then.
func TestWorkerLogSaysEachWorker(t *testing.T) {
	t.Parallel()
	var out strings.Builder
	l := newWorkerLog(slog.New(slog.NewTextHandler(&out, nil)))
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	l.observe(fleetViews(2, true))
	l.endWindow(t0)
	out.Reset()
	flap := func(up bool) {
		vs := fleetViews(2, true)
		if !up {
			vs[1] = fleetViews(2, false)[1]
		}
		l.observe(vs)
	}
	flap(false)
	if got := out.String(); !strings.Contains(got, `level=WARN msg="fleet: worker lost" worker=10.0.0.1:8080 reason="no registered stream: connection refused"`) ||
		strings.Count(got, "\n") != 1 {
		t.Fatalf("the first loss: %q", got)
	}
	flap(true)
	flap(false)
	flap(true)
	if strings.Count(out.String(), "\n") != 1 {
		t.Fatalf("changes after the first were said at once:\n%s", out.String())
	}
	out.Reset()
	l.endWindow(t0.Add(workerLogWindow))
	if got := out.String(); got == "" || strings.Count(got, "\n") != 1 ||
		!strings.Contains(got, `msg="fleet: worker connected" worker=10.0.0.1:8080 changes_held_back=3`) {
		t.Fatalf("the window's end: %q", got)
	}
	out.Reset()
	l.endWindow(t0.Add(2 * workerLogWindow))
	if out.Len() != 0 {
		t.Fatalf("a quiet window: %q", out.String())
	}
}
