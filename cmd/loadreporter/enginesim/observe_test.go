package enginesim

import (
	"io"
	"net/http"
	"sync"
	"testing"

	"github.com/loadreporter/loadreporter/cmd/loadreporter/enginesim/model"
)

// TestRequestDoneAndLive: RequestDone hears each served request's stats
// on the engine's times (not a health probe's), and Live is the live
// state /get_load reports, read without a request.
func TestRequestDoneAndLive(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var got []model.RequestStats
	h := start(t, func(c *Config) {
		c.RequestDone = func(st model.RequestStats) {
			mu.Lock()
			defer mu.Unlock()
			got = append(got, st)
		}
	})
	done := make(chan struct{})
	go func() {
		defer close(done)
		resp := h.post(h.ctx, "/generate", map[string]any{"input_ids": []int{1, 2, 3, 4}, "sampling_params": map[string]any{"max_new_tokens": 2}})
		defer resp.Body.Close()
		_, _ = io.ReadAll(resp.Body)
	}()
	h.waitSubmitted(1)
	live := h.m.Live()
	var polled []struct {
		NumReqs        int `json:"num_reqs"`
		NumWaitingReqs int `json:"num_waiting_reqs"`
	}
	h.get("/get_load", &polled)
	if len(live) != 1 || len(polled) != 1 || live[0].NumRunningReqs+live[0].NumWaitingReqs != 1 ||
		polled[0].NumReqs != 1 || live[0].NumWaitingReqs != polled[0].NumWaitingReqs {
		t.Errorf("Live %+v, /get_load %+v: want the one request in both", live, polled)
	}
	h.drive(done)
	probed := make(chan struct{})
	code, probeErr := 0, error(nil)
	go func() {
		defer close(probed)
		req, _ := http.NewRequestWithContext(h.ctx, http.MethodGet, h.url+"/health_generate", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			probeErr = err
			return
		}
		defer resp.Body.Close()
		code = resp.StatusCode
	}()
	h.drive(probed)
	if probeErr != nil || code != 200 {
		t.Fatalf("/health_generate: %d %v", code, probeErr)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 1 {
		t.Fatalf("RequestDone heard %d requests, want the one served (not the health probe): %+v", len(got), got)
	}
	st := got[0]
	if st.PromptTokens != 4 || st.OutputTokens != 2 || st.Cancelled ||
		st.Admitted.Sub(st.Arrival) != 0 || st.TTFT() != prefillTime(4) || st.E2E() != prefillTime(4)+decodeTime(1) {
		t.Errorf("stats %+v: want 4 prompt and 2 output tokens, admitted at once, TTFT %v, e2e %v",
			st, prefillTime(4), prefillTime(4)+decodeTime(1))
	}
}
