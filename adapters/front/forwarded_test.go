package front

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/loadreporter/loadreporter/domain"
	"github.com/loadreporter/loadreporter/domain/forwarded"
	"github.com/loadreporter/loadreporter/gen/sglang/grpc/scheduler/schedulerconnect"
)

// stamped is a snapshot of one rank the engine stamped at t.
func stamped(t time.Time) domain.Snapshot {
	return domain.Snapshot{Ranks: []domain.RankLoad{{SnapshotTime: t}}}
}

// An inference request is recorded from the moment it is passed on to
// its answer, with its body's bytes; the requests that make no work for
// the engine (health, model info, a GET) are not.
func TestInferenceRequestsAreRecordedUntilAnswered(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	arrived := make(chan string, 8)
	engine := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		arrived <- r.URL.Path
		if r.URL.Path == "/generate" {
			<-release
		}
		w.WriteHeader(http.StatusOK)
	}))
	defer engine.Close()
	defer func() {
		select {
		case <-release:
		default:
			close(release)
		}
	}()
	var ledger forwarded.Ledger
	now := time.Unix(1_800_000_000, 0)
	_, addr := startFront(t, Options{Engine: mustURL(t, engine.URL), Forwarded: &ledger, Now: func() time.Time { return now }})

	for _, p := range []string{"/health", "/v1/models", "/get_model_info"} {
		resp, err := http.Get(addr + p)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		<-arrived
	}
	resp, err := http.Post(addr+"/v1/models", "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	<-arrived
	if h := ledger.Held(); h != 0 {
		t.Fatalf("%d requests recorded that make no work for the engine", h)
	}

	body := strings.Repeat("x", 4000) // 1000 tokens at 4 bytes a token
	changes := ledger.Changes()
	answered := make(chan error, 1)
	go func() {
		resp, err := http.Post(addr+"/generate", "application/json", strings.NewReader(body))
		if err == nil {
			resp.Body.Close()
		}
		answered <- err
	}()
	// At the signal, before the body has passed: its length is known, so
	// a report built now weighs the whole prompt.
	select {
	case <-changes:
	case <-time.After(10 * time.Second):
		t.Fatal("no signal for the request passed on")
	}
	if got, n := ledger.AddTo(stamped(now.Add(-time.Second))); n != 1 || got.Ranks[0].NumWaitingUncachedTokens != 1000 {
		t.Fatalf("at the signal: added %d, %d tokens; want 1 request of 1000 (Content-Length)", n, got.Ranks[0].NumWaitingUncachedTokens)
	}
	if p := <-arrived; p != "/generate" {
		t.Fatalf("the engine saw %s", p)
	}
	got, n := ledger.AddTo(stamped(now.Add(-time.Second)))
	if n != 1 || got.Ranks[0].NumWaitingReqs != 1 || got.Ranks[0].NumWaitingUncachedTokens != 1000 {
		t.Fatalf("while the engine works on it: added %d, %+v; want 1 request of 1000 tokens", n, got.Ranks[0])
	}
	close(release)
	if err := <-answered; err != nil {
		t.Fatal(err)
	}
	if _, n := ledger.AddTo(stamped(now.Add(-time.Second))); n != 0 {
		t.Errorf("answered, still added %d times", n)
	}
}

// The gRPC scheduler's Generate is recorded, its protobuf body at three
// bytes a token; its other methods are not.
func TestTheGRPCSchedulersGenerateIsRecorded(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		method, path, ctype string
		per                 int
	}{
		{http.MethodPost, schedulerconnect.SglangSchedulerGenerateProcedure, "application/grpc", bytesPerTokenProtobuf},
		{http.MethodPost, schedulerconnect.SglangSchedulerHealthCheckProcedure, "application/grpc", 0},
		{http.MethodPost, "/generate", "application/json", bytesPerTokenJSON},
		{http.MethodPost, "/v1/completions", "application/json", bytesPerTokenJSON},
		{http.MethodGet, "/generate", "", 0},
		{http.MethodPost, "/v1/files", "multipart/form-data", 0},
		{http.MethodPost, "/v1/batches", "application/json", 0},
		{http.MethodPost, "/health_generate", "", 0},
		{http.MethodPost, "/flush_cache", "", 0},
	} {
		r := httptest.NewRequest(c.method, c.path, nil)
		if c.ctype != "" {
			r.Header.Set("Content-Type", c.ctype)
		}
		if got := bytesPerToken(r); got != c.per {
			t.Errorf("%s %s (%s): %d bytes a token, want %d", c.method, c.path, c.ctype, got, c.per)
		}
	}
}

// Every way a recorded request ends ends its record: the engine down, the
// client gone, the answer; a request refused past MaxInFlight or answered
// by the front itself is never recorded.
func TestEveryPathEndsTheRecord(t *testing.T) {
	t.Parallel()
	old := time.Unix(1_700_000_000, 0)
	pending := func(l *forwarded.Ledger) int { _, n := l.AddTo(stamped(old)); return n }
	waitPending := func(l *forwarded.Ledger, want int, what string) {
		t.Helper()
		ctx := testCtx(t)
		for pending(l) != want {
			if ctx.Err() != nil {
				t.Fatalf("%s: %d requests counted, want %d", what, pending(l), want)
			}
			time.Sleep(time.Millisecond)
		}
	}

	var down forwarded.Ledger
	_, addr := startFront(t, Options{Engine: mustURL(t, deadURL(t)), Forwarded: &down})
	resp, err := http.Post(addr+"/generate", "application/json", strings.NewReader(`{"text":"hi"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadGateway || pending(&down) != 0 {
		t.Errorf("engine down: %d, %d counted; want 502 and none", resp.StatusCode, pending(&down))
	}

	release := make(chan struct{})
	engine := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body) // so the server watches the connection
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer engine.Close()
	defer close(release)
	var l forwarded.Ledger
	answered := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})
	_, addr = startFront(t, Options{Engine: mustURL(t, engine.URL), Forwarded: &l, MaxInFlight: 1,
		Answered: []Route{{http.MethodPost, "/v1/answered", answered}}})
	ctx, cancel := context.WithCancel(testCtx(t))
	gone := make(chan struct{})
	go func() {
		defer close(gone)
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, addr+"/v1/chat/completions", strings.NewReader(`{"messages":[]}`))
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	waitPending(&l, 1, "a request with the engine")
	// Past MaxInFlight: refused, not recorded; answered here: not recorded.
	for _, p := range []string{"/generate", "/v1/answered"} {
		resp, err := http.Post(addr+p, "application/json", strings.NewReader(`{}`))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if n := pending(&l); n != 1 {
			t.Errorf("after POST %s (%d): %d counted, want the one with the engine", p, resp.StatusCode, n)
		}
	}
	cancel() // the client goes away
	<-gone
	waitPending(&l, 0, "the client gone")
	if h := l.Held(); h != 0 {
		t.Errorf("%d held once every request ended", h)
	}
}
