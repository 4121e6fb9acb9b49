package enginesim

import (
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/loadreporter/loadreporter/cmd/loadreporter/enginesim/model"
)

// metrics is /metrics in SGLang's names (and, on request, vLLM's), on a
// registry of its own. The scheduler gauges move only when a rank
// refreshes its metrics snapshot (every --decode-log-interval decode
// steps, after a prefill, on going idle), as SGLang's do; the counters and
// histograms move as requests finish, as SGLang's tokenizer-side ones do.
type metrics struct {
	reg *prometheus.Registry

	running, queue, usage, used, throughput, hitRate *prometheus.GaugeVec
	rankLabels                                       []prometheus.Labels

	promptTokens, genTokens, requests prometheus.Counter
	ttft, itl, e2e                    prometheus.Observer

	vllm *vllmMetrics // nil unless --vllm-metrics
}

// vllmMetrics are vLLM's names for the same, one series per engine (DP
// rank), for the vllm-metrics source.
type vllmMetrics struct {
	running, waiting, usage *prometheus.GaugeVec
	genTokens, promptTokens *prometheus.CounterVec
	cacheQueries, cacheHits *prometheus.CounterVec
	engineLabels            []prometheus.Labels
}

// Buckets like SGLang's TokenizerMetricsCollector defaults (they changed
// between releases; these span the same range).
var (
	ttftBuckets = []float64{0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 15, 20, 25, 30}
	itlBuckets  = []float64{0.002, 0.004, 0.006, 0.008, 0.010, 0.015, 0.020, 0.025, 0.030, 0.035, 0.040, 0.060, 0.080, 0.100, 0.200, 0.400, 0.600, 0.800, 1, 2, 4, 6, 8}
	e2eBuckets  = []float64{0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400, 800}
)

func newMetrics(c Config) *metrics {
	m := &metrics{reg: prometheus.NewRegistry()}
	// SGLang's scheduler labels: model_name, engine_type, tp_rank,
	// pp_rank, moe_ep_rank, and dp_rank when there are DP ranks.
	names := []string{"model_name", "engine_type", "tp_rank", "pp_rank", "moe_ep_rank"}
	dp := c.Params.DPSize > 1
	if dp {
		names = append(names, "dp_rank")
	}
	gauge := func(name, help string) *prometheus.GaugeVec {
		g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, names)
		m.reg.MustRegister(g)
		return g
	}
	m.running = gauge("sglang:num_running_reqs", "The number of running requests.")
	m.queue = gauge("sglang:num_queue_reqs", "The number of requests in the waiting queue.")
	m.usage = gauge("sglang:token_usage", "The token usage.")
	m.used = gauge("sglang:num_used_tokens", "The number of used tokens.")
	m.throughput = gauge("sglang:gen_throughput", "The generation throughput (token/s).")
	m.hitRate = gauge("sglang:cache_hit_rate", "The prefix cache hit rate.")
	for r := range c.Params.DPSize {
		l := prometheus.Labels{"model_name": c.ServedModelName, "engine_type": "unified", "tp_rank": "0", "pp_rank": "0", "moe_ep_rank": "0"}
		if dp {
			l["dp_rank"] = strconv.Itoa(r)
		}
		m.rankLabels = append(m.rankLabels, l)
	}

	model := prometheus.Labels{"model_name": c.ServedModelName}
	counter := func(name, help string) prometheus.Counter {
		v := prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, []string{"model_name"})
		m.reg.MustRegister(v)
		return v.With(model)
	}
	m.promptTokens = counter("sglang:prompt_tokens_total", "Number of prefill tokens processed.")
	m.genTokens = counter("sglang:generation_tokens_total", "Number of generation tokens processed.")
	m.requests = counter("sglang:num_requests_total", "Number of requests processed.")
	histogram := func(name, help string, buckets []float64) prometheus.Observer {
		v := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets}, []string{"model_name"})
		m.reg.MustRegister(v)
		return v.With(model)
	}
	m.ttft = histogram("sglang:time_to_first_token_seconds", "Histogram of time to first token in seconds.", ttftBuckets)
	m.itl = histogram("sglang:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", itlBuckets)
	m.e2e = histogram("sglang:e2e_request_latency_seconds", "Histogram of End-to-end request latency in seconds", e2eBuckets)

	if c.VLLMMetrics {
		m.vllm = newVLLMMetrics(m.reg, c)
	}
	return m
}

