package vllm

import (
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loadreporter/loadreporter/adapters/source/internal/sourcetest"
	"github.com/loadreporter/loadreporter/domain"
	"github.com/loadreporter/loadreporter/ports/porttest"
)

// textFormat is what prometheus_client (and so vLLM) answers with.
const textFormat = "text/plain; version=0.0.4; charset=utf-8"

// serveBody answers every request like vLLM's /metrics: 200, text format.
func serveBody(body string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", textFormat)
		_, _ = w.Write([]byte(body))
	}
}

func newSource(t *testing.T, o Options) *Source {
	t.Helper()
	s, err := New(o)
	if err != nil {
		t.Fatalf("New(%+v): %v", o, err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// pull runs one Pull under a ctx deadline of d (0 means sourcetest.Wait)
// and fails the test if Pull does not return within sourcetest.Wait.
func pull(t *testing.T, s *Source, d time.Duration) (domain.Snapshot, error) {
	t.Helper()
	return sourcetest.Within(t, d, s.Pull)
}

func readFixture(t testing.TB) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "vllm-metrics-dp2.txt"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// cacheConfig is a vllm:cache_config_info family shaped like vLLM's, one
// series per given label set.
func cacheConfig(series ...string) string {
	var b strings.Builder
	b.WriteString("# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig\n")
	b.WriteString("# TYPE vllm:cache_config_info gauge\n")
	for _, s := range series {
		b.WriteString(`vllm:cache_config_info{block_size="16",cache_dtype="auto",enable_prefix_caching="True",` + s + `,gpu_memory_utilization="0.9"} 1.0` + "\n")
	}
	return b.String()
}

func TestPullFixture(t *testing.T) {
	fixture := readFixture(t)
	tests := []struct {
		name string
		body string
		opts Options
		want []domain.RankLoad
	}{
		{
			name: "fixture",
			body: fixture,
			want: []domain.RankLoad{
				{DPRank: 0, NumRunningReqs: 7, NumWaitingReqs: 2, TokenUsage: 0.3125, MaxRunningRequests: 256},
				{DPRank: 1, NumRunningReqs: 5, NumWaitingReqs: 0, TokenUsage: 0.1875, MaxRunningRequests: 256},
			},
		},
		{
			name: "max running from options",
			body: fixture,
			opts: Options{MaxRunningRequests: 1024},
			want: []domain.RankLoad{
				{DPRank: 0, NumRunningReqs: 7, NumWaitingReqs: 2, TokenUsage: 0.3125, MaxRunningRequests: 1024},
				{DPRank: 1, NumRunningReqs: 5, NumWaitingReqs: 0, TokenUsage: 0.1875, MaxRunningRequests: 1024},
			},
		},
		{
			name: "cache config per engine",
			body: fixture + cacheConfig(`engine="0",num_gpu_blocks="12345"`, `engine="1",num_gpu_blocks="10000"`),
			want: []domain.RankLoad{
				// 12345 × 16 = 197520; round(0.3125 × 197520) = 61725.
				{DPRank: 0, NumRunningReqs: 7, NumWaitingReqs: 2, TokenUsage: 0.3125, MaxRunningRequests: 256, MaxTotalNumTokens: 197520, NumUsedTokens: 61725},
				{DPRank: 1, NumRunningReqs: 5, NumWaitingReqs: 0, TokenUsage: 0.1875, MaxRunningRequests: 256, MaxTotalNumTokens: 160000, NumUsedTokens: 30000},
			},
		},
		{
			name: "cache config for all engines",
			body: fixture + cacheConfig(`num_gpu_blocks="10000"`),
			want: []domain.RankLoad{
				{DPRank: 0, NumRunningReqs: 7, NumWaitingReqs: 2, TokenUsage: 0.3125, MaxRunningRequests: 256, MaxTotalNumTokens: 160000, NumUsedTokens: 50000},
				{DPRank: 1, NumRunningReqs: 5, NumWaitingReqs: 0, TokenUsage: 0.1875, MaxRunningRequests: 256, MaxTotalNumTokens: 160000, NumUsedTokens: 30000},
			},
		},
		{
			name: "capacity from options where vLLM gives none",
			body: fixture + cacheConfig(`engine="0",num_gpu_blocks="None"`, `engine="1",num_gpu_blocks="10000"`),
			opts: Options{MaxTotalNumTokens: 100000},
			want: []domain.RankLoad{
				// vLLM's own figure wins for rank 1 (10000 × 16).
				{DPRank: 0, NumRunningReqs: 7, NumWaitingReqs: 2, TokenUsage: 0.3125, MaxRunningRequests: 256, MaxTotalNumTokens: 100000, NumUsedTokens: 31250},
				{DPRank: 1, NumRunningReqs: 5, NumWaitingReqs: 0, TokenUsage: 0.1875, MaxRunningRequests: 256, MaxTotalNumTokens: 160000, NumUsedTokens: 30000},
			},
		},
		{
			name: "cache config before allocation",
			body: fixture + cacheConfig(`engine="0",num_gpu_blocks="None"`, `engine="1",num_gpu_blocks="None"`),
			want: []domain.RankLoad{
				{DPRank: 0, NumRunningReqs: 7, NumWaitingReqs: 2, TokenUsage: 0.3125, MaxRunningRequests: 256},
				{DPRank: 1, NumRunningReqs: 5, NumWaitingReqs: 0, TokenUsage: 0.1875, MaxRunningRequests: 256},
			},
		},
		{
			name: "older vLLM: no engine label, gpu_ names, untyped",
			body: "vllm:num_requests_running{model_name=\"m\"} 3\n" +
				"vllm:num_requests_waiting{model_name=\"m\"} 1\n" +
				"vllm:gpu_cache_usage_perc{model_name=\"m\"} 0.5\n" +
				"vllm:gpu_prefix_cache_hits_total{model_name=\"m\"} 5\n" +
				"vllm:gpu_prefix_cache_queries_total{model_name=\"m\"} 10\n",
			want: []domain.RankLoad{
				{DPRank: 0, NumRunningReqs: 3, NumWaitingReqs: 1, TokenUsage: 0.5, MaxRunningRequests: 256},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var mu sync.Mutex
			var got []*http.Request
			url := sourcetest.Serve(t, func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				got = append(got, r)
				mu.Unlock()
				serveBody(tt.body)(w, r)
			})
			o := tt.opts
			o.BaseURL, o.APIKey = url, "s3cret-key"
			snap, err := pull(t, newSource(t, o), sourcetest.Wait)
			if err != nil {
				t.Fatalf("Pull: %v", err)
			}
			if len(snap.Ranks) != len(tt.want) {
				t.Fatalf("got %d ranks, want %d: %+v", len(snap.Ranks), len(tt.want), snap.Ranks)
			}
			for i, want := range tt.want {
				if snap.Ranks[i] != want {
					t.Errorf("rank %d:\n got %+v\nwant %+v", want.DPRank, snap.Ranks[i], want)
				}
			}
			if err := domain.ValidateSnapshot(snap, domain.RankRange(len(tt.want))); err != nil {
				t.Errorf("snapshot does not validate: %v", err)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(got) != 1 {
				t.Fatalf("engine saw %d requests, want 1", len(got))
			}
			if r := got[0]; r.Method != http.MethodGet || r.URL.Path != "/metrics" || !strings.HasPrefix(r.Header.Get("Accept"), "text/plain") {
				t.Errorf("request %s %s Accept %q, want GET /metrics accepting text/plain", r.Method, r.URL, r.Header.Get("Accept"))
			}
			if k := got[0].Header.Get("Authorization"); k != "Bearer s3cret-key" {
				t.Errorf("Authorization %q, want the bearer key", k)
			}
		})
	}
}

// counterBody is a two-engine exposition with the given cumulative
// counters per engine: generated tokens, prefix-cache hits and queries.
func counterBody(c0, c1 [3]float64) string {
	f := func(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
	var b strings.Builder
	b.WriteString("# TYPE vllm:num_requests_running gauge\n")
	b.WriteString("vllm:num_requests_running{engine=\"0\"} 1\nvllm:num_requests_running{engine=\"1\"} 1\n")
	b.WriteString("# TYPE vllm:num_requests_waiting gauge\n")
	b.WriteString("vllm:num_requests_waiting{engine=\"0\"} 0\nvllm:num_requests_waiting{engine=\"1\"} 0\n")
	b.WriteString("# TYPE vllm:kv_cache_usage_perc gauge\n")
	b.WriteString("vllm:kv_cache_usage_perc{engine=\"0\"} 0.1\nvllm:kv_cache_usage_perc{engine=\"1\"} 0.1\n")
	for i, name := range []string{"vllm:generation_tokens_total", "vllm:prefix_cache_hits_total", "vllm:prefix_cache_queries_total"} {
		b.WriteString("# TYPE " + name + " counter\n")
		b.WriteString(name + "{engine=\"0\"} " + f(c0[i]) + "\n")
		b.WriteString(name + "{engine=\"1\"} " + f(c1[i]) + "\n")
	}
	return b.String()
}

func TestPullRates(t *testing.T) {
	clock := porttest.NewClock(time.Unix(1_800_000_000, 0))
	var mu sync.Mutex
	body := ""
	url := sourcetest.Serve(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		b := body
		mu.Unlock()
		serveBody(b)(w, r)
	})
	s := newSource(t, Options{BaseURL: url, Clock: clock})
	// Each step serves new counters after advancing the fake clock, then
	// expects [throughput, hit rate] for ranks 0 and 1.
	steps := []struct {
		name    string
		advance time.Duration
		c0, c1  [3]float64
		want    [2][2]float64
	}{
		{"first scrape has no rate", 0, [3]float64{1000, 100, 400}, [3]float64{500, 0, 0}, [2][2]float64{{0, 0}, {0, 0}}},
		{"deltas over 2s", 2 * time.Second, [3]float64{2000, 400, 800}, [3]float64{600, 50, 100}, [2][2]float64{{500, 0.75}, {50, 0.5}}},
		{"engine 1 restarted", time.Second, [3]float64{2100, 450, 900}, [3]float64{10, 1, 2}, [2][2]float64{{100, 0.5}, {0, 0}}},
		{"after the restart", 4 * time.Second, [3]float64{2100, 450, 900}, [3]float64{210, 3, 6}, [2][2]float64{{0, 0}, {50, 0.5}}},
		{"no time passed", 0, [3]float64{2200, 460, 910}, [3]float64{310, 4, 7}, [2][2]float64{{0, 1}, {0, 1}}},
		{"at the longest span a rate covers", maxRateSpan, [3]float64{2200 + 1200, 470, 920}, [3]float64{310, 4, 7}, [2][2]float64{{10, 1}, {0, 0}}},
		// Nobody pulled for a while: the counters moved, but an average
		// over the idle span is not the engine's rate now.
		{"after an idle span", maxRateSpan + time.Second, [3]float64{3400 + 60000, 570, 1020}, [3]float64{310 + 600, 5, 8}, [2][2]float64{{0, 0}, {0, 0}}},
		{"pulled again", time.Second, [3]float64{63400 + 50, 580, 1030}, [3]float64{910, 6, 9}, [2][2]float64{{50, 1}, {0, 1}}},
	}
	for _, st := range steps {
		clock.Advance(st.advance)
		mu.Lock()
		body = counterBody(st.c0, st.c1)
		mu.Unlock()
		snap, err := pull(t, s, sourcetest.Wait)
		if err != nil {
			t.Fatalf("%s: Pull: %v", st.name, err)
		}
		for i, r := range snap.Ranks {
			if r.GenThroughput != st.want[i][0] || r.CacheHitRate != st.want[i][1] {
				t.Errorf("%s: rank %d gen_throughput %v cache_hit_rate %v, want %v %v",
					st.name, r.DPRank, r.GenThroughput, r.CacheHitRate, st.want[i][0], st.want[i][1])
			}
		}
	}
}

// gauges is a minimal two-engine exposition with the given sample values
// (as text) for running, waiting and usage, engine 0 then engine 1.
func gauges(run0, run1, wait0, wait1, use0, use1 string) string {
	return "# TYPE vllm:num_requests_running gauge\n" +
		"vllm:num_requests_running{engine=\"0\"} " + run0 + "\n" +
		"vllm:num_requests_running{engine=\"1\"} " + run1 + "\n" +
		"# TYPE vllm:num_requests_waiting gauge\n" +
		"vllm:num_requests_waiting{engine=\"0\"} " + wait0 + "\n" +
		"vllm:num_requests_waiting{engine=\"1\"} " + wait1 + "\n" +
		"# TYPE vllm:kv_cache_usage_perc gauge\n" +
		"vllm:kv_cache_usage_perc{engine=\"0\"} " + use0 + "\n" +
		"vllm:kv_cache_usage_perc{engine=\"1\"} " + use1 + "\n"
}

func TestPullErrors(t *testing.T) {
	fixture := readFixture(t)
	big := fixture + "# " + strings.Repeat("x", 2<<20) + "\n"
	handler := func(h http.HandlerFunc) func(<-chan struct{}) http.HandlerFunc {
		return func(<-chan struct{}) http.HandlerFunc { return h }
	}
	tests := []struct {
		name     string
		handler  func(done <-chan struct{}) http.HandlerFunc
		deadline time.Duration // 0 means sourcetest.Wait
		// want are substrings of the error message; "{url}" is the request URL.
		want     []string
		wantCode string
		timeout  bool
	}{
		// Transport failures are httpfetch's to test; the 500, the default
		// size bound and the hang only check that they surface through Pull.
		{
			name: "500",
			handler: handler(func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(http.StatusInternalServerError)
				_, _ = w.Write([]byte("Internal Server Error\n\nengine core died\n"))
			}),
			want:     []string{"GET {url}: HTTP 500 Internal Server Error: Internal Server Error engine core died"},
			wantCode: domain.CodeSourceFailed,
		},
		{
			name:     "not Prometheus text",
			handler:  handler(serveBody("<html><body>vLLM</body></html>\n")),
			want:     []string{"body is not Prometheus text: text format parsing error in line 1"},
			wantCode: domain.CodeSourceFailed,
		},
		{
			name:     "JSON instead of Prometheus text",
			handler:  handler(serveBody(`{"loads":[]}` + "\n")),
			want:     []string{"body is not Prometheus text: text format parsing error in line 1"},
			wantCode: domain.CodeSourceFailed,
		},
		{
			name:     "empty body",
			handler:  handler(serveBody("")),
			want:     []string{"empty response body, want Prometheus text"},
			wantCode: domain.CodeSourceFailed,
		},
		{
			name:     "truncated mid-line",
			handler:  handler(serveBody(fixture[:strings.Index(fixture, "vllm:num_requests_waiting{")+20])),
			want:     []string{"truncated Prometheus text: text format parsing error in line 7: unexpected end of input stream"},
			wantCode: domain.CodeSourceFailed,
		},
		{
			name:     "truncated at a line end",
			handler:  handler(serveBody(fixture[:strings.Index(fixture, "vllm:num_requests_waiting{engine=\"1\"")])),
			want:     []string{"rank 0: token_usage: no vllm:kv_cache_usage_perc series for this engine"},
			wantCode: domain.CodeInvalidSnapshot,
		},
		{
			name: "over the default size limit",
			handler: handler(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Length", strconv.Itoa(len(big)))
				serveBody(big)(w, r)
			}),
			want:     []string{"GET {url}: response body exceeds 1048576 bytes (Content-Length " + strconv.Itoa(len(big)) + ")"},
			wantCode: domain.CodeSourceFailed,
		},
		{
			name:     "float where an integer belongs",
			handler:  handler(serveBody(gauges("1", "7.5", "0", "0", "0.1", "0.1"))),
			want:     []string{"rank 1: num_running_reqs (vllm:num_requests_running) is a float (7.5), want an integer"},
			wantCode: domain.CodeInvalidSnapshot,
		},
		{
			name:     "NaN where an integer belongs",
			handler:  handler(serveBody(gauges("1", "1", "NaN", "0", "0.1", "0.1"))),
			want:     []string{"rank 0: num_waiting_reqs (vllm:num_requests_waiting) is NaN, want an integer"},
			wantCode: domain.CodeInvalidSnapshot,
		},
		{
			name:     "Inf where an integer belongs",
			handler:  handler(serveBody(gauges("1", "1", "0", "+Inf", "0.1", "0.1"))),
			want:     []string{"rank 1: num_waiting_reqs (vllm:num_requests_waiting) +Inf is outside the int64 range"},
			wantCode: domain.CodeInvalidSnapshot,
		},
		{
			name:     "integer beyond int64",
			handler:  handler(serveBody(gauges("1e19", "1", "0", "0", "0.1", "0.1"))),
			want:     []string{"rank 0: num_running_reqs (vllm:num_requests_running) 1e+19 is outside the int64 range"},
			wantCode: domain.CodeInvalidSnapshot,
		},
		{
			name:     "non-integer engine label",
			handler:  handler(serveBody(strings.Replace(fixture, `vllm:num_requests_waiting{engine="1"`, `vllm:num_requests_waiting{engine="dp-1"`, 1))),
			want:     []string{`vllm:num_requests_waiting: engine label "dp-1" is not an integer DP rank`},
			wantCode: domain.CodeInvalidSnapshot,
		},
		{
			name:     "duplicate engine series",
			handler:  handler(serveBody(strings.Replace(fixture, `vllm:num_requests_running{engine="1"`, `vllm:num_requests_running{engine="0",replica="b"`, 1))),
			want:     []string{"rank 0: vllm:num_requests_running has more than one series for this engine"},
			wantCode: domain.CodeInvalidSnapshot,
		},
		{
			name:     "wrong metric type",
			handler:  handler(serveBody(strings.Replace(fixture, "# TYPE vllm:num_requests_running gauge", "# TYPE vllm:num_requests_running counter", 1))),
			want:     []string{"vllm:num_requests_running is a COUNTER, want a GAUGE"},
			wantCode: domain.CodeSourceFailed,
		},
		{
			name:     "negative counter",
			handler:  handler(serveBody(counterBody([3]float64{-5, 0, 0}, [3]float64{0, 0, 0}))),
			want:     []string{"rank 0: counter vllm:generation_tokens_total is -5, want a finite value ≥ 0"},
			wantCode: domain.CodeInvalidSnapshot,
		},
		{
			name:     "usage missing for an engine",
			handler:  handler(serveBody(strings.Replace(fixture, `vllm:kv_cache_usage_perc{engine="1",model_name="meta-llama/Llama-3.1-8B-Instruct"} 0.1875`+"\n", "", 1))),
			want:     []string{"rank 1: token_usage: no vllm:kv_cache_usage_perc series for this engine"},
			wantCode: domain.CodeInvalidSnapshot,
		},
		{
			name:     "no engines (not a vLLM server)",
			handler:  handler(serveBody("# TYPE process_resident_memory_bytes gauge\nprocess_resident_memory_bytes 4.2e+09\n")),
			want:     []string{"no vllm:num_requests_running in the /metrics body: is this a vLLM server?"},
			wantCode: domain.CodeSourceFailed,
		},
		{
			name:     "hang",
			handler:  sourcetest.Hang,
			deadline: 100 * time.Millisecond,
			want:     []string{"GET {url}: timed out after"},
			wantCode: domain.CodePullTimeout,
			timeout:  true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newSource(t, Options{BaseURL: sourcetest.ServeBlocking(t, tt.handler)})
			snap, err := pull(t, s, tt.deadline)
			msg := sourcetest.Failure(t, snap, err, tt.wantCode, tt.timeout)
			sourcetest.Mentions(t, msg, tt.want, "{url}", s.URL())
		})
	}
}

