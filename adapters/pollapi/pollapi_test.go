package pollapi

import (
	"context"
	"encoding/json"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/loadreporter/loadreporter/domain"
)

type fakePoller struct {
	report *domain.Report
	err    error
	maxAge time.Duration
}

func (f *fakePoller) Poll(_ context.Context, maxAge time.Duration) (*domain.Report, error) {
	f.maxAge = maxAge
	return f.report, f.err
}

func get(t *testing.T, h http.Handler, target string) (*httptest.ResponseRecorder, map[string]any) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, target, nil))
	var body map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
		t.Fatalf("body is not JSON: %q", rec.Body.String())
	}
	return rec, body
}

func TestEnvelopeShape(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 29, 7, 30, 0, 250_000_000, time.UTC)
	p := &fakePoller{report: &domain.Report{
		SequenceID: 9, SourceInstanceID: "abc", ReportTime: at, Status: domain.StatusStale,
		LastError: "load snapshot stale by 4000 ms",
		Ranks: []domain.RankLoad{{
			DPRank: 1, SnapshotTime: at, NumRunningReqs: 3, NumUsedTokens: math.MaxInt32 + 5,
			MaxTotalNumTokens: 0, MaxRunningRequests: 64, TokenUsage: 0.5,
		}},
	}}
	rec, body := get(t, mustNew(t, p, Options{ServeStale: true}), "/v1/loads?include=core")
	if rec.Code != http.StatusOK || p.maxAge != DefaultMaxAge || rec.Header().Get("Content-Type") != "application/json" {
		t.Fatalf("status %d, max age %v", rec.Code, p.maxAge)
	}
	if body["status"] != "STALE" || body["dp_rank_count"] != 1.0 || body["timestamp"] != "2026-11-29T07:30:00.250000+00:00" {
		t.Fatalf("envelope %v", body)
	}
	load := body["loads"].([]any)[0].(map[string]any)
	raw := rec.Body.String()
	for _, key := range []string{"num_running_reqs", "num_waiting_reqs", "num_waiting_uncached_tokens",
		"num_used_tokens", "num_total_tokens", "max_total_num_tokens", "max_running_requests", "dp_rank"} {
		if _, ok := load[key]; !ok {
			t.Fatalf("missing %s", key)
		}
	}
	if strings.Contains(raw, "null") || strings.Contains(raw, `"num_running_reqs":3.`) {
		t.Fatalf("integers must be plain JSON integers: %s", raw)
	}
	if load["num_used_tokens"] != float64(math.MaxInt32) {
		t.Fatalf("num_used_tokens %v, want saturated at int32 max", load["num_used_tokens"])
	}
	if load["max_total_num_tokens"] != 0.0 {
		t.Fatalf("max_total_num_tokens %v, want 0 (unknown), never raised", load["max_total_num_tokens"])
	}
	if load["timestamp"] != 1795937400.25 {
		t.Fatalf("timestamp %v", load["timestamp"])
	}
}

// The envelope's timestamp is written as SGLang's engine writes it (the
// fixtures' shapes), so a poller that parses the engine's parses ours.
func TestTimestampIsWrittenAsSGLangWritesIt(t *testing.T) {
	t.Parallel()
	for _, engine := range []string{
		"2026-11-29T07:30:00.123456+00:00", // sglang-v1-loads-core.json
		"2026-11-29T07:30:00+00:00",        // isoformat() drops a zero fraction
	} {
		at, err := time.Parse(time.RFC3339Nano, engine)
		if err != nil {
			t.Fatal(err)
		}
		if got := pythonISOFormat(at.Add(789 * time.Nanosecond)); got != engine {
			t.Errorf("%s written as %s", engine, got)
		}
	}
	local := time.Date(2026, 11, 29, 9, 30, 0, 5_000, time.FixedZone("CEST", 2*3600))
	if got := pythonISOFormat(local); got != "2026-11-29T07:30:00.000005+00:00" {
		t.Errorf("a local time is written in UTC: got %s", got)
	}
}

