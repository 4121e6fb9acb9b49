package tests

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/loadreporter/loadreporter/adapters/pollapi"
	"github.com/loadreporter/loadreporter/cmd/loadreporter/app"
	pb "github.com/loadreporter/loadreporter/gen/sglang/router/loadmonitor/v1"
)

// fakeSGLang serves /v1/loads?include=core from testdata, or HTTP 500 while
// failing is set, and counts requests.
type fakeSGLang struct {
	body    []byte
	failing atomic.Bool
	hits    atomic.Int64
}

func newFakeSGLang(t *testing.T) (*fakeSGLang, *httptest.Server) {
	body, err := os.ReadFile("testdata/sglang-v1-loads-core.json")
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeSGLang{body: body}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.hits.Add(1)
		if r.URL.Path != "/v1/loads" || r.URL.Query().Get("include") != "core" {
			http.NotFound(w, r)
			return
		}
		if f.failing.Load() {
			http.Error(w, "scheduler crashed", http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(f.body)
	}))
	t.Cleanup(srv.Close)
	return f, srv
}

type fixtureLoad struct {
	DPRank                   int32   `json:"dp_rank"`
	NumRunningReqs           int64   `json:"num_running_reqs"`
	NumWaitingReqs           int64   `json:"num_waiting_reqs"`
	NumWaitingUncachedTokens int64   `json:"num_waiting_uncached_tokens"`
	NumUsedTokens            int64   `json:"num_used_tokens"`
	NumTotalTokens           int64   `json:"num_total_tokens"`
	MaxTotalNumTokens        int64   `json:"max_total_num_tokens"`
	MaxRunningRequests       int64   `json:"max_running_requests"`
	TokenUsage               float64 `json:"token_usage"`
	GenThroughput            float64 `json:"gen_throughput"`
	CacheHitRate             float64 `json:"cache_hit_rate"`
	Utilization              float64 `json:"utilization"`
}

func (f *fakeSGLang) loads(t *testing.T) []fixtureLoad {
	var env struct{ Loads []fixtureLoad }
	if err := json.Unmarshal(f.body, &env); err != nil {
		t.Fatal(err)
	}
	return env.Loads
}

// startOverFakeSGLang boots the service over the sglang-http source
// pulling a fake SGLang engine.
func startOverFakeSGLang(t *testing.T) (*fakeSGLang, *app.Main) {
	t.Helper()
	engine, srv := newFakeSGLang(t)
	c := testConfig()
	c.Source.Name = "sglang-http"
	c.Source.EngineURL = srv.URL
	return engine, startMain(t, c, nil)
}

// TestSGLangEngineEndToEnd: reports a router receives carry exactly what
// the engine served; an engine failure turns them UNREACHABLE, and its
// recovery HEALTHY again.
func TestSGLangEngineEndToEnd(t *testing.T) {
	t.Parallel()
	engine, m := startOverFakeSGLang(t)
	r := openGRPC(t, testCtx(t, 20*time.Second), m.Addr())
	_ = r.Send(registerFrame("sglang-router", 50, 10000))
	recvFrame(t, r)

	rep := recvReport(t, r)
	want := engine.loads(t)
	if rep.GetStatus() != pb.ReportStatus_REPORT_STATUS_HEALTHY || len(rep.GetRanks()) != len(want) {
		t.Fatalf("report %v %q with %d ranks", rep.GetStatus(), rep.GetLastError(), len(rep.GetRanks()))
	}
	for i, w := range want {
		g := rep.GetRanks()[i]
		got := fixtureLoad{g.GetDpRank(), g.GetNumRunningReqs(), g.GetNumWaitingReqs(), g.GetNumWaitingUncachedTokens(),
			g.GetNumUsedTokens(), g.GetNumTotalTokens(), g.GetMaxTotalNumTokens(), g.GetMaxRunningRequests(),
			g.GetTokenUsage(), g.GetGenThroughput(), g.GetCacheHitRate(), g.GetUtilization()}
		if got != w {
			t.Fatalf("rank %d:\n got %+v\nwant %+v", i, got, w)
		}
	}

	engine.failing.Store(true)
	for {
		rep = recvReport(t, r)
		if rep.GetStatus() != pb.ReportStatus_REPORT_STATUS_HEALTHY {
			break
		}
	}
	if rep.GetStatus() != pb.ReportStatus_REPORT_STATUS_UNREACHABLE || len(rep.GetRanks()) != 0 ||
		!strings.Contains(rep.GetLastError(), "500") {
		t.Fatalf("while failing: %v %q with %d ranks", rep.GetStatus(), rep.GetLastError(), len(rep.GetRanks()))
	}
	engine.failing.Store(false)
	for rep.GetStatus() != pb.ReportStatus_REPORT_STATUS_HEALTHY {
		rep = recvReport(t, r)
	}
	if len(rep.GetRanks()) != len(want) {
		t.Fatalf("recovered with %d ranks", len(rep.GetRanks()))
	}
	_ = r.Send(stopFrame)
	expectCleanEnd(t, r)
}

