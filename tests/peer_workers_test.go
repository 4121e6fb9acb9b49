package tests

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/loadreporter/loadreporter/cmd/loadreporter/app"
)

// peerLoad is what a stand-in engine says it holds, on its one rank.
type peerLoad struct {
	Running, Waiting, Used, Capacity int64
	GenThroughput                    float64 // tokens/s
	// Usage is the KV usage when Capacity is 0: a vLLM engine that
	// publishes no vllm:cache_config_info, whose capacity nobody knows.
	Usage float64
}

// Loads the router tests give their two workers: one idle, one heavily
// loaded by every measure a router reads (requests, tokens, KV usage 0.9,
// more waiting than SMG's overload threshold of 8). The heavy one
// generates, and says so in /v1/loads and /metrics alike: SMG's expected
// wait divides the queued tokens by gen_throughput (2000 when 0) and adds
// 1024 tokens per request it sent since the last poll
// (smg-project/smg@f8daa88 policies/least_load.rs:181-231), so a /metrics
// without sglang:gen_throughput made B, read from it, cheaper than an idle
// A after two requests.
var (
	lightLoad = peerLoad{Running: 0, Waiting: 0, Used: 0, Capacity: 100000}
	heavyLoad = peerLoad{Running: 50, Waiting: 30, Used: 90000, Capacity: 100000, GenThroughput: 1500}
	// heavyUnknownCapacity is heavyLoad on a vLLM engine that does not say
	// its capacity: the reporter's max_total_num_tokens is 0.
	heavyUnknownCapacity = peerLoad{Running: 50, Waiting: 30, Usage: 0.9, GenThroughput: 1500}
)

// peerEngine stands in for an inference engine behind a front: SGLang's
// HTTP API (flavour "sglang": /v1/loads, /metrics in SGLang's names,
// /server_info, /model_info, /generate) or vLLM's (flavour "vllm": /metrics
// in vLLM's names, /version, /v1/completions), with the discovery and
// health routes the routers call at registration. Its load is the test's;
// stale stamps SGLang's per-rank snapshot time 5 s in the past (the
// scheduler stopped refreshing it); down drops every connection (the
// engine process gone).
type peerEngine struct {
	flavour string
	srv     *httptest.Server
	load    peerLoad
	stale   atomic.Bool
	down    atomic.Bool
}

func newPeerEngine(t *testing.T, flavour string, load peerLoad) *peerEngine {
	t.Helper()
	e := &peerEngine{flavour: flavour, load: load}
	e.srv = httptest.NewServer(http.HandlerFunc(e.serve))
	t.Cleanup(e.srv.Close)
	return e
}

const peerModel = "peer-model"

