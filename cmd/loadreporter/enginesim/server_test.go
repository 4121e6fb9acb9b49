package enginesim

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	prommodel "github.com/prometheus/common/model"

	"github.com/loadreporter/loadreporter/cmd/loadreporter/enginesim/model"
)

// TestGenerateStreamsEventByEvent: /generate with stream answers at once
// and then sends each token as its own SSE event the moment the engine
// produces it (event k is read before the step of token k+1 exists), in
// SGLang's framing: "data: " + {text so far, output_ids, meta_info} +
// "\n\n", the last with its finish reason, then "data: [DONE]"
// (python/sglang/srt/entrypoints/http_server.py, generate_request, in
// sgl-project/sglang at 0025436eab0556737d615b36a4dd3e1e26e82f3d; meta_info
// as the tokenizer manager builds it).
func TestGenerateStreamsEventByEvent(t *testing.T) {
	t.Parallel()
	h := start(t, nil)
	resp := h.post(h.ctx, "/generate", map[string]any{
		"text": prompt(10), "sampling_params": map[string]any{"max_new_tokens": 4}, "stream": true, "rid": "r1",
	})
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != 200 || !strings.HasPrefix(ct, "text/event-stream") {
		t.Fatalf("status %d, content type %q", resp.StatusCode, ct)
	}
	ev := newEvents(t, resp.Body)
	h.waitSubmitted(1)
	for k := 1; k <= 4; k++ {
		at := h.step()
		want := t0.Add(prefillTime(10) + time.Duration(k-1)*decodeTime(1))
		if !at.Equal(want) {
			t.Fatalf("token %d's step ended at %v, want %v", k, at.Sub(t0), want.Sub(t0))
		}
		var out generateOutput
		var raw struct {
			MetaInfo map[string]json.RawMessage `json:"meta_info"`
		}
		data := ev.next()
		if err := json.Unmarshal([]byte(data), &out); err != nil {
			t.Fatal(err)
		}
		_ = json.Unmarshal([]byte(data), &raw)
		if out.Text != outputText(k) || len(out.OutputIDs) != k || out.MetaInfo.CompletionTokens != k || out.MetaInfo.ID != "r1" || out.MetaInfo.PromptTokens != 10 {
			t.Errorf("event %d: %s", k, data)
		}
		if fr := string(raw.MetaInfo["finish_reason"]); (k < 4) != (fr == "null") {
			t.Errorf("event %d: finish_reason %s", k, fr)
		}
	}
	if data := ev.next(); data != "[DONE]" {
		t.Fatalf("after the last token: %q, want [DONE]", data)
	}
	if _, ok := h.settle(); ok {
		t.Error("the engine is still busy after the request finished")
	}
}

