package tests

import (
	"bytes"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/loadreporter/loadreporter/cmd/loadreporter/app"
)

// The pollers below read a worker URL by the parsing rules of the routers
// that exist, as their sources state them. What each concludes from what
// the front answers is what that router would route on.
//
//   - SMG 1.13.0 (smg-project/smg@f8daa8835a8b4419b53125a837aaab2b3ce895c3,
//     model_gateway/src/worker/monitor.rs:567-606 probe_native_loads and
//     646-675 the SGLang /metrics fallback; crates/protocols/src/worker.rs:
//     1257-1300 WorkerLoadResponse and SchedulerLoadSnapshot, every count
//     an i32), its behaviour observed with the published 1.13.0 wheel.
//   - sglang-router 0.3.2 (sgl-project/sglang sgl-model-gateway/src/core/
//     worker_manager.rs@00a4cf3b get_worker_load, policies/power_of_two.rs@
//     065f331f): GET /get_load, a JSON array, load = Σ num_tokens taken as
//     an integer; any failure is load −1, which power-of-two reads as the
//     least loaded.
//   - vllm-router 0.1.17 (vllm-project/router src/routers/http/router.rs@
//     03e9af5c, src/policies/power_of_two.rs@fa999f98): GET /get_load,
//     data["load"] as an integer; any failure leaves the worker out, scored
//     by the router's own in-flight count alone.

// smgVerdict is how SMG classifies one /v1/loads answer.
type smgVerdict string

const (
	smgUsed         smgVerdict = "used"         // routes on these ranks
	smgInconclusive smgVerdict = "inconclusive" // this tick falls back to /metrics
	smgAbsent       smgVerdict = "absent"       // /metrics from now on, for good
)

// smgRank is SMG's SchedulerLoadSnapshot: every count an i32, so a value
// past 2^31−1 fails the whole parse.
type smgRank struct {
	DPRank                   int32   `json:"dp_rank"`
	NumRunningReqs           int32   `json:"num_running_reqs"`
	NumWaitingReqs           int32   `json:"num_waiting_reqs"`
	NumWaitingUncachedTokens int32   `json:"num_waiting_uncached_tokens"`
	NumUsedTokens            int32   `json:"num_used_tokens"`
	MaxTotalNumTokens        int32   `json:"max_total_num_tokens"`
	MaxRunningRequests       int32   `json:"max_running_requests"`
	TokenUsage               float64 `json:"token_usage"`
	GenThroughput            float64 `json:"gen_throughput"`
}

// smgProbe reads base's /v1/loads as SMG does.
func smgProbe(t *testing.T, base string) (smgVerdict, []smgRank) {
	t.Helper()
	resp, err := http.Get(base + "/v1/loads?include=core,disagg,queues,memory")
	if err != nil {
		return smgInconclusive, nil
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	switch {
	case resp.StatusCode == 404 || resp.StatusCode == 405 || resp.StatusCode == 501:
		return smgAbsent, nil
	case resp.StatusCode < 200 || resp.StatusCode > 299:
		return smgInconclusive, nil
	}
	var env struct {
		Loads []smgRank `json:"loads"`
	}
	if err := json.Unmarshal(body, &env); err != nil {
		return smgAbsent, nil
	}
	if len(env.Loads) == 0 {
		return smgInconclusive, nil
	}
	return smgUsed, env.Loads
}

// smgMetricsFallback reads base's /metrics as SMG's SGLang fallback does:
// sglang:token_usage must be there.
func smgMetricsFallback(t *testing.T, base string) bool {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		return false
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK && bytes.Contains(body, []byte("sglang:token_usage"))
}

// sglangRouterLoad reads base's /get_load as sglang-router 0.3.2 does.
func sglangRouterLoad(t *testing.T, base string) int64 {
	t.Helper()
	resp, err := http.Get(base + "/get_load")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return -1
	}
	var entries []map[string]json.RawMessage
	if err := json.NewDecoder(resp.Body).Decode(&entries); err != nil {
		return -1
	}
	var sum int64
	for _, e := range entries {
		var n int64
		if json.Unmarshal(e["num_tokens"], &n) == nil { // as_i64: an integer or nothing
			sum += n
		}
	}
	return sum
}

// vllmRouterLoad reads base's /get_load as vllm-router 0.1.17 does; ok is
// false when the worker is left to the router's own in-flight count.
func vllmRouterLoad(t *testing.T, base string) (load int64, ok bool) {
	t.Helper()
	resp, err := http.Get(base + "/get_load")
	if err != nil {
		return 0, false
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return 0, false
	}
	var data map[string]json.RawMessage
	if err := json.NewDecoder(resp.Body).Decode(&data); err != nil {
		return 0, false
	}
	if json.Unmarshal(data["load"], &load) != nil {
		return 0, false
	}
	return load, true
}

