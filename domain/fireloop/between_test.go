package fireloop

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loadreporter/loadreporter/domain"
	"github.com/loadreporter/loadreporter/ports/porttest"
)

// recounter is a scripted Options.Between: the last snapshot with waiting
// requests as set.
type recounter struct {
	mu      sync.Mutex
	snap    domain.Snapshot
	ok      bool
	changes chan struct{}
}

func (r *recounter) Recount() (domain.Snapshot, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.snap, r.ok
}

func (r *recounter) Changes() <-chan struct{} { return r.changes }

// set makes the recount snap with waiting requests on rank 0, and signals.
func (r *recounter) set(snap domain.Snapshot, waiting int64) {
	r.mu.Lock()
	snap.Ranks = append([]domain.RankLoad(nil), snap.Ranks...)
	snap.Ranks[0].NumWaitingReqs = waiting
	r.snap, r.ok = snap, true
	r.mu.Unlock()
	r.changes <- struct{}{}
}

func withBetween(r *recounter, every time.Duration) option {
	return func(o *Options) { o.Between, o.BetweenEvery = r, every }
}

// betweenRouter is a loop with reports between deadlines every 20 ms at
// most and one router at intervalMs, past its first report and fire.
func betweenRouter(t *testing.T, intervalMs int64) (*harness, *recounter, *Subscription, *domain.Report) {
	t.Helper()
	rc := &recounter{changes: make(chan struct{})}
	h := newHarness(t, nil, withBetween(rc, 20*ms))
	sub := h.register("r1", intervalMs, 60000)
	first := report(t, sub)
	h.fires.next(t)
	return h, rc, sub, first
}

// A change between two pulls reaches the routers at once as a report of
// its own, built from the recount at that instant: no pull, no deadline
// moved; a second change within BetweenEvery waits for its end.
func TestAChangeBetweenPullsIsSentBetweenTheDeadlines(t *testing.T) {
	t.Parallel()
	h, rc, sub, first := betweenRouter(t, 100)
	snap := h.engine.snapshot(4)

	h.advanceTo(30 * ms)
	rc.set(snap, 7)
	r := report(t, sub)
	if r.SequenceID != first.SequenceID+1 || r.Ranks[0].NumWaitingReqs != 7 || !r.ReportTime.Equal(t0.Add(30*ms)) || r.Status != domain.StatusHealthy {
		t.Fatalf("between the deadlines: seq %d, waiting %d, at %v, %s; want seq %d, 7, 30ms, HEALTHY",
			r.SequenceID, r.Ranks[0].NumWaitingReqs, r.ReportTime.Sub(t0), r.Status, first.SequenceID+1)
	}
	if n := h.engine.count(); n != 1 {
		t.Errorf("%d pulls: a report between the deadlines read the engine", n)
	}
	if got := h.loop.BetweenDelivered(); got != 1 {
		t.Errorf("BetweenDelivered %d, want 1", got)
	}

	// 5 ms later: within BetweenEvery of the last, so at its end (50 ms).
	h.advanceTo(35 * ms)
	rc.set(snap, 8)
	h.expectWake(50 * ms)
	noReport(t, sub)
	h.advanceTo(50 * ms)
	if r := report(t, sub); r.Ranks[0].NumWaitingReqs != 8 || !r.ReportTime.Equal(t0.Add(50*ms)) {
		t.Fatalf("at the end of the window: waiting %d at %v, want 8 at 50ms", r.Ranks[0].NumWaitingReqs, r.ReportTime.Sub(t0))
	}

	// The deadline did not move: the next fire is at 100 ms, with a pull.
	h.expectWake(100 * ms)
	h.advanceTo(100 * ms)
	h.fires.next(t)
	if r := report(t, sub); r.Ranks[0].NumWaitingReqs != 0 || h.engine.count() != 2 {
		t.Errorf("the deadline's report: waiting %d after %d pulls, want the pull's 0 after 2", r.Ranks[0].NumWaitingReqs, h.engine.count())
	}
}

