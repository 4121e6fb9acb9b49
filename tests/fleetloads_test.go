package tests

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/loadreporter/loadreporter/cmd/loadreporter/fleet"
	"github.com/loadreporter/loadreporter/internal/sharedtest"
)

// fleetInterval is the report interval of the fleet views the tests run.
const fleetInterval = 500 * time.Millisecond

// startFleet runs `loadreporter fleet` over addrs on an ephemeral port,
// with flags besides; it is closed at cleanup.
func startFleet(t *testing.T, addrs []string, flags ...string) *fleet.Main {
	t.Helper()
	return startFleetLogging(t, addrs, nil, flags...)
}

// startFleetLogging is startFleet with its log lines going to logs.
func startFleetLogging(t *testing.T, addrs []string, logs io.Writer, flags ...string) *fleet.Main {
	t.Helper()
	// At 500 ms a worker is Fresh until 1.5 s without a report: three
	// missed intervals of headroom, so a busy machine does not turn the
	// workers a test keeps healthy Stale.
	cfg, err := fleet.Parse(append([]string{"--targets", strings.Join(addrs, ","), "--listen", "127.0.0.1:0", "--interval", fleetInterval.String()}, flags...),
		func(string) string { return "" }, nil)
	if err != nil {
		t.Fatal(err)
	}
	if logs == nil {
		logs = io.Discard
	}
	cfg.Logger = slog.New(slog.NewTextHandler(logs, nil))
	m, err := fleet.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	sharedtest.Start(t, m)
	return m
}

// getFleetLoads fetches and decodes GET /v1/fleet/loads.
func getFleetLoads(t *testing.T, addr string) fleet.Answer {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/v1/fleet/loads")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var a fleet.Answer
	if err := json.NewDecoder(resp.Body).Decode(&a); err != nil || resp.StatusCode != http.StatusOK ||
		resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("GET /v1/fleet/loads: %d %v", resp.StatusCode, err)
	}
	return a
}

// TestFleetLoads: the fleet command serves every worker's latest report
// in the /v1/loads envelope with its state and age; the worker put into
// error mode turns Unreachable and drops out of the aggregate, which
// covers the Fresh workers only.
func TestFleetLoads(t *testing.T) {
	t.Parallel()
	_, addrs := startWorkers(t, 3)
	f := startFleet(t, addrs)
	wait := testCtx(t, 15*time.Second)

	var a fleet.Answer
	eventually(t, wait, "three fresh workers", func() bool {
		a = getFleetLoads(t, f.Addr())
		return a.Aggregate.FreshWorkers == 3
	})
	if len(a.Workers) != 3 || a.Aggregate.Workers != 3 || a.Aggregate.DPRankCount != 12 || a.Aggregate.TotalTokens <= 0 {
		t.Fatalf("answer: %+v", a)
	}
	for _, w := range a.Workers {
		if w.State != "fresh" || w.Reason != "" || w.AgeMs == nil || *w.AgeMs < 0 || *w.AgeMs > 3*fleetInterval.Milliseconds() ||
			w.Dashboard != "http://"+w.Target+"/" || w.Loads == nil || w.Loads.Status != "HEALTHY" ||
			w.Loads.DPRankCount != 4 || len(w.Loads.Loads) != 4 || w.Loads.Loads[3].DPRank != 3 {
			t.Fatalf("worker: %+v", w)
		}
	}

	setSimMode(t, addrs[1], "error")
	eventually(t, wait, addrs[1]+" unreachable", func() bool {
		a = getFleetLoads(t, f.Addr())
		for _, w := range a.Workers {
			if w.Target == addrs[1] {
				return w.State == "unreachable"
			}
		}
		t.Fatalf("%s missing from %+v", addrs[1], a)
		return false
	})
	for _, w := range a.Workers {
		if w.Target == addrs[1] {
			if w.Loads == nil || w.Loads.Status != "UNREACHABLE" || len(w.Loads.Loads) != 0 || w.Reason == "" {
				t.Fatalf("unreachable worker: %+v", w)
			}
		}
	}
	if a.Aggregate.FreshWorkers != 2 || a.Aggregate.DPRankCount != 8 {
		t.Fatalf("aggregate after one unreachable: %+v", a.Aggregate)
	}
}