// TestPollersReadTheFrontByTheirOwnRules: through the front of an SGLang
// worker, SMG, sglang-router and vllm-router each read the load the
// reporter pulled while generation passes untouched; when the report is
// STALE or UNREACHABLE none of them takes old numbers for current: SMG
// falls back to the engine's own /metrics for the tick (served by the
// front from one scrape per window) or keeps what it had, and the /get_load
// readers see a full worker instead of sglang-router's "−1, least loaded".
func TestPollersReadTheFrontByTheirOwnRules(t *testing.T) {
	t.Parallel()
	e := newStandInEngine(t)
	m := startFrontMain(t, e, func(c *app.Config) {
		c.Poll.MaxAge = 10 * time.Millisecond
		c.Fire.StaleAfter = time.Second
	})
	base := "http://" + m.FrontAddr()
	waitHealthy := func() {
		eventually(t, testCtx(t, 10*time.Second), "the front to serve a healthy report", func() bool {
			v, _ := smgProbe(t, base)
			return v == smgUsed
		})
	}
	waitHealthy()

	// Healthy: the fixture's ranks (61234 + 4096 and 40011 tokens).
	v, ranks := smgProbe(t, base)
	if v != smgUsed || len(ranks) != 2 || ranks[0].NumRunningReqs != 12 || ranks[0].NumWaitingUncachedTokens != 4096 ||
		ranks[0].MaxTotalNumTokens != 220000 {
		t.Fatalf("SMG, healthy: %s %+v", v, ranks)
	}
	if got := sglangRouterLoad(t, base); got != 61234+4096+40011 {
		t.Fatalf("sglang-router, healthy: load %d, want %d", got, 61234+4096+40011)
	}
	// SMG asks /loads?model= once: passed to the engine, whose 404 sends
	// SMG to /v1/loads for good.
	resp, err := http.Get(base + "/loads?model=stand-in")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound || e.count("/loads") != 1 {
		t.Fatalf("/loads: %d, engine asked %d times; want the engine's 404", resp.StatusCode, e.count("/loads"))
	}

	for _, tc := range []struct {
		name         string
		break_, mend func()
	}{
		{"stale", func() { e.staleMs.Store(5000) }, func() { e.staleMs.Store(0) }},
		{"unreachable", func() { e.down.Store(true) }, func() { e.down.Store(false) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.break_()
			defer tc.mend()
			// The healthy report is served while younger than --poll-max-age;
			// the next poll pulls anew.
			eventually(t, testCtx(t, 10*time.Second), "SMG to read no numbers to route on", func() bool {
				v, ranks := smgProbe(t, base)
				if v != smgInconclusive && v != smgUsed {
					t.Fatalf("SMG: %s %+v, want inconclusive (no numbers to route on)", v, ranks)
				}
				return v == smgInconclusive
			})
			if got := sglangRouterLoad(t, base); got < math.MaxInt32 {
				t.Errorf("sglang-router: load %d, want a full worker (≥ 2^31−1), never −1", got)
			}
			resp, err := http.Post(base+"/generate", "application/json", strings.NewReader(`{"text":"hi","stream":true}`))
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			wantGen := http.StatusOK
			if tc.name == "unreachable" {
				wantGen = http.StatusBadGateway
			}
			if resp.StatusCode != wantGen {
				t.Errorf("generation: %d, want %d", resp.StatusCode, wantGen)
			}
		})
	}
	waitHealthy()
	// SMG's /metrics fallback reads the engine's exposition through the
	// front (the stand-in names no token_usage, so it has nothing to use).
	if smgMetricsFallback(t, base) {
		t.Error("the stand-in's /metrics has no sglang:token_usage, yet the fallback read it")
	}
}

// TestVLLMRouterReadsTheFrontOfAVLLMWorker: with --source vllm-metrics the
// front answers /get_load as {"load": N}, the running and waiting requests
// of every engine, which vllm-router adds to its in-flight count.
func TestVLLMRouterReadsTheFrontOfAVLLMWorker(t *testing.T) {
	t.Parallel()
	c := testConfig()
	c.Source.Name, c.Source.EngineURL = "vllm-metrics", serveVLLM(t, "")
	c.Front.Listen = "127.0.0.1:0"
	m := startMain(t, c, nil)
	base := "http://" + m.FrontAddr()
	var load int64
	eventually(t, testCtx(t, 10*time.Second), "vllm-router to read a load", func() bool {
		var ok bool
		load, ok = vllmRouterLoad(t, base)
		return ok && load < math.MaxInt32
	})
	// The fixture: 7 + 2 running and waiting on engine 0, 5 + 0 on 1.
	if load != 14 {
		t.Fatalf("vllm-router: load %d, want 14", load)
	}
}
