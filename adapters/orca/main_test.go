package orca

import (
	"context"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/loadreporter/loadreporter/domain"
	"github.com/loadreporter/loadreporter/domain/fireloop"
	"github.com/loadreporter/loadreporter/domain/session"
	"github.com/loadreporter/loadreporter/ports"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// testContext is the bound on every wait of one test.
func testContext(t testing.TB, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), d)
	t.Cleanup(cancel)
	return ctx
}

// wallClock is the machine's clock behind ports.Clock (adapters/clock is
// another adapter, which this package may not import).
type wallClock struct{}

func (wallClock) Now() time.Time { return time.Now() }
func (wallClock) NewTimer(at time.Time) ports.Timer {
	return wallTimer{time.NewTimer(time.Until(at))}
}

type wallTimer struct{ t *time.Timer }

func (w wallTimer) C() <-chan time.Time { return w.t.C }
func (w wallTimer) Stop()               { w.t.Stop() }

// engineMode is what a scripted engine answers.
type engineMode int

const (
	modeHealthy engineMode = iota
	modeStale              // every rank's snapshot is 10 s old
	modeFailing            // every pull fails
)

// engine is a scripted snapshot source: ranks ranks, each at KV usage
// usage, answering per mode. Plain struct, no mock generator.
type engine struct {
	ranks int
	mu    sync.Mutex
	usage float64
	mode  engineMode
	pulls int
}

func (e *engine) set(mode engineMode, usage float64) {
	e.mu.Lock()
	e.mode, e.usage = mode, usage
	e.mu.Unlock()
}

func (e *engine) Pull(context.Context) (domain.Snapshot, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.pulls++
	if e.mode == modeFailing {
		return domain.Snapshot{}, domain.Errorf(domain.CodeSourceFailed, "engine answered HTTP 500")
	}
	at := time.Now()
	if e.mode == modeStale {
		at = at.Add(-10 * time.Second)
	}
	var s domain.Snapshot
	for i := range e.ranks {
		s.Ranks = append(s.Ranks, domain.RankLoad{
			DPRank: int64(i), SnapshotTime: at, NumRunningReqs: 4, NumWaitingReqs: int64(i),
			NumUsedTokens: int64(e.usage * 1000), MaxTotalNumTokens: 1000, MaxRunningRequests: 256,
			TokenUsage: e.usage, GenThroughput: 50,
		})
	}
	return s, nil
}

var _ ports.SnapshotSource = (*engine)(nil)

// startLoop runs a real fire loop over source on the wall clock until the
// test ends.
func startLoop(t testing.TB, source ports.SnapshotSource, limits session.Limits) *fireloop.Loop {
	t.Helper()
	loop, err := fireloop.New(fireloop.Options{
		Source: source, Clock: wallClock{}, Limits: limits,
		Builder: domain.ReportBuilder{SourceInstanceID: "orca-test", StaleAfter: 3 * time.Second},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = loop.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return loop
}

// serveH2C serves h on a loopback port over HTTP/1.1 and unencrypted
// HTTP/2, as the reporter does without TLS, until the test ends; it
// returns the address.
func serveH2C(t testing.TB, h http.Handler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var p http.Protocols
	p.SetHTTP1(true)
	p.SetUnencryptedHTTP2(true)
	srv := &http.Server{Handler: h, Protocols: &p, ErrorLog: log.New(io.Discard, "", 0)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("serve: %v", err)
		}
	}()
	t.Cleanup(func() { _ = srv.Close(); <-done })
	return ln.Addr().String()
}

// mount returns a mux with the service's handler on it.
func mount(s *Service) *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle(s.Handler())
	return mux
}

// waitFor polls cond until it holds or ctx ends.
func waitFor(t testing.TB, ctx context.Context, what string, cond func() bool) {
	t.Helper()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("timed out waiting for %s", what)
		case <-time.After(5 * time.Millisecond):
		}
	}
}