// TestPollersCostOnePullPerFire: a hundred routers polling /v1/loads at
// once cost the engine no more pulls than one would.
func TestPollersCostOnePullPerFire(t *testing.T) {
	t.Parallel()
	engine, m := startOverFakeSGLang(t)
	url := "http://" + m.Addr() + "/v1/loads?include=core"
	client := &http.Client{Timeout: 10 * time.Second}
	t.Cleanup(client.CloseIdleConnections)

	var wg sync.WaitGroup
	bodies := make(chan pollapi.Envelope, 100)
	for range 100 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := client.Get(url)
			if err != nil {
				t.Error(err)
				return
			}
			defer resp.Body.Close()
			var env pollapi.Envelope
			if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&env) != nil {
				t.Errorf("status %d", resp.StatusCode)
				return
			}
			bodies <- env
		}()
	}
	wg.Wait()
	close(bodies)
	seqs := map[uint64]int{}
	for env := range bodies {
		seqs[env.SequenceID]++
		if len(env.Loads) != 2 || env.Loads[0].MaxTotalNumTokens != 220000 || env.Status != "HEALTHY" {
			t.Fatalf("envelope %+v", env)
		}
	}
	// Each distinct report is one pull; 100 pollers within one max age
	// share a handful at most (a poll arriving mid-pull waits for it).
	if hits := engine.hits.Load(); hits > 3 || int64(len(seqs)) != hits {
		t.Fatalf("100 pollers caused %d engine requests (%d distinct reports)", hits, len(seqs))
	}

	t.Run("unknown include section", func(t *testing.T) {
		resp, err := client.Get("http://" + m.Addr() + "/v1/loads?include=core,gpu")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var e pollapi.ErrorBody
		_ = json.NewDecoder(resp.Body).Decode(&e)
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(e.Error.Message, `"gpu"`) {
			t.Fatalf("status %d, %+v", resp.StatusCode, e)
		}
	})
	t.Run("unreachable engine is a 503 with a JSON error", func(t *testing.T) {
		engine.failing.Store(true)
		defer engine.failing.Store(false)
		ctx := testCtx(t, 10*time.Second)
		eventually(t, ctx, "a poll after the failure", func() bool {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			var e pollapi.ErrorBody
			err = json.NewDecoder(resp.Body).Decode(&e)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return false // the fresh report from before the failure
			}
			if resp.StatusCode != http.StatusServiceUnavailable || err != nil || e.Error.Code != "UNREACHABLE" ||
				!strings.Contains(e.Error.Message, "500") {
				t.Fatalf("status %d, %+v (%v)", resp.StatusCode, e, err)
			}
			return true
		})
	})
}

// TestAdminSwitchesSimModes: the admin RPC turns the simulated engine's
// reports UNREACHABLE and back, and rejects unknown modes by name.
func TestAdminSwitchesSimModes(t *testing.T) {
	t.Parallel()
	m := startMain(t, testConfig(), nil)
	r := openGRPC(t, testCtx(t, 20*time.Second), m.Addr())
	_ = r.Send(registerFrame("admin-watch", 50, 10000))
	recvFrame(t, r)
	if rep := recvReport(t, r); rep.GetStatus() != pb.ReportStatus_REPORT_STATUS_HEALTHY || len(rep.GetRanks()) != 4 {
		t.Fatalf("%v", rep.GetStatus())
	}
	post := func(method, body string) (int, string) {
		resp, err := http.Post(fmt.Sprintf("http://%s/loadreporter.v1.AdminService/%s", m.Addr(), method),
			"application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, strings.Join(strings.Fields(string(b)), "") // protojson varies its spacing
	}
	if code, body := post("SetSimMode", `{"mode":"error"}`); code != 200 || !strings.Contains(body, `"mode":"error"`) {
		t.Fatalf("%d %s", code, body)
	}
	for {
		if rep := recvReport(t, r); rep.GetStatus() == pb.ReportStatus_REPORT_STATUS_UNREACHABLE {
			break
		}
	}
	if code, body := post("SetSimMode", `{"mode":"sideways"}`); code != 400 || !strings.Contains(body, "sideways") {
		t.Fatalf("%d %s", code, body)
	}
	if code, body := post("SetSimMode", `{"mode":"ranks 3"}`); code != 200 || !strings.Contains(body, `"ranks":3`) {
		t.Fatalf("%d %s", code, body)
	}
	_, _ = post("SetSimMode", `{"mode":"normal"}`)
	for { // 3 ranks while 4 are expected: the rank set changed
		if rep := recvReport(t, r); strings.Contains(rep.GetLastError(), "rank set changed: missing [3]") {
			break
		}
	}
	if code, body := post("SetTopology", `{"dpSize":3}`); code != 200 || !strings.Contains(body, `"expectedRanks":[0,1,2]`) {
		t.Fatalf("%d %s", code, body)
	}
	for {
		if rep := recvReport(t, r); rep.GetStatus() == pb.ReportStatus_REPORT_STATUS_HEALTHY {
			if len(rep.GetRanks()) != 3 {
				t.Fatalf("%d ranks", len(rep.GetRanks()))
			}
			break
		}
	}
	_ = r.Send(stopFrame)
	expectCleanEnd(t, r)
}
