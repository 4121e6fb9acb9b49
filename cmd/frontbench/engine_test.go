package main

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/loadreporter/loadreporter/adapters/source/sglanghttp"
)

func newTestEngine(t *testing.T, events int) (*engine, *httptest.Server) {
	t.Helper()
	e := newEngine(events, time.Hour) // a held stream's second event never comes in a test
	srv := httptest.NewServer(e)
	t.Cleanup(func() {
		close(e.stop)
		srv.Close()
	})
	return e, srv
}

// The front's sglang-http source reads the stand-in's /v1/loads as it
// reads SGLang's, or the front would never answer a poll.
func TestEngineLoadsReadByTheSglangHTTPSource(t *testing.T) {
	t.Parallel()
	e, srv := newTestEngine(t, 4)
	src, err := sglanghttp.New(sglanghttp.Options{BaseURL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	snap, err := src.Pull(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Ranks) != 2 || snap.Ranks[0].DPRank != 0 || snap.Ranks[1].DPRank != 1 {
		t.Fatalf("ranks %+v, want dp_rank 0 and 1", snap.Ranks)
	}
	if r := snap.Ranks[0]; r.NumRunningReqs != 12 || r.NumWaitingReqs != 3 || r.MaxTotalNumTokens != 220000 {
		t.Errorf("rank 0 %+v, want 12 running, 3 waiting, 220000 tokens of capacity", r)
	}
	if e.loadsHits.Load() != 1 {
		t.Errorf("loads hits %d, want 1", e.loadsHits.Load())
	}
}

func TestEngineMetricsAreAPrometheusExpositionOfAFewKiBAndCounted(t *testing.T) {
	t.Parallel()
	e, srv := newTestEngine(t, 4)
	for range 3 {
		resp, err := http.Get(srv.URL + pathMetrics)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if n := len(body); n < 2<<10 || n > 16<<10 {
			t.Errorf("/metrics is %d bytes, want a few KiB", n)
		}
		p := expfmt.NewTextParser(model.UTF8Validation)
		fams, err := p.TextToMetricFamilies(bytes.NewReader(body))
		if err != nil {
			t.Fatalf("/metrics does not parse: %v", err)
		}
		if _, ok := fams["sglang:num_running_reqs"]; !ok {
			t.Errorf("/metrics has no sglang:num_running_reqs among %d families", len(fams))
		}
	}
	if got := e.metricsHits.Load(); got != 3 {
		t.Errorf("metrics hits %d, want 3", got)
	}
}

func TestEngineGenerate(t *testing.T) {
	t.Parallel()
	_, srv := newTestEngine(t, 7)
	post := func(body string) *http.Response {
		t.Helper()
		resp, err := http.Post(srv.URL+pathGenerate, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
	resp := post(string(requestBodies[kindPost]))
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || !bytes.Contains(b, []byte(`"meta_info"`)) {
		t.Errorf("non-streaming: %s %s", resp.Status, b)
	}
	resp = post(string(requestBodies[kindSSE]))
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Errorf("streaming Content-Type %q", ct)
	}
	firsts := 0
	n, done, err := readSSE(bufio.NewReader(resp.Body), func() { firsts++ })
	if err != nil || n != 7 || !done || firsts != 1 {
		t.Errorf("streaming: %d events, [DONE] %v, first called %d times, err %v; want 7, true, 1, nil", n, done, firsts, err)
	}
	if resp := post("not json"); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("a body that is not JSON: %s, want 400", resp.Status)
	}
}

// A held stream sends its first event at once and ends, with [DONE], when
// the bench stops the engine.
func TestEngineHoldEndsWhenTheBenchStops(t *testing.T) {
	t.Parallel()
	e := newEngine(4, time.Hour)
	srv := httptest.NewServer(e)
	defer srv.Close()
	resp, err := http.Post(srv.URL+pathGenerate, "application/json", strings.NewReader(`{"stream":true,"hold":true}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	r := bufio.NewReader(resp.Body)
	line, err := r.ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "data: {") {
		t.Fatalf("first line %q, %v; want an event at once", line, err)
	}
	if e.held.Load() != 1 {
		t.Errorf("held %d, want 1", e.held.Load())
	}
	close(e.stop)
	n, done, err := readSSE(r, nil)
	if err != nil || !done || n != 0 {
		t.Errorf("after stop: %d more events, [DONE] %v, %v; want 0, true, nil", n, done, err)
	}
}

func TestReadSSE(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name   string
		in     string
		events int
		done   bool
	}{
		{"events then done", "data: {\"a\":1}\n\ndata: {\"a\":2}\n\ndata: [DONE]\n\n", 2, true},
		{"no space after the colon, CRLF", "data:{}\r\n\r\ndata:[DONE]\r\n\r\n", 1, true},
		{"comments and other fields are not events", ": ping\n\nevent: x\nid: 3\ndata: {}\n\ndata: [DONE]\n\n", 1, true},
		{"cut before done", "data: {}\n\ndata: {}\n\n", 2, false},
		{"cut mid-line", "data: {}\n\ndata: {\"a", 1, false},
		{"empty", "", 0, false},
	} {
		firsts := 0
		n, done, err := readSSE(bufio.NewReader(strings.NewReader(c.in)), func() { firsts++ })
		if err != nil || n != c.events || done != c.done {
			t.Errorf("%s: %d events, done %v, err %v; want %d, %v", c.name, n, done, err, c.events, c.done)
		}
		if want := min(c.events, 1); firsts != want {
			t.Errorf("%s: onFirst called %d times, want %d", c.name, firsts, want)
		}
	}
}