func TestIncludeSections(t *testing.T) {
	t.Parallel()
	p := &fakePoller{report: &domain.Report{Status: domain.StatusHealthy}}
	for _, ok := range []string{
		"/v1/loads", "/v1/loads?include=core", "/v1/loads?include=core&include=core", "/v1/loads?include=core,core",
		"/v1/loads?include=core,disagg,queues,memory", // SMG's probe
		"/v1/loads?include=all", "/v1/loads?include=", "/v1/loads?include=memory&include=spec",
		"/v1/loads?include=lora,disagg", "/v1/loads?include=core,",
	} {
		if rec, _ := get(t, mustNew(t, p, Options{MaxAge: time.Second}), ok); rec.Code != http.StatusOK {
			t.Errorf("%s: %d", ok, rec.Code)
		}
	}
	for _, bad := range []string{"/v1/loads?include=mem", "/v1/loads?include=core,gpu", "/v1/loads?include=CORE", "/v1/loads?include=core&include=speculative"} {
		rec, body := get(t, mustNew(t, p, Options{MaxAge: time.Second}), bad)
		msg := body["error"].(map[string]any)["message"].(string)
		if rec.Code != http.StatusBadRequest || !strings.Contains(msg, "core, memory, spec, lora, disagg, queues, all") {
			t.Errorf("%s: %d %q", bad, rec.Code, msg)
		}
	}
}

func TestAggregateAndOmittedSections(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 29, 7, 30, 0, 0, time.UTC)
	ranks := []domain.RankLoad{
		{DPRank: 0, SnapshotTime: at, NumRunningReqs: 4, NumWaitingReqs: 1, NumUsedTokens: 18000, MaxTotalNumTokens: 180000,
			TokenUsage: 0.1, GenThroughput: 640.5, Utilization: 0.31},
		{DPRank: 1, SnapshotTime: at, NumRunningReqs: 2, NumUsedTokens: 9000, MaxTotalNumTokens: 180000,
			TokenUsage: 0.05, GenThroughput: 330, Utilization: 0.18},
	}
	p := &fakePoller{report: &domain.Report{Status: domain.StatusHealthy, ReportTime: at, Ranks: ranks}}
	rec, body := get(t, mustNew(t, p, Options{MaxAge: time.Second}), "/v1/loads?include=all")
	agg := body["aggregate"].(map[string]any)
	want := map[string]float64{ // the legacy fixture's aggregate for these ranks
		"total_running_reqs": 6, "total_waiting_reqs": 1, "total_reqs": 7, "total_used_tokens": 27000,
		"total_tokens": 360000, "avg_token_usage": 0.075, "avg_throughput": 485.25, "avg_utilization": 0.245,
	}
	for k, v := range want {
		if got, ok := agg[k].(float64); !ok || math.Abs(got-v) > 1e-9 {
			t.Errorf("aggregate %s = %v, want %v", k, agg[k], v)
		}
	}
	for _, section := range []string{"memory", "speculative", "lora", "disaggregation", "queues"} {
		if strings.Contains(rec.Body.String(), `"`+section+`"`) {
			t.Errorf("section %s sent though no source reports it: %s", section, rec.Body.String())
		}
	}
	// One rank of unknown capacity: the summed capacity is unknown too.
	ranks[1].MaxTotalNumTokens = 0
	_, body = get(t, mustNew(t, p, Options{MaxAge: time.Second}), "/v1/loads")
	if got := body["aggregate"].(map[string]any)["total_tokens"]; got != 0.0 {
		t.Fatalf("total_tokens %v with a rank of unknown capacity, want 0", got)
	}
}