// TestPullThenValidate covers the whole path for values that parse but
// break the snapshot invariants: the source passes them on and
// domain.ValidateSnapshot names rank and field.
func TestPullThenValidate(t *testing.T) {
	capacity := cacheConfig(`engine="0",num_gpu_blocks="100"`, `engine="1",num_gpu_blocks="100"`)
	tests := []struct {
		name string
		body string
		want string
	}{
		{"negative gauge", gauges("1", "-1", "0", "0", "0.1", "0.1"), "rank 1: num_running_reqs is negative (-1)"},
		{"usage above 1", gauges("1", "1", "0", "0", "1.5", "0.1") + capacity, "rank 0: num_used_tokens 2400 exceeds max_total_num_tokens 1600"},
		{"NaN usage", gauges("1", "1", "0", "0", "0.1", "NaN"), "rank 1: token_usage is not finite (NaN)"},
		{"Inf usage", gauges("1", "1", "0", "0", "+Inf", "0.1") + capacity, "rank 0: token_usage is not finite (+Inf)"},
		{"running above --max-num-seqs", gauges("1", "300", "0", "0", "0.1", "0.1"), "rank 1: num_running_reqs 300 exceeds max_running_requests 256"},
		{"missing rank", "vllm:num_requests_running{engine=\"0\"} 1\nvllm:num_requests_waiting{engine=\"0\"} 0\nvllm:kv_cache_usage_perc{engine=\"0\"} 0\n",
			"rank set changed: missing [1]"},
		{"extra rank", gauges("1", "1", "0", "0", "0.1", "0.1") +
			"vllm:num_requests_running{engine=\"2\"} 1\nvllm:num_requests_waiting{engine=\"2\"} 0\nvllm:kv_cache_usage_perc{engine=\"2\"} 0\n",
			"rank set changed: unexpected [2]"},
		{"rank beyond int32", strings.ReplaceAll(gauges("1", "1", "0", "0", "0.1", "0.1"), `engine="1"`, `engine="4294967296"`), "dp_rank 4294967296 is outside 0..2147483647"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			url := sourcetest.Serve(t, serveBody(tt.body))
			snap, err := pull(t, newSource(t, Options{BaseURL: url}), sourcetest.Wait)
			sourcetest.Rejected(t, snap, err, tt.want)
		})
	}
}

