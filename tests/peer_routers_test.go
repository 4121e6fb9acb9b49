package tests

import (
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
)

// The tests of this file run the routers published on PyPI (pinned in
// tests/peers/*.txt) against two workers in front mode, A idle and B
// heavily loaded per its reporter, and read where requests went from each
// router's own metrics. Sources of what each router reads, as
// tests/router_rules_test.go states them:
//
//   - SMG 1.13.0 (smg-project/smg@f8daa8835a8b4419b53125a837aaab2b3ce895c3,
//     model_gateway/src/worker/monitor.rs:567-606 probe_native_loads, a 5xx
//     on /v1/loads is inconclusive and that tick falls back to /metrics,
//     646-675 the SGLang /metrics fallback; policies/least_load.rs:388-399,
//     the policy's snapshot is only ever extended, so a failed poll keeps
//     the last numbers); requests per worker in
//     smg_worker_requests_total{worker}.
//   - sglang-router 0.3.2 (sgl-project/sglang sgl-model-gateway/src/core/
//     worker_manager.rs@00a4cf3b get_worker_load: GET /get_load, a JSON
//     array, Σ num_tokens; any failure is load −1; policies/power_of_two.rs@
//     065f331f compares the two cached loads); requests per worker in
//     smg_worker_cb_outcomes_total{worker,outcome}.
//   - vllm-router 0.1.17 (vllm-project/router src/routers/http/router.rs@
//     03e9af5c: GET /get_load, data["load"] as an integer, a failure leaves
//     the worker out; src/policies/power_of_two.rs@fa999f98: cached load +
//     in-flight); requests per worker in
//     vllm_router_processed_requests_total{worker}.
//
// The front answers a report no router may route on (STALE, UNREACHABLE)
// as docs/deploy.md "When the load cannot be trusted" says: /v1/loads 503,
// /get_load 200 with a full worker's load (2^31−1).

// peerRouter is how one router is launched and read.
type peerRouter struct {
	name    string // the venv, tests/peers/<name>.txt
	bin     string
	flavour string // the workers' engine: sglang or vllm
	path    string // the generation route the test sends through it
	counter string // the router's per-worker request counter
	args    func(workers []string, port, metricsPort int) []string
}

// routerArgs are the flags every router takes alike.
func routerArgs(port, metricsPort int) []string {
	return []string{"--host", "127.0.0.1", "--port", portOf(port),
		"--prometheus-host", "127.0.0.1", "--prometheus-port", portOf(metricsPort)}
}

// smgRouter is SMG with policy and extra flags; the load poll every second,
// no tokenizer (HTTP mode needs none).
func smgRouter(policy string, extra ...string) peerRouter {
	return peerRouter{
		name: "smg", bin: "smg", flavour: "sglang", path: "/generate", counter: "smg_worker_requests_total",
		args: func(ws []string, port, mport int) []string {
			a := append([]string{"launch", "--worker-urls"}, ws...)
			a = append(a, "--policy", policy, "--load-monitor-interval", "1", "--disable-tokenizer-autoload",
				"--shutdown-grace-period-secs", "0", "--log-level", "debug")
			return append(append(a, routerArgs(port, mport)...), extra...)
		},
	}
}

var sglangRouter = peerRouter{
	name: "sglang-router", bin: "sglang-router", flavour: "sglang", path: "/generate", counter: "smg_worker_cb_outcomes_total",
	args: func(ws []string, port, mport int) []string {
		a := append([]string{"launch", "--worker-urls"}, ws...)
		a = append(a, "--policy", "power_of_two", "--worker-startup-check-interval", "1")
		return append(a, routerArgs(port, mport)...)
	},
}

var vllmRouter = peerRouter{
	name: "vllm-router", bin: "vllm-router", flavour: "vllm", path: "/v1/completions", counter: "vllm_router_processed_requests_total",
	args: func(ws []string, port, mport int) []string {
		a := append([]string{"--worker-urls"}, ws...)
		a = append(a, "--policy", "power_of_two", "--worker-startup-check-interval", "1")
		return append(a, routerArgs(port, mport)...)
	},
}

// runningRouter is a router process in front of its two workers.
type runningRouter struct {
	spec    peerRouter
	proc    *peerProcess
	base    string
	metrics string
	workers []*peerWorker
}