func TestUnreachableAndErrors(t *testing.T) {
	t.Parallel()
	p := &fakePoller{report: &domain.Report{Status: domain.StatusUnreachable, LastError: "GET …: HTTP 500", SequenceID: 4}}
	rec, body := get(t, mustNew(t, p, Options{MaxAge: time.Second}), "/v1/loads")
	e := body["error"].(map[string]any)
	if rec.Code != http.StatusServiceUnavailable || e["code"] != "UNREACHABLE" || e["message"] != "GET …: HTTP 500" || body["sequence_id"] != 4.0 {
		t.Fatalf("%d %v", rec.Code, body)
	}
	p = &fakePoller{err: domain.Errorf(domain.CodeResourceExhausted, "10000 sessions are live")}
	if rec, _ := get(t, mustNew(t, p, Options{MaxAge: time.Second}), "/v1/loads"); rec.Code != http.StatusTooManyRequests {
		t.Fatalf("%d", rec.Code)
	}
	p = &fakePoller{err: domain.Errorf(domain.CodeShuttingDown, "bye")}
	if rec, _ := get(t, mustNew(t, p, Options{MaxAge: time.Second}), "/v1/loads"); rec.Code != http.StatusServiceUnavailable {
		t.Fatalf("%d", rec.Code)
	}
}

// TestAStaleReportIsNotServedAsFreshNumbers: pollers' types have no
// status, so by default a STALE report is a 503 saying how old the
// snapshot is; with ServeStale its numbers are served, marked STALE.
func TestAStaleReportIsNotServedAsFreshNumbers(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)
	p := &fakePoller{report: &domain.Report{
		SequenceID: 12, ReportTime: at, Status: domain.StatusStale, LastError: "load snapshot stale by 4250 ms",
		Ranks: []domain.RankLoad{
			{DPRank: 0, SnapshotTime: at.Add(-4250 * time.Millisecond), NumRunningReqs: 3},
			{DPRank: 1, SnapshotTime: at.Add(-10 * time.Millisecond), NumRunningReqs: 1},
		},
	}}
	rec, body := get(t, mustNew(t, p, Options{}), "/v1/loads?include=core,disagg,queues,memory")
	e, _ := body["error"].(map[string]any)
	if rec.Code != http.StatusServiceUnavailable || e["code"] != "STALE" || e["message"] != "load snapshot stale by 4250 ms" ||
		body["age_ms"] != 4250.0 || body["sequence_id"] != 12.0 || body["loads"] != nil {
		t.Fatalf("stale by default: %d %v", rec.Code, body)
	}
	rec, body = get(t, mustNew(t, p, Options{ServeStale: true}), "/v1/loads")
	if rec.Code != http.StatusOK || body["status"] != "STALE" || len(body["loads"].([]any)) != 2 {
		t.Fatalf("stale served: %d %v", rec.Code, body)
	}
	p.report.Status, p.report.LastError = domain.StatusHealthy, ""
	if rec, _ := get(t, mustNew(t, p, Options{}), "/v1/loads"); rec.Code != http.StatusOK {
		t.Fatalf("healthy: %d", rec.Code)
	}
}

// getLoad answers /get_load from h and returns the status and raw body.
func getLoad(t *testing.T, h *Handler) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeGetLoad(rec, httptest.NewRequest(http.MethodGet, "/get_load", nil))
	return rec.Code, strings.TrimSpace(rec.Body.String())
}