func (e *peerEngine) serve(w http.ResponseWriter, r *http.Request) {
	if e.down.Load() {
		if c, _, err := http.NewResponseController(w).Hijack(); err == nil {
			_ = c.Close()
		}
		return
	}
	l := e.load
	usage := l.Usage
	if l.Capacity > 0 {
		usage = float64(l.Used) / float64(l.Capacity)
	}
	owner := "sglang"
	if e.flavour == "vllm" {
		owner = "vllm"
	}
	switch r.URL.Path {
	case "/health", "/health_generate":
		w.WriteHeader(http.StatusOK)
	case "/v1/models":
		writePeerJSON(w, map[string]any{"object": "list", "data": []any{map[string]any{
			"id": peerModel, "object": "model", "created": 0, "owned_by": owner, "root": peerModel, "max_model_len": 4096}}})
	case "/version":
		if e.flavour != "vllm" {
			http.NotFound(w, r)
			return
		}
		writePeerJSON(w, map[string]any{"version": "0.11.0"})
	case "/server_info", "/get_server_info":
		writePeerJSON(w, map[string]any{"model_path": peerModel, "tokenizer_path": peerModel, "dp_size": 1, "tp_size": 1,
			"version": "0.5.23", "max_total_num_tokens": l.Capacity, "internal_states": []any{map[string]any{}}})
	case "/model_info", "/get_model_info":
		writePeerJSON(w, map[string]any{"model_path": peerModel, "tokenizer_path": peerModel, "is_generation": true,
			"model_type": "llama", "architectures": []string{"LlamaForCausalLM"}})
	case "/v1/loads":
		if e.flavour != "sglang" {
			http.NotFound(w, r)
			return
		}
		at := time.Now()
		if e.stale.Load() {
			at = at.Add(-5 * time.Second)
		}
		writePeerJSON(w, map[string]any{"timestamp": at.UTC().Format(time.RFC3339Nano), "version": "0.5.23", "loads": []any{map[string]any{
			"timestamp": float64(at.UnixMilli()) / 1e3, "dp_rank": 0,
			"num_running_reqs": l.Running, "num_waiting_reqs": l.Waiting, "num_waiting_uncached_tokens": 0,
			"num_used_tokens": l.Used, "num_total_tokens": l.Used, "max_total_num_tokens": l.Capacity,
			"max_running_requests": 256, "token_usage": usage, "gen_throughput": l.GenThroughput, "cache_hit_rate": 0.0, "utilization": usage,
		}}})
	case "/metrics":
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		if e.flavour == "vllm" {
			fmt.Fprintf(w, "# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{engine=\"0\",model_name=%q} %d\n"+
				"# TYPE vllm:num_requests_waiting gauge\nvllm:num_requests_waiting{engine=\"0\",model_name=%q} %d\n"+
				"# TYPE vllm:kv_cache_usage_perc gauge\nvllm:kv_cache_usage_perc{engine=\"0\",model_name=%q} %g\n",
				peerModel, l.Running, peerModel, l.Waiting, peerModel, usage)
			if l.Capacity > 0 {
				fmt.Fprintf(w, "# TYPE vllm:cache_config_info gauge\nvllm:cache_config_info{block_size=\"16\",engine=\"0\",num_gpu_blocks=\"%d\"} 1\n",
					l.Capacity/16)
			}
			return
		}
		fmt.Fprintf(w, "# TYPE sglang:num_running_reqs gauge\nsglang:num_running_reqs{model_name=%q} %d\n"+
			"# TYPE sglang:num_queue_reqs gauge\nsglang:num_queue_reqs{model_name=%q} %d\n"+
			"# TYPE sglang:token_usage gauge\nsglang:token_usage{model_name=%q} %g\n"+
			"# TYPE sglang:gen_throughput gauge\nsglang:gen_throughput{model_name=%q} %g\n",
			peerModel, l.Running, peerModel, l.Waiting, peerModel, usage, peerModel, l.GenThroughput)
	case "/generate", "/v1/completions", "/v1/chat/completions":
		if r.Method != http.MethodPost {
			http.Error(w, "POST only", http.StatusMethodNotAllowed)
			return
		}
		writePeerJSON(w, map[string]any{
			"text": "hi", "meta_info": map[string]any{"id": "x", "finish_reason": map[string]any{"type": "length", "length": 1},
				"prompt_tokens": 1, "completion_tokens": 1, "cached_tokens": 0},
			"id": "cmpl-x", "object": "text_completion", "created": 0, "model": peerModel,
			"choices": []any{map[string]any{"index": 0, "text": "hi", "finish_reason": "length"}},
			"usage":   map[string]any{"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
		})
	default:
		writePeerJSONStatus(w, http.StatusNotFound, map[string]any{"detail": "Not Found"})
	}
}

func writePeerJSON(w http.ResponseWriter, v any) { writePeerJSONStatus(w, http.StatusOK, v) }

func writePeerJSONStatus(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// peerWorker is one worker as deployed in front mode: the engine, and the
// reporter at the worker's address passing the engine's API and answering
// the routers' load polls itself.
type peerWorker struct {
	name   string
	engine *peerEngine
	main   *app.Main
	url    string // the worker URL routers are given: the front
}

// startPeerWorker boots the reporter in front of a new engine: sglang-http
// for an SGLang engine, vllm-metrics for a vLLM one. Each poll pulls anew
// (--poll-max-age 50ms, well under any router's interval), and a snapshot
// more than 1 s old is STALE. History is off, so that every report the
// reporter builds answers a router's poll.
func startPeerWorker(t *testing.T, name, flavour string, load peerLoad) *peerWorker {
	t.Helper()
	e := newPeerEngine(t, flavour, load)
	c := testConfig()
	c.Source.Name, c.Source.EngineURL = "sglang-http", e.srv.URL
	if flavour == "vllm" {
		c.Source.Name = "vllm-metrics"
	}
	c.Front.Listen = "127.0.0.1:0"
	c.Poll.MaxAge = 50 * time.Millisecond
	c.Fire.StaleAfter = time.Second
	c.History.Interval = 0 // no report but the routers' polls
	m := startMain(t, c, nil)
	return &peerWorker{name: name, engine: e, main: m, url: "http://" + m.FrontAddr()}
}

// reports is how many reports of status the worker's reporter has built:
// with no session open, one per router poll that reached the front.
func (w *peerWorker) reports(t testing.TB, status string) int {
	t.Helper()
	fams, err := scrapeFamilies("http://" + w.main.Addr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	return int(byLabel(fams["loadreporter_reports_total"], "status", nil)[status])
}

// port is the worker URL's port, which routers keep in their labels.
func (w *peerWorker) port() string { return w.url[strings.LastIndex(w.url, ":")+1:] }

// whose maps a router's worker label (a URL) to the worker's name.
func whose(label string, ws []*peerWorker) string {
	for _, w := range ws {
		if strings.HasSuffix(strings.TrimSuffix(label, "/"), ":"+w.port()) {
			return w.name
		}
	}
	return label
}

// portOf is strconv'd for launch flags.
func portOf(p int) string { return strconv.Itoa(p) }