func startRouter(t *testing.T, spec peerRouter, workers []*peerWorker) *runningRouter {
	t.Helper()
	venv := needPeer(t, spec.name)
	var urls []string
	for _, w := range workers {
		urls = append(urls, w.url)
	}
	port, mport := freePort(t), freePort(t)
	r := &runningRouter{spec: spec, base: fmt.Sprintf("http://127.0.0.1:%d", port),
		metrics: fmt.Sprintf("http://127.0.0.1:%d/metrics", mport), workers: workers}
	r.proc = startPeer(t, venv, spec.bin, spec.args(urls, port, mport)...)
	return r
}

// served is the router's own count of requests per worker (by name).
func (r *runningRouter) served(t *testing.T) map[string]float64 {
	t.Helper()
	fams, err := scrapeFamilies(r.metrics)
	if err != nil {
		r.proc.alive(t)
		t.Fatalf("%s metrics: %v", r.spec.name, err)
	}
	return r.byWorker(fams[r.spec.counter])
}

// send posts n generation requests one after another (no request in
// flight when the next is picked) and returns how many the router counts
// per worker, and the HTTP statuses the client got.
func (r *runningRouter) send(t *testing.T, n int) (map[string]int, map[int]int) {
	t.Helper()
	before := r.served(t)
	codes := map[int]int{}
	body := `{"text":"hello","sampling_params":{"max_new_tokens":1}}`
	if r.spec.path == "/v1/completions" {
		body = `{"model":"` + peerModel + `","prompt":"hello","max_tokens":1}`
	}
	client := &http.Client{Timeout: 10 * time.Second}
	for range n {
		resp, err := client.Post(r.base+r.spec.path, "application/json", strings.NewReader(body))
		if err != nil {
			r.proc.alive(t)
			codes[0]++
			continue
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		codes[resp.StatusCode]++
	}
	after := r.served(t)
	got := map[string]int{}
	for w, v := range after {
		if d := int(v - before[w]); d > 0 {
			got[w] = d
		}
	}
	return got, codes
}

// polled waits until the router has polled w's front at least n more times
// while its report had status: with no session open, every report the
// reporter builds answers one poll. The bound is liveness, not speed: a
// router starting beside the whole suite on two cores took over 15 s to
// poll its first worker twice.
func (r *runningRouter) polled(t *testing.T, w *peerWorker, status string, from, n int) {
	t.Helper()
	waitUntil(t, 40*time.Second, func() string {
		r.proc.alive(t)
		return fmt.Sprintf("%s polling worker %s: %d %s reports, want %d", r.spec.name, w.name, w.reports(t, status), status, from+n)
	}, func() bool { return w.reports(t, status) >= from+n })
}

// phaseCheck reads the router's metrics after a phase's requests.
type phaseCheck func(t *testing.T, r *runningRouter, fams map[string]*dto.MetricFamily)

// byWorker sums a family of the router's by worker name.
func (r *runningRouter) byWorker(f *dto.MetricFamily) map[string]float64 {
	out := map[string]float64{}
	for label, v := range byLabel(f, "worker", nil) {
		out[whose(label, r.workers)] += v
	}
	return out
}

// peerPhase is one state of the two workers and what the router should
// conclude from it.
type peerPhase struct {
	name string
	// degrade puts worker which into the phase's state, in which its
	// reports have status; mend undoes it. nil for the healthy phase.
	which         string
	status        string
	degrade, mend func(*peerWorker)
	// want gets at least 16 of the 20 requests by the router's count;
	// tried, when set, at least one attempt (a retry's first try counts).
	want, tried string
	// check, when set, reads the router's metrics after the requests.
	check phaseCheck
}

var (
	stale = func(w *peerWorker) { w.engine.stale.Store(true) }
	fresh = func(w *peerWorker) { w.engine.stale.Store(false) }
	down  = func(w *peerWorker) { w.engine.down.Store(true) }
	up    = func(w *peerWorker) { w.engine.down.Store(false) }
)

// runPhases starts two workers (A light, B heavy), the router before them,
// and checks each phase in turn: once the router has polled the changed
// worker twice in its new state, 20 requests sent one after another all
// succeed for the client and go where the phase wants them.
func runPhases(t *testing.T, spec peerRouter, phases []peerPhase) {
	runPhasesWith(t, spec, heavyLoad, phases)
}

// runPhasesWith is runPhases with B's load given.
func runPhasesWith(t *testing.T, spec peerRouter, heavy peerLoad, phases []peerPhase) {
	needPeer(t, spec.name) // skip before starting anything
	a := startPeerWorker(t, "A", spec.flavour, lightLoad)
	b := startPeerWorker(t, "B", spec.flavour, heavy)
	ws := map[string]*peerWorker{"A": a, "B": b}
	r := startRouter(t, spec, []*peerWorker{a, b})
	// Registered and polled: both fronts have answered two polls.
	r.polled(t, a, "HEALTHY", 0, 2)
	r.polled(t, b, "HEALTHY", 0, 2)
	const n = 20
	for _, ph := range phases {
		var w *peerWorker
		if ph.degrade != nil {
			w = ws[ph.which]
			from := w.reports(t, ph.status)
			ph.degrade(w)
			r.polled(t, w, ph.status, from, 2)
		}
		got, codes := r.send(t, n)
		t.Logf("%s, %s: %s; HTTP %v", spec.name, ph.name, fmtCounts(got), codes)
		if got[ph.want] < n*4/5 || (ph.tried != "" && got[ph.tried] == 0) || codes[http.StatusOK] != n {
			tried := ""
			if ph.tried != "" {
				tried = ", at least one tried on " + ph.tried
			}
			t.Errorf("%s, %s: %s for %d requests, HTTP %v; want at least %d to %s%s, every one answered 200",
				spec.name, ph.name, fmtCounts(got), n, codes, n*4/5, ph.want, tried)
		}
		if ph.check != nil {
			fams, err := scrapeFamilies(r.metrics)
			if err != nil {
				t.Fatal(err)
			}
			ph.check(t, r, fams)
		}
		if w != nil {
			from := w.reports(t, "HEALTHY")
			ph.mend(w)
			r.polled(t, w, "HEALTHY", from, 1) // and the next phase waits for two polls more
		}
	}
}

func fmtCounts(m map[string]int) string {
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	if len(parts) == 0 {
		return "none counted"
	}
	return strings.Join(parts, ", ")
}

// heavyPhases are the phases every router goes through, B (heavy)
// healthy, STALE and down, each with the light worker A taking the
// requests; sglang-based ones then check each's checks.
func heavyPhases(checks ...phaseCheck) []peerPhase {
	ps := []peerPhase{
		{name: "A idle, B heavy", want: "A"},
		{name: "B's report STALE", which: "B", status: "STALE", degrade: stale, mend: fresh, want: "A"},
		{name: "B's engine down (UNREACHABLE)", which: "B", status: "UNREACHABLE", degrade: down, mend: up, want: "A"},
	}
	for i, c := range checks {
		ps[i].check = c
	}
	return ps
}

// smgOverloaded checks SMG's count of overloaded workers.
func smgOverloaded(want float64) phaseCheck {
	return func(t *testing.T, _ *runningRouter, fams map[string]*dto.MetricFamily) {
		t.Helper()
		var got float64
		for _, v := range byLabel(fams["smg_workers_overloaded"], "model", nil) {
			got += v
		}
		if got != want {
			t.Errorf("smg_workers_overloaded %g, want %g", got, want)
		}
	}
}

// TestSMGRoutesOnTheFront: SMG 1.13.0, power_of_two with overload
// protection off, reads the fronts' /v1/loads (B: 30 waiting, KV usage
// 0.9) and sends the requests to A.
//
// B's report STALE or B's engine down: B's /v1/loads answers 503, which SMG
// takes as inconclusive; it reads the front's /metrics for the tick instead
// (the engine's own gauges, still heavy while only its snapshots are old)
// or, with the engine down and /metrics failing too, keeps the last numbers
// it had: B stays avoided.
//
// A's report STALE: SMG reads A's /metrics (idle) and stays on A. A's
// engine down: SMG still holds A's last idle numbers and keeps picking A —
// its load poll cannot take a worker out — and the front's 502 is retried
// on B, until SMG's circuit breaker opens on A (after 10 failures by
// default; 1.13.0 logs "Circuit breaker state transition: closed -> open",
// model_gateway/src/worker/circuit_breaker.rs:293): the client sees no
// failure, A sees attempts. The prediction, "keeps its last numbers", holds;
// that retries and the breaker, not the health check, take A out within
// the test is what 1.13.0 was seen to do.
func TestSMGRoutesOnTheFront(t *testing.T) {
	t.Parallel()
	runPhases(t, smgRouter("power_of_two", "--disable-worker-overload-protection"), append(heavyPhases(),
		peerPhase{name: "A's report STALE", which: "A", status: "STALE", degrade: stale, mend: fresh, want: "A"},
		peerPhase{name: "A's engine down (UNREACHABLE)", which: "A", status: "UNREACHABLE", degrade: down, mend: up, want: "B", tried: "A"},
	))
}

// TestSMGOverloadProtectionOnTheFront: with SMG's default overload
// protection (8 waiting or KV usage 0.8) B is vetoed; the veto holds while
// B's report is STALE (B's /metrics still says 30 waiting) and is cleared
// when B's engine is down (a failed poll is "no opinion"), where
// power_of_two's kept snapshot still avoids B.
func TestSMGOverloadProtectionOnTheFront(t *testing.T) {
	t.Parallel()
	runPhases(t, smgRouter("power_of_two"), heavyPhases(smgOverloaded(1), smgOverloaded(1), smgOverloaded(0)))
}

// TestSMGLeastLoadOnTheFront: SMG's least_load policy scores the same
// snapshots and avoids B in every state of B.
func TestSMGLeastLoadOnTheFront(t *testing.T) {
	t.Parallel()
	runPhases(t, smgRouter("least_load", "--disable-worker-overload-protection"), heavyPhases())
}

// TestSMGRoutesOnAnUnknownCapacity: before two vLLM workers, B heavy but
// publishing no vllm:cache_config_info, the fronts' /v1/loads say
// max_total_num_tokens 0 for B, which SMG reads as "no absolute token
// data" (crates/protocols/src/worker.rs:1325 has_absolute_token_data): B
// is left out of SMG's DP-rank cache, yet its waiting requests and KV
// usage still score it, and SMG sends the requests to A.
func TestSMGRoutesOnAnUnknownCapacity(t *testing.T) {
	t.Parallel()
	spec := smgRouter("power_of_two", "--disable-worker-overload-protection")
	spec.flavour, spec.path = "vllm", "/v1/completions"
	runPhasesWith(t, spec, heavyUnknownCapacity, []peerPhase{{name: "A idle, B heavy of unknown capacity", want: "A",
		check: func(t *testing.T, r *runningRouter, fams map[string]*dto.MetricFamily) {
			if v, ranks := smgProbe(t, r.workers[1].url); v != smgUsed || len(ranks) != 1 || ranks[0].MaxTotalNumTokens != 0 {
				t.Fatalf("B's front: %s %+v, want one rank of max_total_num_tokens 0", v, ranks)
			}
			// What SMG believes B holds: the front's numbers all the same.
			if got := r.byWorker(fams["smg_engine_waiting_requests"]); got["B"] != 30 || got["A"] != 0 {
				t.Errorf("SMG's smg_engine_waiting_requests %v, want A 0, B 30", got)
			}
			if got := r.byWorker(fams["smg_engine_token_usage"]); got["B"] != 0.9 {
				t.Errorf("SMG's smg_engine_token_usage %v, want B 0.9", got)
			}
		}}})
}

// TestSGLangRouterRoutesOnTheFront: sglang-router 0.3.2's power_of_two
// sums the fronts' /get_load num_tokens (A 0, B 90000) and sends the
// requests to A. A STALE or UNREACHABLE report is answered as a full
// worker (num_tokens 2^31−1), never as a failure, which it would read as
// −1, the least loaded: B stays avoided, and when A's report cannot be
// trusted the requests go to B, heavy but known — none is even tried on A.
func TestSGLangRouterRoutesOnTheFront(t *testing.T) {
	t.Parallel()
	runPhases(t, sglangRouter, append(heavyPhases(),
		peerPhase{name: "A's report STALE", which: "A", status: "STALE", degrade: stale, mend: fresh, want: "B"},
		peerPhase{name: "A's engine down (UNREACHABLE)", which: "A", status: "UNREACHABLE", degrade: down, mend: up, want: "B"},
	))
}

// TestVLLMRouterRoutesOnTheFront: vllm-router 0.1.17's power_of_two reads
// the fronts of two vLLM workers, /get_load {"load": N} with N the running
// and waiting requests (A 0, B 80), and sends the requests to A; an
// UNREACHABLE report is {"load": 2^31−1}, a full worker, so with A's engine
// down the requests go to B. vLLM's /metrics carries no snapshot time, so
// a vllm-metrics report is never STALE: there is no STALE phase here.
func TestVLLMRouterRoutesOnTheFront(t *testing.T) {
	t.Parallel()
	runPhases(t, vllmRouter, []peerPhase{
		{name: "A idle, B heavy", want: "A"},
		{name: "B's engine down (UNREACHABLE)", which: "B", status: "UNREACHABLE", degrade: down, mend: up, want: "A"},
		{name: "A's engine down (UNREACHABLE)", which: "A", status: "UNREACHABLE", degrade: down, mend: up, want: "B"},
	})
}