// TestGetLoadInTheEnginesShape: SGLang's per-rank array and vLLM's
// {"load": N}, counts saturated at int32.
func TestGetLoadInTheEnginesShape(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)
	p := &fakePoller{report: &domain.Report{SequenceID: 3, ReportTime: at, Status: domain.StatusHealthy, Ranks: []domain.RankLoad{
		// num_total_tokens as published, and where a source has none
		// (gRPC, older engines) from its parts.
		{DPRank: 0, SnapshotTime: at, NumRunningReqs: 5, NumWaitingReqs: 2, NumUsedTokens: 9000, NumTotalTokens: 10500, NumWaitingUncachedTokens: 1000},
		{DPRank: 1, SnapshotTime: at, NumRunningReqs: math.MaxInt32, NumWaitingReqs: 1, NumUsedTokens: math.MaxInt32 - 1, NumWaitingUncachedTokens: 7},
	}}}
	code, body := getLoad(t, mustNew(t, p, Options{}))
	want := `[{"dp_rank":0,"num_reqs":7,"num_waiting_reqs":2,"num_tokens":10500,"num_pending_tokens":1500},` +
		`{"dp_rank":1,"num_reqs":2147483647,"num_waiting_reqs":1,"num_tokens":2147483647,"num_pending_tokens":7}]`
	if code != http.StatusOK || body != want {
		t.Fatalf("sglang shape: %d %s\nwant %s", code, body, want)
	}
	code, body = getLoad(t, mustNew(t, p, Options{GetLoadShape: GetLoadVLLM}))
	if code != http.StatusOK || body != `{"load":2147483647}` {
		t.Fatalf("vllm shape, saturated: %d %s", code, body)
	}
	p.report.Ranks[1].NumRunningReqs = 3
	if _, body = getLoad(t, mustNew(t, p, Options{GetLoadShape: GetLoadVLLM})); body != `{"load":11}` {
		t.Fatalf("vllm shape: %s, want the running and waiting requests of every rank", body)
	}
}

// TestGetLoadNeverAnswersAFailure: sglang-router reads any failed poll as
// load −1, the least loaded; a report no poller may route on is a 200
// saturated answer saying why, in both shapes.
func TestGetLoadNeverAnswersAFailure(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)
	stale := &domain.Report{ReportTime: at, Status: domain.StatusStale, LastError: "load snapshot stale by 5000 ms",
		Ranks: []domain.RankLoad{{SnapshotTime: at.Add(-5 * time.Second), NumRunningReqs: 1}}}
	for name, p := range map[string]*fakePoller{
		"unreachable": {report: &domain.Report{Status: domain.StatusUnreachable, LastError: "dial tcp: connection refused"}},
		"stale":       {report: stale},
		"no report":   {err: domain.Errorf(domain.CodeResourceExhausted, "too many polls waiting")},
	} {
		for _, shape := range GetLoadShapes {
			code, body := getLoad(t, mustNew(t, p, Options{GetLoadShape: shape}))
			if code != http.StatusOK || !strings.Contains(body, "2147483647") || !strings.Contains(body, `"status":"`) {
				t.Errorf("%s, %s shape: %d %s", name, shape, code, body)
			}
			var sg []SGLangRankLoad
			if shape == GetLoadSGLang && (json.Unmarshal([]byte(body), &sg) != nil || len(sg) != 1) {
				t.Errorf("%s: %s is not one rank", name, body)
			}
		}
	}
	// Served stale, the numbers are the report's.
	if _, body := getLoad(t, mustNew(t, &fakePoller{report: stale}, Options{ServeStale: true})); body != `[{"dp_rank":0,"num_reqs":1,"num_waiting_reqs":0,"num_tokens":0,"num_pending_tokens":0}]` {
		t.Fatalf("stale served: %s", body)
	}
}

// mustNew is New for options the test knows to be good.
func mustNew(t testing.TB, p Poller, o Options) *Handler {
	t.Helper()
	h, err := New(p, o)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// TestNewRefusesWhatCannotWork: a negative age or an unknown shape is
// refused, naming the option.
func TestNewRefusesWhatCannotWork(t *testing.T) {
	t.Parallel()
	for option, o := range map[string]Options{
		"max-age":        {MaxAge: -time.Second},
		"get-load-shape": {GetLoadShape: "trtllm"},
	} {
		if _, err := New(nil, o); domain.FieldOf(err) != option {
			t.Errorf("%+v: %v, want INVALID_ARGUMENT naming %s", o, err, option)
		}
	}
}
