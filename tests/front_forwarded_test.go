package tests

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// busyEngine publishes one snapshot, stamped once at its start as SGLang
// stamps each rank (a full batch publishing no new one), and holds every
// /generate until released.
type busyEngine struct {
	srv     *httptest.Server
	release chan struct{}
	arrived chan struct{}
	pulls   atomic.Int64
}

func newBusyEngine(t *testing.T) *busyEngine {
	t.Helper()
	raw, err := os.ReadFile("testdata/sglang-v1-loads-core.json")
	if err != nil {
		t.Fatal(err)
	}
	var env map[string]any
	if err := json.Unmarshal(raw, &env); err != nil {
		t.Fatal(err)
	}
	at := float64(time.Now().UnixMicro()) / 1e6
	for _, l := range env["loads"].([]any) {
		l.(map[string]any)["timestamp"] = at
	}
	loads, _ := json.Marshal(env)
	e := &busyEngine{release: make(chan struct{}), arrived: make(chan struct{}, 16)}
	e.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/loads":
			e.pulls.Add(1)
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(loads)
		case "/generate":
			_, _ = io.Copy(io.Discard, r.Body)
			e.arrived <- struct{}{}
			select {
			case <-e.release:
			case <-r.Context().Done():
			}
			fmt.Fprint(w, `{"text":"done"}`)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(func() {
		select {
		case <-e.release:
		default:
			close(e.release)
		}
		e.srv.Close()
	})
	return e
}

