// Package vllm is the snapshot source for a vLLM server's Prometheus
// /metrics endpoint (docs/sources.md, source "vllm-metrics"): one rank per value of
// the engine label, which vLLM sets to the data-parallel rank.
//
// The exposition is parsed with github.com/prometheus/common/expfmt, never
// by hand. vLLM publishes less than SGLang's /v1/loads, so most of a rank's
// load is either derived or left at zero:
//
//	RankLoad field               from vLLM
//	---------------------------  -----------------------------------------------------------------
//	num_running_reqs             vllm:num_requests_running (gauge; must be integral)
//	num_waiting_reqs             vllm:num_requests_waiting (gauge; must be integral)
//	token_usage                  vllm:kv_cache_usage_perc, or the older vllm:gpu_cache_usage_perc
//	max_total_num_tokens         num_gpu_blocks × block_size, labels of vllm:cache_config_info;
//	                             0 when vLLM does not expose them
//	num_used_tokens              round(token_usage × max_total_num_tokens); 0 when the max is 0
//	max_running_requests         not published: Options.MaxRunningRequests, which the operator
//	                             sets to vLLM's --max-num-seqs (default 256)
//	gen_throughput               Δ vllm:generation_tokens_total / Δ seconds between two scrapes
//	cache_hit_rate               Δ vllm:prefix_cache_hits_total / Δ vllm:prefix_cache_queries_total
//	                             (older: vllm:gpu_prefix_cache_*) between two scrapes
//	num_waiting_uncached_tokens  not published: 0
//	num_total_tokens             not published: 0
//	utilization                  not published: 0
//	snapshot time                not published: zero, so the report uses the pull-completion time
//
// vllm:kv_cache_usage_perc is a fraction (1 means full) despite its name, the
// same scale as SGLang's token_usage, so it is passed on unchanged.
//
// The two rates come from counters, which only mean something as a
// difference: the Source keeps the previous scrape's counters per engine, so
// the first scrape (and the first after an engine appears, or after more
// than maxRateSpan without a scrape) reports 0, a counter that went
// backwards (an engine restart) reports 0, and an interval
// with no prefix-cache queries reports a hit rate of 0.
//
// Series without an engine label (vLLM before the V1 engine, one engine per
// server) are rank 0.
//
// The scrape itself (checking --engine-url, the bearer key, the kept-alive
// client, status, size bound, timeout and their messages) is
// internal/httpfetch's, shared with the sglang-http source; this package
// knows the endpoint and the exposition.
//
// It must not know about the fire loop, the pull budget (that arrives as the
// context's deadline or cancellation), the expected rank set, sessions or
// transports to routers. Whether a snapshot is consistent (negative or NaN
// values, usage above the maximum, missing ranks) is judged by
// domain.ValidateSnapshot, not here.
//
// Name, Options (with RegisterFlags declaring its own flags,
// --vllm-max-running-requests and --vllm-max-total-num-tokens) and New
// are its row in serve's source registry
// (cmd/loadreporter/app/sources.go; docs/adding-a-source.md).
package vllm