// Nothing is sent between the deadlines while the latest report is not
// HEALTHY, nor when the recount has nothing (the last pull failed).
func TestNothingBetweenTheDeadlinesAfterAFailedPull(t *testing.T) {
	t.Parallel()
	rc := &recounter{changes: make(chan struct{})}
	h := newHarness(t, func(_ context.Context, e *engine, n int) (domain.Snapshot, error) {
		return domain.Snapshot{}, errors.New("engine down")
	}, withBetween(rc, 20*ms))
	sub := h.register("r1", 100, 60000)
	if r := report(t, sub); r.Status != domain.StatusUnreachable {
		t.Fatalf("first report %s, want UNREACHABLE", r.Status)
	}
	h.fires.next(t)
	h.advanceTo(30 * ms)
	rc.set(domain.Snapshot{Ranks: []domain.RankLoad{{SnapshotTime: h.clock.Now(), MaxRunningRequests: 10, MaxTotalNumTokens: 10}}}, 3)
	rc.changes <- struct{}{} // taken once the loop is done with the first
	noReport(t, sub)
	if got := h.loop.BetweenDelivered(); got != 0 {
		t.Errorf("BetweenDelivered %d after an UNREACHABLE report, want 0", got)
	}
}

// BetweenEvery is checked: negative, or below a millisecond, is refused.
func TestBetweenEveryIsChecked(t *testing.T) {
	t.Parallel()
	o := Options{Source: &engine{}, Clock: porttest.NewClock(t0), Between: &recounter{},
		Builder: domain.ReportBuilder{SourceInstanceID: "test", StaleAfter: time.Second}}
	if _, err := New(o); err != nil {
		t.Fatalf("no BetweenEvery: %v", err)
	}
	for _, every := range []time.Duration{-time.Millisecond, time.Microsecond} {
		o.BetweenEvery = every
		_, err := New(o)
		if err == nil || !strings.Contains(err.Error(), "between-every") {
			t.Errorf("BetweenEvery %v: %v, want refused naming between-every", every, err)
		}
	}
}

// A recount whose stamps have grown older than StaleAfter is not sent
// between the deadlines: the engine is fine, its last pull just old, and
// the routers wait for their deadline's pull.
func TestABetweenReportIsNeverStale(t *testing.T) {
	t.Parallel()
	h, rc, sub, first := betweenRouter(t, 10000)
	snap := h.engine.snapshot(4)
	h.advanceTo(4 * time.Second) // StaleAfter is 3 s
	rc.set(snap, 7)
	rc.changes <- struct{}{} // taken once the loop is done with the first
	noReport(t, sub)
	if got := h.loop.Latest(); got != first {
		t.Errorf("latest is %d %s, want the pull's report %d", got.SequenceID, got.Status, first.SequenceID)
	}
}

// A poller is served the last pull's report, never one sent between the
// deadlines: its freshness is the pulls', and a stream of requests must
// not stop the pulls a poller causes.
func TestPollIsNotServedABetweenReport(t *testing.T) {
	t.Parallel()
	h, rc, sub, first := betweenRouter(t, 10000)
	h.advanceTo(500 * ms)
	rc.set(h.engine.snapshot(4), 7)
	if r := report(t, sub); r.SequenceID != first.SequenceID+1 {
		t.Fatalf("between the deadlines: seq %d", r.SequenceID)
	}
	if got := h.loop.Latest(); got != first {
		t.Fatalf("latest is seq %d, want the pull's %d", got.SequenceID, first.SequenceID)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	got, err := h.loop.Poll(ctx, 100*ms)
	if err != nil {
		t.Fatal(err)
	}
	if got.SequenceID <= first.SequenceID+1 || h.engine.count() != 2 {
		t.Errorf("poll: seq %d after %d pulls; want a report of a pull of its own (seq > %d, 2 pulls)", got.SequenceID, h.engine.count(), first.SequenceID+1)
	}
}

// Nothing goes between the deadlines when the recount has nothing (the
// last pull failed, or a rank has no stamp).
func TestNothingBetweenWithoutARecount(t *testing.T) {
	t.Parallel()
	h, rc, sub, _ := betweenRouter(t, 10000)
	h.advanceTo(30 * ms)
	rc.changes <- struct{}{} // ok is false: nothing to recount
	rc.changes <- struct{}{}
	noReport(t, sub)
	if got := h.loop.BetweenDelivered(); got != 0 {
		t.Errorf("BetweenDelivered %d, want 0", got)
	}
}