// TestGenerateAnswersOnce: without stream, /generate answers with the
// whole text and meta_info when the last token comes: the finish reason
// is length for a request that set max_new_tokens, stop (at Llama 3's
// end-of-turn token) for one that did not, and token ids count as the
// prompt.
func TestGenerateAnswersOnce(t *testing.T) {
	t.Parallel()
	h := start(t, func(c *Config) { c.DefaultMaxTokens = 3 })
	for _, tc := range []struct {
		body       map[string]any
		prompt     int
		tokens     int
		wantReason string
	}{
		{map[string]any{"text": prompt(7), "sampling_params": map[string]any{"max_new_tokens": 5}}, 7, 5, `{"type":"length","length":5}`},
		{map[string]any{"input_ids": []int{1, 2, 3, 4, 5, 6}}, 6, 3, `{"type":"stop","matched":128009}`},
	} {
		done := make(chan struct{})
		var body []byte
		var status int
		go func() {
			defer close(done)
			resp := h.post(h.ctx, "/generate", tc.body)
			defer resp.Body.Close()
			status = resp.StatusCode
			body, _ = io.ReadAll(resp.Body)
		}()
		h.drive(done)
		var out struct {
			Text     string                     `json:"text"`
			MetaInfo map[string]json.RawMessage `json:"meta_info"`
		}
		if err := json.Unmarshal(body, &out); err != nil || status != 200 {
			t.Fatalf("%d %s", status, body)
		}
		if out.Text != outputText(tc.tokens) || string(out.MetaInfo["finish_reason"]) != tc.wantReason ||
			string(out.MetaInfo["prompt_tokens"]) != itoa(tc.prompt) || string(out.MetaInfo["completion_tokens"]) != itoa(tc.tokens) {
			t.Errorf("%v: %s", tc.body, body)
		}
		if _, ok := out.MetaInfo["e2e_latency"]; !ok {
			t.Errorf("no e2e_latency in %s", body)
		}
	}
	for _, bad := range []map[string]any{
		{}, {"text": []string{"a", "b"}}, {"text": "x", "input_ids": []int{1}}, {"text": ""},
		{"text": "x", "routed_dp_rank": 3}, {"text": "x", "sampling_params": map[string]any{"max_new_tokens": -1}},
	} {
		resp := h.post(h.ctx, "/generate", bad)
		var e errorBody
		_ = json.NewDecoder(resp.Body).Decode(&e)
		resp.Body.Close()
		if resp.StatusCode != 400 || e.Object != "error" || e.Code != 400 || e.Message == "" {
			t.Errorf("%v: %d %+v, want SGLang's 400 error", bad, resp.StatusCode, e)
		}
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// TestChatCompletions: the OpenAI route in SGLang's shapes
// (python/sglang/srt/entrypoints/openai/protocol.py in sgl-project/sglang
// at 004c82e07d876f6e4a0ad6e15325706b0f478f1a): streaming sends a role
// chunk, one content chunk per token, a chunk with the finish reason,
// the usage chunk asked for, then [DONE]; not streaming, one
// chat.completion with usage.
func TestChatCompletions(t *testing.T) {
	t.Parallel()
	h := start(t, nil)
	messages := []map[string]any{{"role": "system", "content": prompt(3)}, {"role": "user", "content": []map[string]string{{"type": "text", "text": prompt(5)}}}}
	// Llama 3's template: 1 + 4 per message + their text + 4.
	wantPrompt := 1 + (4 + 3) + (4 + 5) + 4
	resp := h.post(h.ctx, "/v1/chat/completions", map[string]any{
		"model": "m", "messages": messages, "max_tokens": 2, "stream": true, "stream_options": map[string]any{"include_usage": true},
	})
	defer resp.Body.Close()
	ev := newEvents(t, resp.Body)
	var first chatChunk
	if err := json.Unmarshal([]byte(ev.next()), &first); err != nil || first.Object != "chat.completion.chunk" ||
		*first.Choices[0].Delta.Role != "assistant" || *first.Choices[0].Delta.Content != "" || first.Choices[0].FinishReason != nil {
		t.Fatalf("first chunk %+v %v", first, err)
	}
	h.waitSubmitted(1)
	for k := range 2 {
		h.step()
		var c chatChunk
		if err := json.Unmarshal([]byte(ev.next()), &c); err != nil || c.ID != first.ID || *c.Choices[0].Delta.Content != tokenText(k) {
			t.Fatalf("content chunk %d: %+v %v", k, c, err)
		}
	}
	var fin, use chatChunk
	if err := json.Unmarshal([]byte(ev.next()), &fin); err != nil || fin.Choices[0].FinishReason == nil || *fin.Choices[0].FinishReason != "length" {
		t.Fatalf("finish chunk %+v %v", fin, err)
	}
	if err := json.Unmarshal([]byte(ev.next()), &use); err != nil || len(use.Choices) != 0 || use.Usage == nil ||
		use.Usage.PromptTokens != wantPrompt || use.Usage.CompletionTokens != 2 || use.Usage.TotalTokens != wantPrompt+2 {
		t.Fatalf("usage chunk %+v %v", use, err)
	}
	if d := ev.next(); d != "[DONE]" {
		t.Fatalf("%q, want [DONE]", d)
	}

	done := make(chan struct{})
	var got chatResponse
	go func() {
		defer close(done)
		resp := h.post(h.ctx, "/v1/chat/completions", map[string]any{"messages": messages, "max_completion_tokens": 3})
		defer resp.Body.Close()
		_ = json.NewDecoder(resp.Body).Decode(&got)
	}()
	h.drive(done)
	if got.Object != "chat.completion" || got.Model != h.m.cfg.ServedModelName || len(got.Choices) != 1 ||
		got.Choices[0].Message.Content != outputText(3) || got.Choices[0].FinishReason != "length" ||
		got.Usage.PromptTokens != wantPrompt || got.Usage.CompletionTokens != 3 {
		t.Errorf("answer %+v", got)
	}
}

// TestCancelledClientFreesSlot: a client that goes away takes its
// request out of the batch at once; its KV tokens are freed and the
// request that waited for its slot runs at the next step.
func TestCancelledClientFreesSlot(t *testing.T) {
	t.Parallel()
	h := start(t, func(c *Config) { c.Params.MaxRunningRequests = 1 })
	cancelled := make(chan struct{}, 1)
	d := h.m.drv
	d.mu.Lock()
	prev := d.hooks.finished
	d.hooks.finished = func(f *flight, st model.RequestStats) {
		prev(f, st)
		if st.Cancelled {
			cancelled <- struct{}{}
		}
	}
	d.mu.Unlock()

	ctxA, cancelA := context.WithCancel(h.ctx)
	defer cancelA()
	a := h.post(ctxA, "/generate", map[string]any{"text": prompt(20), "sampling_params": map[string]any{"max_new_tokens": 100}, "stream": true})
	defer a.Body.Close()
	h.waitSubmitted(1)
	b := h.post(h.ctx, "/generate", map[string]any{"text": prompt(8), "sampling_params": map[string]any{"max_new_tokens": 2}, "stream": true})
	defer b.Body.Close()
	h.waitSubmitted(2)
	h.step() // a's prefill
	newEvents(t, a.Body).next()
	var loads []map[string]int64
	if h.get("/get_load", &loads); loads[0]["num_reqs"] != 2 || loads[0]["num_waiting_reqs"] != 1 || loads[0]["num_tokens"] != 21+8 ||
		loads[0]["num_pending_tokens"] != 8 {
		t.Fatalf("before the cancel: %v, want a running (21 tokens) and b waiting (8)", loads)
	}
	cancelA()
	select {
	case <-cancelled:
	case <-h.ctx.Done():
		t.Fatal("the engine never heard of the cancel")
	}
	if h.get("/get_load", &loads); loads[0]["num_reqs"] != 1 || loads[0]["num_tokens"] != 8 || loads[0]["num_pending_tokens"] != 8 {
		t.Fatalf("after the cancel: %v, want only b, waiting", loads)
	}
	h.step() // the decode step a was in ends without it; b is admitted
	h.step() // b's prefill
	var out generateOutput
	if err := json.Unmarshal([]byte(newEvents(t, b.Body).next()), &out); err != nil || out.MetaInfo.CompletionTokens != 1 {
		t.Fatalf("b's first token: %+v %v", out, err)
	}
}

// TestLoadsShapesAndLag: /v1/loads is SGLang's envelope with the include
// groups (v1_loads.py and LoadSnapshot.to_dict, cited in loads.go); it
// reports the published snapshot, which during decoding lags the live
// state that /get_load reports by up to N steps.
func TestLoadsShapesAndLag(t *testing.T) {
	t.Parallel()
	h := start(t, func(c *Config) { c.Params.DPSize = 2; c.Params.LoadSnapshotPublishInterval = 3 })
	var all map[string]any
	if s := h.get("/v1/loads", &all); s != 200 {
		t.Fatalf("status %d", s)
	}
	for _, k := range []string{"timestamp", "version", "accelerator", "num_accelerators", "loads"} {
		if _, ok := all[k]; !ok {
			t.Errorf("envelope has no %s: %v", k, all)
		}
	}
	ranks := all["loads"].([]any)
	r0 := ranks[0].(map[string]any)
	for _, k := range []string{"dp_rank", "num_running_reqs", "num_waiting_reqs", "num_waiting_uncached_tokens", "num_used_tokens",
		"num_total_tokens", "max_total_num_tokens", "max_running_requests", "token_usage", "gen_throughput", "cache_hit_rate",
		"utilization", "memory", "disaggregation", "queues", "timestamp"} {
		if _, ok := r0[k]; !ok {
			t.Errorf("rank 0 has no %s", k)
		}
	}
	if _, ok := r0["speculative"]; ok || len(ranks) != 2 {
		t.Errorf("%d ranks; speculative present: %t (no speculative decoding here)", len(ranks), ok)
	}
	for query, sections := range map[string][]string{
		"include=core": nil, "include=core,queues": {"queues"}, "include=memory&include=disagg": {"memory", "disaggregation"},
		"include=all": {"memory", "disaggregation", "queues"},
	} {
		var got struct{ Loads []map[string]any }
		h.get("/v1/loads?"+query, &got)
		n := 0
		for _, s := range []string{"memory", "disaggregation", "queues"} {
			if _, ok := got.Loads[0][s]; ok {
				n++
			}
		}
		if n != len(sections) || len(got.Loads[0]) != 13+len(sections) {
			t.Errorf("%s: keys %v, want the 13 core keys (timestamp and 12 more) and %v", query, got.Loads[0], sections)
		}
	}
	var e errorBody
	if s := h.get("/v1/loads?include=core,bogus", &e); s != 400 || !strings.Contains(e.Message, "Invalid include sections: {'bogus'}") {
		t.Errorf("unknown section: %d %+v", s, e)
	}
	var one struct{ Loads []map[string]any }
	if h.get("/v1/loads?dp_rank=1", &one); len(one.Loads) != 1 || one.Loads[0]["dp_rank"] != 1.0 {
		t.Errorf("dp_rank=1: %v", one.Loads)
	}

	// Load on rank 0 only; rank 1 stays idle.
	resp := h.post(h.ctx, "/generate", map[string]any{"text": prompt(50), "sampling_params": map[string]any{"max_new_tokens": 20}, "stream": true, "routed_dp_rank": 0})
	defer resp.Body.Close()
	h.waitSubmitted(1)
	h.step() // prefill: published
	used := func() (published, live int64) {
		var v struct {
			Loads []struct {
				NumUsedTokens int64 `json:"num_used_tokens"`
			}
		}
		var g []struct {
			NumTokens int64 `json:"num_tokens"`
		}
		h.get("/v1/loads?include=core", &v)
		h.get("/get_load", &g)
		if v.Loads[1].NumUsedTokens != 0 || g[1].NumTokens != 0 {
			t.Errorf("rank 1 shows load: %v %v", v.Loads[1], g[1])
		}
		return v.Loads[0].NumUsedTokens, g[0].NumTokens
	}
	if p, l := used(); p != 51 || l != 51 {
		t.Fatalf("after the prefill: published %d, live %d, want 51 and 51", p, l)
	}
	for i := 1; i <= 6; i++ {
		h.step()
		p, l := used()
		wantPublished := int64(51 + i/3*3)
		if l != int64(51+i) || p != wantPublished {
			t.Errorf("decode step %d: published %d live %d, want %d and %d", i, p, l, wantPublished, 51+i)
		}
	}

	// The prometheus rendering carries the same numbers.
	req, _ := http.NewRequestWithContext(h.ctx, http.MethodGet, h.url+"/v1/loads?format=prometheus&include=core", nil)
	pr, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Body.Close()
	parser := expfmt.NewTextParser(prommodel.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(pr.Body)
	if err != nil {
		t.Fatal(err)
	}
	if f := fams["sglang_num_used_tokens"]; f == nil || len(f.Metric) != 2 || f.Metric[0].GetGauge().GetValue() != 57 {
		t.Errorf("sglang_num_used_tokens: %v", f)
	}
}

// TestLoadsStampEachRank: each rank of /v1/loads starts with "timestamp",
// under every include, as SGLang 0.5.19 and 0.5.23 send it (LoadSnapshot's
// first field in sglang/srt/managers/load_snapshot.py of their PyPI
// wheels, cited in loads.go): the time the rank's snapshot was published,
// in seconds since the epoch as Python prints a float (to the
// microsecond here). It moves when the rank publishes, not when the
// clock moves or someone reads; ?format=prometheus carries it as the
// first gauge, sglang_timestamp, printed the same way (v1_loads.py's
// _format_loads_prometheus renders every number of to_dict but dp_rank).
func TestLoadsStampEachRank(t *testing.T) {
	t.Parallel()
	h := start(t, func(c *Config) { c.Params.DPSize = 2; c.Params.LoadSnapshotPublishInterval = 3 })
	// python is how Python prints at's time.time() cut to the microsecond:
	// the shortest decimals, at least one.
	python := func(at time.Time) string {
		frac := strings.TrimRight(fmt.Sprintf("%06d", at.Nanosecond()/1000), "0")
		return fmt.Sprintf("%d.%s", at.Unix(), cmp.Or(frac, "0"))
	}
	check := func(when string, want ...time.Time) {
		t.Helper()
		published := h.m.drv.loads()
		for _, query := range []string{"", "?include=core", "?include=all", "?include=core,queues", "?include=memory&include=disagg"} {
			_, b := h.body("/v1/loads" + query)
			var env struct{ Loads []json.RawMessage }
			if err := json.Unmarshal(b, &env); err != nil || len(env.Loads) != len(want) {
				t.Fatalf("%s, /v1/loads%s: %v, %d ranks in %.300s", when, query, err, len(env.Loads), b)
			}
			for r, raw := range env.Loads {
				dec := json.NewDecoder(bytes.NewReader(raw))
				var value json.RawMessage
				_, _ = dec.Token() // {
				key, err := dec.Token()
				if err == nil {
					err = dec.Decode(&value)
				}
				if err != nil || key != "timestamp" || string(value) != python(want[r]) {
					t.Errorf("%s, /v1/loads%s: rank %d starts %v: %s (%v), want timestamp: %s", when, query, r, key, value, err, python(want[r]))
				}
				if !published[r].Timestamp.Equal(want[r]) {
					t.Errorf("%s: rank %d's snapshot was taken at %v, want %v", when, r, published[r].Timestamp, want[r])
				}
			}
		}
		_, b := h.body("/v1/loads?format=prometheus&include=core")
		lines := strings.Split(string(b), "\n")
		if lines[0] != "# TYPE sglang_timestamp gauge" {
			t.Errorf("%s: the prometheus rendering starts %q, want sglang_timestamp", when, lines[0])
		}
		for r, at := range want {
			if line := fmt.Sprintf(`sglang_timestamp{dp_rank="%d"} %s`, r, python(at)); !slices.Contains(lines, line) {
				t.Errorf("%s: no %q in\n%s", when, line, b)
			}
		}
	}

	check("at start", t0, t0)
	// The clock moves with nothing to do: an idle rank republishes its
	// numbers as SGLang's idle loop does, so its stamp is the read's time.
	h.clock.Advance(1234567891 * time.Nanosecond)
	check("idle", h.clock.Now(), h.clock.Now())

	resp := h.post(h.ctx, "/generate", map[string]any{"text": prompt(50), "sampling_params": map[string]any{"max_new_tokens": 20}, "stream": true, "routed_dp_rank": 0})
	defer resp.Body.Close()
	h.waitSubmitted(1)
	prefilled := h.step() // a prefill step always publishes
	if want := t0.Add(1234567891*time.Nanosecond + prefillTime(50)); !prefilled.Equal(want) {
		t.Fatalf("the prefill ended at %v, want %v", prefilled, want)
	}
	check("after the prefill", prefilled, h.clock.Now())
	h.step()
	h.step()
	check("two decode steps on", prefilled, h.clock.Now())
	// Half way through the third decode step the clock has moved but the
	// busy rank's snapshot has not.
	h.clock.Advance(decodeTime(1) / 2)
	check("during the third decode step", prefilled, h.clock.Now())
	third := h.step() // every third decode step publishes
	check("after the third decode step", third, h.clock.Now())
}

// TestMetricsInSGLangNames: /metrics carries SGLang's scheduler gauges per
// rank (labels model_name, engine_type, tp_rank, pp_rank, moe_ep_rank,
// dp_rank), refreshed with the metrics snapshot, and the request counters
// and latency histograms once a request finishes.
func TestMetricsInSGLangNames(t *testing.T) {
	t.Parallel()
	h := start(t, func(c *Config) { c.Params.DPSize = 2 })
	done := make(chan struct{})
	go func() {
		defer close(done)
		resp := h.post(h.ctx, "/generate", map[string]any{"text": prompt(12), "sampling_params": map[string]any{"max_new_tokens": 3}, "routed_dp_rank": 1})
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}()
	h.drive(done)
	req, _ := http.NewRequestWithContext(h.ctx, http.MethodGet, h.url+"/metrics", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(prommodel.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"sglang:num_running_reqs", "sglang:num_queue_reqs", "sglang:token_usage", "sglang:num_used_tokens", "sglang:gen_throughput", "sglang:cache_hit_rate"} {
		f := fams[name]
		if f == nil || len(f.Metric) != 2 {
			t.Errorf("%s: %v, want one series per rank", name, f)
			continue
		}
		labels := map[string]string{}
		for _, lp := range f.Metric[1].Label {
			labels[lp.GetName()] = lp.GetValue()
		}
		if labels["dp_rank"] != "1" || labels["engine_type"] != "unified" || labels["model_name"] != h.m.cfg.ServedModelName {
			t.Errorf("%s labels %v", name, labels)
		}
	}
	if g := fams["sglang:gen_throughput"].Metric[1].GetGauge().GetValue(); g <= 0 {
		t.Errorf("rank 1's gen_throughput %v after generating, want > 0", g)
	}
	for name, want := range map[string]float64{"sglang:num_requests_total": 1, "sglang:prompt_tokens_total": 12, "sglang:generation_tokens_total": 3} {
		if f := fams[name]; f == nil || f.Metric[0].GetCounter().GetValue() != want {
			t.Errorf("%s: %v, want %v", name, f, want)
		}
	}
	ttft := fams["sglang:time_to_first_token_seconds"].Metric[0].GetHistogram()
	if ttft.GetSampleCount() != 1 || ttft.GetSampleSum() != prefillTime(12).Seconds() {
		t.Errorf("TTFT histogram %v, want one sample of %v", ttft, prefillTime(12))
	}
}

// TestHealthAndInfo: /health answers 200 once the engine produced a
// token for its probe, and 503 once the engine shuts down; the info
// routes answer in SGLang's shapes; the API key guards all but health.
func TestHealthAndInfo(t *testing.T) {
	t.Parallel()
	h := start(t, func(c *Config) { c.APIKey = "k" })
	done := make(chan struct{})
	var status int
	go func() {
		defer close(done)
		status = h.get("/health", nil)
	}()
	h.drive(done)
	if status != 200 {
		t.Fatalf("/health: %d", status)
	}
	if s := h.get("/v1/models", nil); s != 401 {
		t.Errorf("/v1/models without the key: %d, want 401", s)
	}
	authed := func(path string, v any) int {
		req, _ := http.NewRequestWithContext(h.ctx, http.MethodGet, h.url+path, nil)
		req.Header.Set("Authorization", "Bearer k")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		_ = json.NewDecoder(resp.Body).Decode(v)
		return resp.StatusCode
	}
	var models struct {
		Object string
		Data   []modelCard
	}
	if authed("/v1/models", &models); models.Object != "list" || len(models.Data) != 1 || models.Data[0].ID != h.m.cfg.ServedModelName || models.Data[0].OwnedBy != "sglang" {
		t.Errorf("/v1/models: %+v", models)
	}
	var info map[string]any
	if authed("/server_info", &info); info["dp_size"] != 1.0 || info["max_total_num_tokens"] != 400000.0 || info["version"] != DefaultVersion {
		t.Errorf("/server_info: %v", info)
	}
	if _, ok := info["kv_events"]; ok {
		t.Error("/server_info advertises load sockets that are off")
	}
	var mi map[string]any
	if authed("/get_model_info", &mi); mi["is_generation"] != true || mi["model_path"] != h.m.cfg.ServedModelName {
		t.Errorf("/get_model_info: %v", mi)
	}
	if err := h.m.Close(); err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	h.m.health(rec, httptest.NewRequest(http.MethodGet, "/health", nil))
	if rec.Code != http.StatusServiceUnavailable {
		t.Errorf("/health after Close: %d, want 503", rec.Code)
	}
}