// TestFleetRefusesForeignHostNames: the fleet view has no token, so a
// request naming a host it was not told about (a DNS-rebinding page) is
// refused; an IP, localhost and --allowed-host names are served.
func TestFleetRefusesForeignHostNames(t *testing.T) {
	t.Parallel()
	_, addrs := startWorkers(t, 1)
	f := startFleet(t, addrs, "--allowed-host", "fleet.internal")
	for host, want := range map[string]int{
		f.Addr():                      http.StatusOK,
		"localhost":                   http.StatusOK,
		"fleet.internal:8090":         http.StatusOK,
		"rebind.evil.example":         http.StatusMisdirectedRequest,
		"127.0.0.1.nip.io:8090":       http.StatusMisdirectedRequest,
		"fleet.internal.evil.example": http.StatusMisdirectedRequest,
	} {
		if got := getWithHost(t, "http://"+f.Addr()+"/v1/fleet/loads", host); got != want {
			t.Errorf("Host %q: %d, want %d", host, got, want)
		}
	}
}

// TestFleetPageRunsOnlyItsOwnScript: the page shows text from workers, so
// it is served with a policy that runs scripts from its own origin only.
func TestFleetPageRunsOnlyItsOwnScript(t *testing.T) {
	t.Parallel()
	_, addrs := startWorkers(t, 1)
	f := startFleet(t, addrs)
	resp, err := http.Get("http://" + f.Addr() + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	csp := resp.Header.Get("Content-Security-Policy")
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(csp, "default-src 'self';") ||
		strings.Contains(csp, "script-src") || !strings.Contains(csp, "frame-ancestors 'none'") {
		t.Fatalf("status %d, Content-Security-Policy %q: want scripts from 'self' only and no framing", resp.StatusCode, csp)
	}
	if got := resp.Header.Get("X-Content-Type-Options"); got != "nosniff" {
		t.Fatalf("X-Content-Type-Options %q", got)
	}
}

// TestFleetRefusesAnOversizedMessage: the fleet view has no token, so its
// one RPC bounds what a peer may send, a gzip bomb included.
func TestFleetRefusesAnOversizedMessage(t *testing.T) {
	t.Parallel()
	_, addrs := startWorkers(t, 1)
	f := startFleet(t, addrs)
	refusesOversizedMessages(t, f.Addr(), []string{"/loadreporter.v1.FleetService/WatchFleet"})
}

// TestFleetLogsWorkersLostAndFound: the fleet view says when it starts,
// when a worker gets a stream and when it loses it, with why.
func TestFleetLogsWorkersLostAndFound(t *testing.T) {
	t.Parallel()
	workers, addrs := startWorkers(t, 2)
	logs := &sharedtest.LockedBuffer{}
	startFleetLogging(t, addrs, logs)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the fleet's log:\n%s", logs.String())
		}
	})
	ctx := testCtx(t, 20*time.Second)
	waitFor := func(what string) {
		t.Helper()
		eventually(t, ctx, fmt.Sprintf("%q in the fleet's log", what), func() bool { return strings.Contains(logs.String(), what) })
	}
	waitFor(`msg="fleet view serving"`)
	waitFor(`msg="fleet: worker connected" worker=` + addrs[1])
	if err := workers[1].Close(); err != nil {
		t.Fatal(err)
	}
	waitFor(`msg="fleet: worker lost" worker=` + addrs[1])
	if n := strings.Count(logs.String(), "worker connected"); n != 2 {
		t.Errorf("%d 'connected' lines, want one per worker:\n%s", n, logs.String())
	}
}
