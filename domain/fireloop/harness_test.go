package fireloop

import (
	"context"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/loadreporter/loadreporter/domain"
	"github.com/loadreporter/loadreporter/domain/session"
	"github.com/loadreporter/loadreporter/ports"
	"github.com/loadreporter/loadreporter/ports/porttest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var t0 = time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC)

// engine is a scripted snapshot source: it counts pulls and answers with
// script(n) for the n-th pull (1-based). Plain struct, no mock generator.
type engine struct {
	clock  *porttest.Clock
	mu     sync.Mutex
	pulls  int
	script func(ctx context.Context, e *engine, n int) (domain.Snapshot, error)
	hold   chan struct{} // when set, the first pull waits for it to close
}

func (e *engine) Pull(ctx context.Context) (domain.Snapshot, error) {
	e.mu.Lock()
	e.pulls++
	n, hold := e.pulls, e.hold
	e.mu.Unlock()
	if n == 1 && hold != nil {
		select {
		case <-hold:
		case <-ctx.Done():
			return domain.Snapshot{}, ctx.Err()
		}
	}
	if e.script != nil {
		return e.script(ctx, e, n)
	}
	return e.snapshot(4), nil
}

func (e *engine) count() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.pulls
}

// snapshot is a valid snapshot of n ranks taken now on the fake clock.
func (e *engine) snapshot(n int) domain.Snapshot {
	s := domain.Snapshot{}
	for i := range n {
		s.Ranks = append(s.Ranks, domain.RankLoad{
			DPRank: int64(i), SnapshotTime: e.clock.Now(), NumRunningReqs: int64(e.count()),
			NumUsedTokens: 10, MaxTotalNumTokens: 100, MaxRunningRequests: 1 << 20, TokenUsage: 0.1,
		})
	}
	return s
}

// fires records the loop's FireResults.
type fires struct{ ch chan ports.FireResult }

func (f fires) Fired(r ports.FireResult)           { f.ch <- r }
func (f fires) SessionsChanged(map[string]int)     {}
func (f fires) next(t *testing.T) ports.FireResult { t.Helper(); return recv(t, f.ch) }

type harness struct {
	t      *testing.T
	clock  *porttest.Clock
	engine *engine
	loop   *Loop
	fires  fires
}

type option func(*Options)

func withSchedule(s session.Schedule) option { return func(o *Options) { o.Schedule = s } }
func withExpected(n int) option              { return func(o *Options) { o.Expected = domain.RankRange(n) } }
func withLimits(l session.Limits) option     { return func(o *Options) { o.Limits = l } }

func newHarness(t *testing.T, script func(ctx context.Context, e *engine, n int) (domain.Snapshot, error), opts ...option) *harness {
	t.Helper()
	clk := porttest.NewClock(t0)
	e := &engine{clock: clk, script: script}
	f := fires{ch: make(chan ports.FireResult, 1000)}
	o := Options{
		Source: e, Clock: clk, Observer: f,
		Builder: domain.ReportBuilder{SourceInstanceID: "test", StaleAfter: 3 * time.Second},
	}
	for _, opt := range opts {
		opt(&o)
	}
	r, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = r.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Error("Run did not return after cancel")
		}
	})
	return &harness{t: t, clock: clk, engine: e, loop: r, fires: f}
}

func (h *harness) register(id string, intervalMs, leaseMs int64) *Subscription {
	h.t.Helper()
	sub, _, err := h.loop.Register(id, intervalMs, leaseMs)
	if err != nil {
		h.t.Fatal(err)
	}
	return sub
}

// advanceTo moves the fake clock to t0+d once the loop is waiting on a timer.
func (h *harness) advanceTo(d time.Duration) {
	h.t.Helper()
	h.waitIdle()
	h.clock.Advance(t0.Add(d).Sub(h.clock.Now()))
}

// waitIdle waits until the loop armed its timer (it is between fires).
func (h *harness) waitIdle() {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := h.clock.WaitPending(ctx, 1); err != nil {
		h.t.Fatal("the fire loop never armed its timer")
	}
}

// expectWake waits until the loop's earliest timer is at t0+want.
func (h *harness) expectWake(want time.Duration) {
	h.t.Helper()
	timeout := time.After(2 * time.Second)
	for {
		changed := h.clock.Changed()
		at, ok := h.clock.Next()
		if ok && at.Equal(t0.Add(want)) {
			return
		}
		select {
		case <-changed:
		case <-timeout:
			h.t.Fatalf("next wake %v (armed: %v), want %v", at.Sub(t0), ok, want)
		}
	}
}

// registerTogether registers routers so that all of them share the first
// pull: the first pull is held until the last one registered.
func (h *harness) registerTogether(ids []string, intervalsMs []int64, leaseMs int64) []*Subscription {
	h.t.Helper()
	hold := make(chan struct{})
	h.engine.mu.Lock()
	h.engine.hold = hold
	h.engine.mu.Unlock()
	subs := []*Subscription{h.register(ids[0], intervalsMs[0], leaseMs)}
	h.waitIdle() // the first pull is running
	for i := 1; i < len(ids); i++ {
		subs = append(subs, h.register(ids[i], intervalsMs[i], leaseMs))
	}
	close(hold)
	return subs
}

func recv[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(5 * time.Second):
		t.Fatal("timed out waiting")
	}
	var zero T
	return zero
}

func report(t *testing.T, sub *Subscription) *domain.Report {
	t.Helper()
	return recv(t, sub.Reports())
}

func noReport(t *testing.T, sub *Subscription) {
	t.Helper()
	select {
	case r := <-sub.Reports():
		t.Fatalf("%s got report %d, want none", sub.RouterID(), r.SequenceID)
	default:
	}
}

func ended(t *testing.T, sub *Subscription) string {
	t.Helper()
	recv(t, sub.Done())
	return domain.ErrorCode(sub.Err())
}