func newVLLMMetrics(reg *prometheus.Registry, c Config) *vllmMetrics {
	v := &vllmMetrics{}
	labels := []string{"engine", "model_name"}
	gauge := func(name, help string) *prometheus.GaugeVec {
		g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, labels)
		reg.MustRegister(g)
		return g
	}
	counter := func(name, help string) *prometheus.CounterVec {
		cv := prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
		reg.MustRegister(cv)
		return cv
	}
	v.running = gauge("vllm:num_requests_running", "Number of requests in model execution batches.")
	v.waiting = gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.")
	v.usage = gauge("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.")
	v.genTokens = counter("vllm:generation_tokens_total", "Number of generation tokens processed.")
	v.promptTokens = counter("vllm:prompt_tokens_total", "Number of prefill tokens processed.")
	v.cacheQueries = counter("vllm:prefix_cache_queries_total", "Prefix cache queries, in terms of number of queried tokens.")
	v.cacheHits = counter("vllm:prefix_cache_hits_total", "Prefix cache hits, in terms of number of cached tokens.")
	// vLLM's cache config, once per server: the capacity is
	// num_gpu_blocks × block_size tokens.
	const blockSize = 16
	info := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "vllm:cache_config_info", Help: "Information of the LLMEngine CacheConfig"},
		[]string{"block_size", "num_gpu_blocks"})
	reg.MustRegister(info)
	info.WithLabelValues(strconv.Itoa(blockSize), strconv.FormatInt(c.Params.MaxTotalNumTokens/blockSize, 10)).Set(1)
	for r := range c.Params.DPSize {
		l := prometheus.Labels{"engine": strconv.Itoa(r), "model_name": c.ServedModelName}
		v.engineLabels = append(v.engineLabels, l)
		// Counters are exposed from the start, at 0.
		v.genTokens.With(l)
		v.promptTokens.With(l)
		v.cacheQueries.With(l)
		v.cacheHits.With(l)
	}
	return v
}

// snapshot sets rank's gauges from its metrics snapshot.
func (m *metrics) snapshot(rank int, l model.Load) {
	lb := m.rankLabels[rank]
	m.running.With(lb).Set(float64(l.NumRunningReqs))
	m.queue.With(lb).Set(float64(l.NumWaitingReqs))
	m.usage.With(lb).Set(l.TokenUsage)
	m.used.With(lb).Set(float64(l.NumUsedTokens))
	m.throughput.With(lb).Set(l.GenThroughput)
	m.hitRate.With(lb).Set(l.CacheHitRate)
	if v := m.vllm; v != nil {
		el := v.engineLabels[rank]
		v.running.With(el).Set(float64(l.NumRunningReqs))
		v.waiting.With(el).Set(float64(l.NumWaitingReqs))
		v.usage.With(el).Set(l.TokenUsage)
	}
}

// submitted counts a request's prompt where vLLM does (its engine's
// prefix-cache queries, which never hit: there is no cache).
func (m *metrics) submitted(f *flight) {
	if v := m.vllm; v != nil && !f.quiet {
		el := v.engineLabels[f.stats.Rank]
		v.promptTokens.With(el).Add(float64(f.stats.PromptTokens))
		v.cacheQueries.With(el).Add(float64(f.stats.PromptTokens))
	}
}

// token observes a token: the inter-token gap, and vLLM's per-engine
// generation counter.
func (m *metrics) token(f *flight, k int, _ time.Time, gap time.Duration) {
	if f.quiet {
		return
	}
	if k > 1 {
		m.itl.Observe(gap.Seconds())
	}
	if v := m.vllm; v != nil {
		v.genTokens.With(v.engineLabels[f.stats.Rank]).Inc()
	}
}

// finished observes a request that got its last token, as SGLang's
// tokenizer manager does; a cancelled request is not counted.
func (m *metrics) finished(f *flight, st model.RequestStats) {
	if f.quiet || st.Cancelled {
		return
	}
	m.requests.Inc()
	m.promptTokens.Add(float64(st.PromptTokens))
	m.genTokens.Add(float64(st.OutputTokens))
	if !st.FirstToken.IsZero() {
		m.ttft.Observe(st.TTFT().Seconds())
	}
	m.e2e.Observe(st.E2E().Seconds())
}

func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}
