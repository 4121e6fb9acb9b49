package main

import (
	"context"
	"log/slog"
	"math"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// e2eTrace is a light trace of small requests for the end-to-end tests.
func e2eTrace(routers int, win window) []request {
	var out []request
	for i, at := 0, 50*time.Millisecond; at < win.end(); i, at = i+1, at+70*time.Millisecond {
		out = append(out, request{At: at, Prompt: 16 + i%5, Output: 4 + i%3, Router: i % routers})
	}
	return out
}

// checkServed: every measured request was sent, answered and timed, and
// the dispatch counts add up.
func checkServed(t *testing.T, name string, res result, ex e2eExtra) {
	t.Helper()
	sent := 0
	for _, n := range res.Dispatched {
		sent += n
	}
	if res.Measured == 0 || res.Served != res.Measured || sent != res.Measured || ex.Failed != 0 || ex.Degraded != 0 {
		t.Errorf("%s: measured %d, served %d, dispatched %v, failed %d, degraded picks %d", name, res.Measured, res.Served, res.Dispatched, ex.Failed, ex.Degraded)
	}
	for i := range res.E2E {
		if math.IsInf(res.E2E[i], 1) {
			t.Errorf("%s: request %d has no end-to-end time", name, i)
		}
	}
	if len(res.Queue) == 0 || len(res.TTFT) == 0 {
		t.Errorf("%s: the engines timed %d queue waits and %d TTFTs", name, len(res.Queue), len(res.TTFT))
	}
	for _, v := range append(append([]float64{}, res.Queue...), res.TTFT...) {
		if math.IsInf(v, 1) || v < 0 {
			t.Errorf("%s: a timing of %g", name, v)
		}
	}
}

// TestEndToEndRowsWithoutReporter runs the oracle, router-local and
// random rows on engine-sim servers on the machine's clock (nothing is
// timed against a bound): every request is served and counted, the
// oracle counts its reads, streamed or not.
func TestEndToEndRowsWithoutReporter(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs engines on the machine's clock")
	}
	win := window{Warmup: 300 * time.Millisecond, Measure: 1500 * time.Millisecond, Drain: 20 * time.Second}
	for _, stream := range []bool{false, true} {
		s := e2eSetup{fleet: testFleet(3, 2), seed: 1, stream: stream, log: slog.New(slog.DiscardHandler)}
		for _, row := range []int{rowOracleLeast, rowLocal, rowRandom} {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			res, ex, err := runE2E(ctx, s, policies[row], e2eTrace(2, win), win)
			cancel()
			if err != nil {
				t.Fatalf("%s: %v", policies[row].Name, err)
			}
			checkServed(t, policies[row].Name, res, ex)
			if row == rowOracleLeast && res.Reads == 0 {
				t.Errorf("the oracle read no engine")
			}
			if row != rowOracleLeast && res.Reads != 0 {
				t.Errorf("%s: %g reads without a reporter", policies[row].Name, res.Reads)
			}
		}
	}
}

// TestEndToEndWithReporters runs a push row and a poll row against real
// loadreporter children: the routers' views turn fresh, every request is
// served, and the pulls are read from the reporters' metrics (10 a second
// at 100 ms).
func TestEndToEndWithReporters(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds loadreporter and runs it on the machine's clock")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	bin := filepath.Join(t.TempDir(), "loadreporter")
	if out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, "../loadreporter").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	win := window{Warmup: 500 * time.Millisecond, Measure: 3 * time.Second, Drain: 20 * time.Second}
	s := e2eSetup{fleet: testFleet(2, 2), reporter: bin, seed: 1, log: slog.New(slog.DiscardHandler)}
	for _, row := range []int{rowPush100Acct, rowPush100Fwd, rowPoll1sB2} {
		res, ex, err := runE2E(ctx, s, policies[row], e2eTrace(2, win), win)
		if err != nil {
			t.Fatalf("%s: %v", policies[row].Name, err)
		}
		checkServed(t, policies[row].Name, res, ex)
		if row == rowPush100Fwd && ex.Between == 0 {
			t.Errorf("%s: no report between the deadlines", policies[row].Name)
		}
		if row != rowPush100Fwd && ex.Between != 0 {
			t.Errorf("%s: %v reports between the deadlines, want none", policies[row].Name, ex.Between)
		}
		if (row == rowPush100Acct || row == rowPush100Fwd) && (res.Reads < 5 || res.Reads > 15) {
			t.Errorf("push 100 ms: %.1f pulls a second an engine, want about 10", res.Reads)
		}
		if row == rowPoll1sB2 && (res.Reads < 0.3 || res.Reads > 3) {
			t.Errorf("poll 1 s: %.1f pulls a second an engine, want about 1", res.Reads)
		}
	}
}

// TestStartReporterReportsAFailure: a binary that exits before serving
// is an error that says what it printed, not a hang.
func TestStartReporterReportsAFailure(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sh, err := exec.LookPath("false")
	if err != nil {
		t.Skip("no false(1)")
	}
	if _, err := startReporter(ctx, sh, "http://127.0.0.1:1", false, 0); err == nil {
		t.Fatal("a child that exits at once was taken as serving")
	}
}
