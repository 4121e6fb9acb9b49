package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/loadreporter/loadreporter/cmd/loadreporter/app"
	schedulerpb "github.com/loadreporter/loadreporter/gen/sglang/grpc/scheduler"
	"github.com/loadreporter/loadreporter/gen/sglang/grpc/scheduler/schedulerconnect"
)

// smgProbes are the include lists a poller sends: SMG's exact probe, all,
// none, and repeated include= (SGLang's vocabulary in every form).
var smgProbes = []string{
	"/v1/loads?include=core,disagg,queues,memory",
	"/v1/loads?include=all",
	"/v1/loads",
	"/v1/loads?include=core&include=queues",
}

// smgCoreKeys are the per-rank keys a core section carries; counts must be
// JSON integers within int32, the rest numbers.
var smgCoreKeys = map[string]bool{
	"dp_rank": true, "num_running_reqs": true, "num_waiting_reqs": true, "num_waiting_uncached_tokens": true,
	"num_used_tokens": true, "num_total_tokens": true, "max_total_num_tokens": true, "max_running_requests": true,
	"token_usage": false, "gen_throughput": false, "cache_hit_rate": false, "utilization": false,
}

// TestSMGReadsEverySource replays SMG's probe (and the other include forms)
// against the reporter in front of every source, and decodes the answer by
// SMG's rules: HTTP 200, loads non-empty, the core keys present and typed,
// every count an integer within int32, and max_total_num_tokens > 0
// exactly when the source knows the engine's capacity.
func TestSMGReadsEverySource(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name          string
		configure     func(t *testing.T, c *app.Config)
		knowsCapacity bool
	}{
		{"sim", func(*testing.T, *app.Config) {}, true},
		{"sglang-http", func(t *testing.T, c *app.Config) {
			_, srv := newFakeSGLang(t)
			c.Source.Name, c.Source.EngineURL = "sglang-http", srv.URL
		}, true},
		{"sglang-grpc", func(t *testing.T, c *app.Config) {
			c.Source.Name, c.Source.EngineURL = "sglang-grpc", startFakeScheduler(t)
		}, true},
		{"sglang-zmq", func(t *testing.T, c *app.Config) {
			c.Source.Name, c.Source.EngineURL = "sglang-zmq", newZMQEngine(t, 2, 20*time.Millisecond, 0).http.URL
		}, true},
		{"vllm-metrics without cache_config_info", func(t *testing.T, c *app.Config) {
			c.Source.Name, c.Source.EngineURL = "vllm-metrics", serveVLLM(t, "")
		}, false},
		{"vllm-metrics with cache_config_info", func(t *testing.T, c *app.Config) {
			c.Source.Name, c.Source.EngineURL = "vllm-metrics", serveVLLM(t,
				"# TYPE vllm:cache_config_info gauge\n"+
					`vllm:cache_config_info{block_size="16",num_gpu_blocks="8192",engine="0"} 1.0`+"\n"+
					`vllm:cache_config_info{block_size="16",num_gpu_blocks="8192",engine="1"} 1.0`+"\n")
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := testConfig()
			tc.configure(t, &c)
			m := startMain(t, c, nil)
			for _, probe := range smgProbes {
				loads := smgPoll(t, "http://"+m.Addr()+probe)
				for _, l := range loads {
					capacity := l["max_total_num_tokens"].(json.Number)
					if known := capacity.String() != "0"; known != tc.knowsCapacity {
						t.Errorf("%s: max_total_num_tokens %s, source knows the capacity: %t", probe, capacity, tc.knowsCapacity)
					}
				}
			}
		})
	}
}

// smgPoll GETs url until the first fire has a HEALTHY report (a 503 before
// it is inconclusive to SMG too), checks SMG's rules and returns the loads.
func smgPoll(t *testing.T, url string) []map[string]any {
	t.Helper()
	ctx := testCtx(t, 10*time.Second)
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", url, err)
		}
		var env struct {
			Loads       []map[string]any `json:"loads"`
			DPRankCount json.Number      `json:"dp_rank_count"`
		}
		dec := json.NewDecoder(resp.Body)
		dec.UseNumber()
		err = dec.Decode(&env)
		resp.Body.Close()
		if resp.StatusCode == http.StatusServiceUnavailable && ctx.Err() == nil {
			continue // before the first fire
		}
		if resp.StatusCode != http.StatusOK || err != nil {
			t.Fatalf("%s: HTTP %d, decode %v", url, resp.StatusCode, err)
		}
		if len(env.Loads) == 0 || env.DPRankCount.String() != fmt.Sprint(len(env.Loads)) {
			t.Fatalf("%s: %d loads, dp_rank_count %s", url, len(env.Loads), env.DPRankCount)
		}
		for _, l := range env.Loads {
			smgCheckLoad(t, url, l)
		}
		return env.Loads
	}
}

func smgCheckLoad(t *testing.T, url string, l map[string]any) {
	t.Helper()
	for key, integer := range smgCoreKeys {
		n, ok := l[key].(json.Number)
		if !ok {
			t.Fatalf("%s: %s is %T (%v), want a number", url, key, l[key], l[key])
		}
		if !integer {
			if _, err := n.Float64(); err != nil {
				t.Fatalf("%s: %s = %s: %v", url, key, n, err)
			}
			continue
		}
		v, err := n.Int64()
		if err != nil || strings.ContainsAny(n.String(), ".eE") || v < 0 || v > math.MaxInt32 {
			t.Fatalf("%s: %s = %s, want an integer within int32", url, key, n)
		}
	}
}

// serveVLLM serves the vLLM fixture's /metrics, plus extra families.
func serveVLLM(t *testing.T, extra string) string {
	body, err := os.ReadFile("testdata/vllm-metrics-dp2.txt")
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/metrics" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		_, _ = w.Write(body)
		_, _ = w.Write([]byte(extra))
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// fakeScheduler answers GetLoads for two ranks, as SGLang's scheduler does.
type fakeScheduler struct {
	schedulerconnect.UnimplementedSglangSchedulerHandler
}

func (fakeScheduler) GetLoads(context.Context, *connect.Request[schedulerpb.GetLoadsRequest]) (*connect.Response[schedulerpb.GetLoadsResponse], error) {
	loads := make([]*schedulerpb.SchedulerLoad, 2)
	for i := range loads {
		loads[i] = &schedulerpb.SchedulerLoad{
			DpRank: int32(i), NumRunningReqs: 3, NumWaitingReqs: 1, NumUsedTokens: 5000, MaxTotalNumTokens: 200000,
			MaxRunningRequests: 128, TokenUsage: 0.025, GenThroughput: 300, CacheHitRate: 0.5, Utilization: 0.4,
		}
	}
	return connect.NewResponse(&schedulerpb.GetLoadsResponse{Loads: loads}), nil
}

// startFakeScheduler serves fakeScheduler over plaintext HTTP/2 and returns
// its host:port.
func startFakeScheduler(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle(schedulerconnect.NewSglangSchedulerHandler(fakeScheduler{}))
	p := new(http.Protocols)
	p.SetHTTP1(true)
	p.SetUnencryptedHTTP2(true)
	srv := &http.Server{Handler: mux, Protocols: p}
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = srv.Serve(ln)
	}()
	t.Cleanup(func() { _ = srv.Close(); <-served })
	return ln.Addr().String()
}
