package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"time"
)

// Paths of the stand-in engine.
const (
	pathGenerate = "/generate" // SGLang's native generation endpoint
	pathMetrics  = "/metrics"
	pathLoads    = "/v1/loads"
	pathHealth   = "/health"
)

// generateRequest is the part of a POST /generate body the stand-in reads:
// stream asks for server-sent events; hold keeps the stream open with an
// event a second until the client goes (a long generation).
type generateRequest struct {
	Stream bool `json:"stream"`
	Hold   bool `json:"hold"`
}

// engine is the stand-in engine: it answers at once, with bodies made
// ahead so that its own cost is the same small constant whoever calls, and
// counts what the rows compare.
type engine struct {
	events     int           // events of a streamed /generate, before [DONE]
	holdEvery  time.Duration // between the events of a held stream
	answer     []byte        // the non-streaming /generate body
	event      []byte        // one SSE event, "data: {…}\n\n"
	exposition []byte        // the /metrics body
	stop       chan struct{} // closed when the bench ends: held streams end

	metricsHits atomic.Int64
	loadsHits   atomic.Int64
	held        atomic.Int64 // held streams open now
}

func newEngine(events int, holdEvery time.Duration) *engine {
	meta := `"meta_info":{"id":"frontbench","finish_reason":null,"prompt_tokens":24,"completion_tokens":1,"cached_tokens":0}`
	return &engine{
		events:    events,
		holdEvery: holdEvery,
		answer: []byte(`{"text":" The quick brown fox jumps over the lazy dog, sixteen tokens in all.",` +
			`"meta_info":{"id":"frontbench","finish_reason":{"type":"length","length":16},` +
			`"prompt_tokens":24,"completion_tokens":16,"cached_tokens":0,"e2e_latency":0.0}}` + "\n"),
		event:      []byte(`data: {"text":" fox",` + meta + `,"index":0}` + "\n\n"),
		exposition: []byte(sglangExposition("meta-llama/Llama-3.1-8B-Instruct")),
		stop:       make(chan struct{}),
	}
}

func (e *engine) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.URL.Path == pathGenerate && r.Method == http.MethodPost:
		e.generate(w, r)
	case r.URL.Path == pathMetrics && r.Method == http.MethodGet:
		e.metricsHits.Add(1)
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		_, _ = w.Write(e.exposition)
	case r.URL.Path == pathLoads && r.Method == http.MethodGet:
		e.loadsHits.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(sglangLoads(time.Now()))
	case r.URL.Path == pathHealth:
		w.WriteHeader(http.StatusOK)
	default:
		http.NotFound(w, r)
	}
}

func (e *engine) generate(w http.ResponseWriter, r *http.Request) {
	var req generateRequest
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(&req); err != nil {
		http.Error(w, `{"error":"body is not JSON"}`, http.StatusBadRequest)
		return
	}
	if !req.Stream {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(e.answer)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	rc := http.NewResponseController(w)
	if req.Hold {
		e.hold(w, r, rc)
		return
	}
	for range e.events {
		if _, err := w.Write(e.event); err != nil {
			return
		}
		if err := rc.Flush(); err != nil {
			return
		}
	}
	_, _ = w.Write([]byte("data: [DONE]\n\n"))
	_ = rc.Flush()
}

// hold sends an event at once, then one per holdEvery, until the client
// goes or the bench ends.
func (e *engine) hold(w http.ResponseWriter, r *http.Request, rc *http.ResponseController) {
	e.held.Add(1)
	defer e.held.Add(-1)
	t := time.NewTicker(e.holdEvery)
	defer t.Stop()
	for {
		if _, err := w.Write(e.event); err != nil {
			return
		}
		if err := rc.Flush(); err != nil {
			return
		}
		select {
		case <-t.C:
		case <-r.Context().Done():
			return
		case <-e.stop:
			_, _ = w.Write([]byte("data: [DONE]\n\n"))
			_ = rc.Flush()
			return
		}
	}
}

// sglangLoads is SGLang's GET /v1/loads?include=core envelope, two ranks
// (the shape of tests/testdata/sglang-v1-loads-core.json).
func sglangLoads(now time.Time) []byte {
	rank := func(i, running, waiting, used int) string {
		return fmt.Sprintf(`{"dp_rank":%d,"num_running_reqs":%d,"num_waiting_reqs":%d,"num_waiting_uncached_tokens":%d,`+
			`"num_used_tokens":%d,"num_total_tokens":%d,"max_total_num_tokens":220000,"max_running_requests":256,`+
			`"token_usage":%.4f,"gen_throughput":1834.27,"cache_hit_rate":0.4127,"utilization":0.6012}`,
			i, running, waiting, waiting*1024, used, used+waiting*1024, float64(used)/220000)
	}
	return []byte(`{"timestamp":"` + now.UTC().Format("2006-01-02T15:04:05.000000+00:00") + `","version":"0.5.6",` +
		`"accelerator":"NVIDIA H200","num_accelerators":8,"loads":[` +
		rank(0, 12, 3, 61234) + "," + rank(1, 9, 0, 40011) + "]}\n")
}

// sglangExposition is an SGLang-like /metrics body of a few KiB: the gauges
// and counters of a running engine and its latency histograms.
func sglangExposition(model string) string {
	var b strings.Builder
	lbl := fmt.Sprintf(`model_name=%q,engine_type="unified",tp_rank="0",pp_rank="0"`, model)
	metric := func(name, typ, help string, v float64) {
		fmt.Fprintf(&b, "# HELP sglang:%s %s\n# TYPE sglang:%s %s\nsglang:%s{%s} %g\n", name, help, name, typ, name, lbl, v)
	}
	metric("num_running_reqs", "gauge", "The number of running requests.", 21)
	metric("num_queue_reqs", "gauge", "The number of requests in the waiting queue.", 3)
	metric("num_used_tokens", "gauge", "The number of used tokens.", 101245)
	metric("token_usage", "gauge", "The token usage.", 0.2301)
	metric("gen_throughput", "gauge", "The generation throughput (token/s).", 3337.17)
	metric("cache_hit_rate", "gauge", "The prefix cache hit rate.", 0.4057)
	metric("max_total_num_tokens", "gauge", "Maximum total number of tokens in the KV cache.", 440000)
	metric("prompt_tokens_total", "counter", "Number of prefill tokens processed.", 8.128902e+06)
	metric("generation_tokens_total", "counter", "Number of generation tokens processed.", 7.557572e+06)
	metric("num_requests_total", "counter", "Number of requests processed.", 52410)
	histogram := func(name, help string, bounds []float64, scale float64) {
		fmt.Fprintf(&b, "# HELP sglang:%s %s\n# TYPE sglang:%s histogram\n", name, help, name)
		n := 0.0
		for i, le := range bounds {
			n += float64(50 + 40*i)
			fmt.Fprintf(&b, "sglang:%s_bucket{%s,le=\"%g\"} %g\n", name, lbl, le, n)
		}
		fmt.Fprintf(&b, "sglang:%s_bucket{%s,le=\"+Inf\"} %g\n", name, lbl, n)
		fmt.Fprintf(&b, "sglang:%s_sum{%s} %g\nsglang:%s_count{%s} %g\n", name, lbl, n*scale, name, lbl, n)
	}
	latency := []float64{0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10}
	histogram("time_to_first_token_seconds", "Histogram of time to first token in seconds.", latency, 0.12)
	histogram("inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", latency[:10], 0.02)
	histogram("e2e_request_latency_seconds", "Histogram of end-to-end request latency in seconds.", latency, 3.4)
	return b.String()
}