func TestNew(t *testing.T) {
	tests := []struct {
		name    string
		opts    Options
		wantErr string // the whole message; "" means valid
		wantURL string
	}{
		{name: "plain", opts: Options{BaseURL: "http://127.0.0.1:8000"}, wantURL: "http://127.0.0.1:8000/metrics"},
		{name: "trailing slash", opts: Options{BaseURL: "http://127.0.0.1:8000/"}, wantURL: "http://127.0.0.1:8000/metrics"},
		{name: "path prefix", opts: Options{BaseURL: "https://gw.example/vllm/"}, wantURL: "https://gw.example/vllm/metrics"},
		{name: "password redacted", opts: Options{BaseURL: "http://u:pw@127.0.0.1:8000"}, wantURL: "http://u:xxxxx@127.0.0.1:8000/metrics"},
		{name: "metrics URL", opts: Options{BaseURL: "http://127.0.0.1:8000/metrics"}, wantURL: "http://127.0.0.1:8000/metrics"},
		{name: "metrics URL with a query", opts: Options{BaseURL: "http://127.0.0.1:8000/metrics?name[]=x"}, wantURL: "http://127.0.0.1:8000/metrics"},
		// The rest of the URL checks are httpfetch's; these messages carry
		// this source's words.
		{name: "empty", opts: Options{}, wantErr: "--engine-url is required for the vllm-metrics source (for example http://127.0.0.1:8000)"},
		{name: "query", opts: Options{BaseURL: "http://127.0.0.1:8000/?x=1"},
			wantErr: `--engine-url "http://127.0.0.1:8000/?x=1": give the server's base URL without a query; /metrics is added`},
		{name: "key with newline", opts: Options{BaseURL: "http://127.0.0.1:8000", APIKey: "a\r\nb"}, wantErr: "--engine-api-key contains a control character"},
		{name: "negative body bound", opts: Options{BaseURL: "http://127.0.0.1:8000", MaxBodyBytes: -1}, wantErr: "vllm-metrics max body bytes must be > 0, got -1"},
		{name: "negative max running", opts: Options{BaseURL: "http://127.0.0.1:8000", MaxRunningRequests: -1},
			wantErr: "--vllm-max-running-requests -1: must not be negative (0: 256, vLLM's default --max-num-seqs)"},
		{name: "body bound named before max running", opts: Options{BaseURL: "http://127.0.0.1:8000", MaxBodyBytes: -1, MaxRunningRequests: -1},
			wantErr: "vllm-metrics max body bytes must be > 0, got -1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.wantErr != "" {
				_, err := New(tt.opts)
				sourcetest.Invalid(t, err, tt.wantErr)
				return
			}
			if s := newSource(t, tt.opts); s.URL() != tt.wantURL {
				t.Errorf("URL() = %s, want %s", s.URL(), tt.wantURL)
			}
		})
	}
}

// TestPullCopiedMetricsURL: --engine-url http://host:8000/metrics, the URL
// people copy, scrapes /metrics, not /metrics/metrics.
func TestPullCopiedMetricsURL(t *testing.T) {
	url := sourcetest.Serve(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/metrics" {
			http.NotFound(w, r)
			return
		}
		serveBody(readFixture(t))(w, r)
	})
	snap, err := pull(t, newSource(t, Options{BaseURL: url + "/metrics"}), sourcetest.Wait)
	if err != nil || len(snap.Ranks) == 0 {
		t.Fatalf("Pull: %d ranks, %v", len(snap.Ranks), err)
	}
}