// rankWaiting is rank 1's waiting requests and tokens in the reporter's
// /v1/loads.
func rankWaiting(t *testing.T, addr string) (reqs, tokens int64) {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/v1/loads")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var env struct {
		Loads []struct {
			DPRank        int   `json:"dp_rank"`
			Waiting       int64 `json:"num_waiting_reqs"`
			WaitingTokens int64 `json:"num_waiting_uncached_tokens"`
		} `json:"loads"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&env); err != nil {
		t.Fatal(err)
	}
	for _, l := range env.Loads {
		if l.DPRank == 1 {
			return l.Waiting, l.WaitingTokens
		}
	}
	t.Fatalf("no rank 1 in %+v", env)
	return 0, 0
}

// TestTheFrontCountsWhatTheEngineHasNotPublished: a generation passed on
// while the engine's snapshot stands still (stamped before it) shows in
// every report as a waiting request on the rank it would join, with its
// prompt estimated from its body (four bytes a token), until it is
// answered; with --front-count-forwarded=false the reports are the
// engine's alone.
func TestTheFrontCountsWhatTheEngineHasNotPublished(t *testing.T) {
	t.Parallel()
	for _, count := range []bool{true, false} {
		t.Run(fmt.Sprintf("count=%v", count), func(t *testing.T) {
			t.Parallel()
			e := newBusyEngine(t)
			c := testConfig()
			c.Source.Name, c.Source.EngineURL = "sglang-http", e.srv.URL
			c.Front.Listen = "127.0.0.1:0"
			c.Front.CountForwarded = count
			c.Poll.MaxAge = 20 * time.Millisecond
			// The engine's one snapshot stays the latest for the whole
			// test: not STALE meanwhile.
			c.Fire.StaleAfter = time.Hour
			m := startMain(t, c, nil)
			// The fixture's rank 1: nothing waiting.
			if r, tok := rankWaiting(t, m.Addr()); r != 0 || tok != 0 {
				t.Fatalf("before: rank 1 waiting %d (%d tokens), want the fixture's 0", r, tok)
			}
			body := `{"text":"` + strings.Repeat("a", 3989) + `"}` // 4000 bytes: 1000 tokens
			answered := make(chan error, 1)
			go func() {
				resp, err := http.Post("http://"+m.FrontAddr()+"/generate", "application/json", strings.NewReader(body))
				if err == nil {
					resp.Body.Close()
				}
				answered <- err
			}()
			<-e.arrived
			if !count {
				// Two pulls after the request reached the engine: a report
				// that could show it, and does not.
				seen := e.pulls.Load()
				eventually(t, testCtx(t, 10*time.Second), "two more pulls", func() bool { return e.pulls.Load() >= seen+2 })
				if r, tok := rankWaiting(t, m.Addr()); r != 0 || tok != 0 {
					t.Errorf("counting off: rank 1 waiting %d (%d tokens), want the engine's own 0", r, tok)
				}
				close(e.release)
				if err := <-answered; err != nil {
					t.Fatal(err)
				}
				return
			}
			eventually(t, testCtx(t, 10*time.Second), "the request in the report", func() bool {
				r, tok := rankWaiting(t, m.Addr())
				return r == 1 && tok == 1000
			})
			// The gauge says what the last report added.
			if v := metricSum(t, "http://"+m.Addr()+"/metrics", "loadreporter_front_unpublished_requests"); v != 1 {
				t.Errorf("loadreporter_front_unpublished_requests %v, want 1", v)
			}
			close(e.release)
			if err := <-answered; err != nil {
				t.Fatal(err)
			}
			eventually(t, testCtx(t, 10*time.Second), "the answered request out of the report", func() bool {
				r, tok := rankWaiting(t, m.Addr())
				return r == 0 && tok == 0
			})
		})
	}
}

// TestAFrontPushesWhatItPassesOnBetweenTheDeadlines: with
// --front-push-on-forward, a router whose next deadline is seconds away
// gets a report as soon as the front passes a request on, counting it,
// and no more engine reads than the deadlines make.
func TestAFrontPushesWhatItPassesOnBetweenTheDeadlines(t *testing.T) {
	t.Parallel()
	e := newBusyEngine(t)
	c := testConfig()
	c.Source.Name, c.Source.EngineURL = "sglang-http", e.srv.URL
	c.Front.Listen = "127.0.0.1:0"
	c.Front.PushOnForward = 10 * time.Millisecond
	c.Fire.StaleAfter = time.Hour
	c.History.Interval = 0
	m := startMain(t, c, nil)
	ctx := testCtx(t, 30*time.Second)
	r := openGRPC(t, ctx, m.Addr())
	if err := r.Send(registerFrame("router-1", 20000, 60000)); err != nil {
		t.Fatal(err)
	}
	recvFrame(t, r) // registered
	first := recvReport(t, r)
	pulls := e.pulls.Load()
	answered := make(chan error, 1)
	go func() {
		resp, err := http.Post("http://"+m.FrontAddr()+"/generate", "application/json", strings.NewReader(`{"text":"`+strings.Repeat("a", 389)+`"}`))
		if err == nil {
			resp.Body.Close()
		}
		answered <- err
	}()
	<-e.arrived
	// The next deadline is at least 10 s after the first report; this
	// one comes between.
	rep := recvReport(t, r)
	if got := time.UnixMilli(rep.GetReportTimeUnixMs()).Sub(time.UnixMilli(first.GetReportTimeUnixMs())); got >= 10*time.Second {
		t.Fatalf("the next report came %v after the first: at the deadline, not between", got)
	}
	var waiting, tokens int64
	for _, k := range rep.GetRanks() {
		waiting += k.GetNumWaitingReqs()
		tokens += k.GetNumWaitingUncachedTokens()
	}
	// The fixture's 3 waiting and 4096 tokens, and the request's 100
	// tokens (400 bytes: its Content-Length, known before it passed).
	if waiting != 3+1 || tokens != 4096+100 || rep.GetSequenceId() != first.GetSequenceId()+1 {
		t.Errorf("report between the deadlines: %d waiting, %d tokens (seq %d), want 4, 4196 (seq %d)", waiting, tokens, rep.GetSequenceId(), first.GetSequenceId()+1)
	}
	if n := e.pulls.Load(); n != pulls {
		t.Errorf("the engine was read %d more times for a report between the deadlines", n-pulls)
	}
	if v := metricSum(t, "http://"+m.Addr()+"/metrics", "loadreporter_reports_between_deadlines_total"); v < 1 {
		t.Errorf("loadreporter_reports_between_deadlines_total %v, want at least 1", v)
	}
	close(e.release)
	if err := <-answered; err != nil {
		t.Fatal(err)
	}
}
