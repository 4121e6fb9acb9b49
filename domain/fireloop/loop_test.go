package fireloop

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loadreporter/loadreporter/domain"
	"github.com/loadreporter/loadreporter/domain/session"
	"github.com/loadreporter/loadreporter/ports"
	"github.com/loadreporter/loadreporter/ports/porttest"
)

const ms = time.Millisecond

func TestFirstReportDueAtOnce(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	h.clock.Advance(37 * ms)
	sub := h.register("r1", 100, 5000)
	r := report(t, sub)
	if r.SequenceID != 1 || r.Status != domain.StatusHealthy || len(r.Ranks) != 4 || !r.ReportTime.Equal(t0.Add(37*ms)) {
		t.Fatalf("first report %+v", r)
	}
	if h.engine.count() != 1 {
		t.Fatalf("pulls = %d", h.engine.count())
	}
}

func TestNoPullWithoutSessions(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	h.clock.Advance(time.Hour)
	if h.clock.Pending() != 0 {
		t.Fatal("the loop armed a timer with no session")
	}
	sub := h.register("r1", 100, 5000)
	report(t, sub)
	sub.Close()
	h.fires.next(t)
	// After the last session left, time passes without pulls.
	h.clock.Advance(time.Hour)
	sub2 := h.register("r2", 100, 5000)
	if r := report(t, sub2); r.SequenceID != 2 {
		t.Fatalf("sequence %d: a pull happened with no session", r.SequenceID)
	}
	if h.engine.count() != 2 {
		t.Fatalf("pulls = %d, want 2", h.engine.count())
	}
}

func TestAnchoredDeadlinesFollowRegistration(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil, withSchedule(session.Anchored))
	h.clock.Advance(37 * ms)
	sub := h.register("r1", 100, 60000)
	report(t, sub)
	for i, want := range []time.Duration{137 * ms, 237 * ms, 337 * ms} {
		h.expectWake(want)
		h.advanceTo(want)
		if r := report(t, sub); r.SequenceID != uint64(i+2) {
			t.Fatalf("sequence %d", r.SequenceID)
		}
		h.fires.next(t)
	}
}

func TestAlignedRoutersShareTheGrid(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil) // aligned is the default
	h.clock.Advance(37 * ms)
	a := h.register("a", 100, 60000)
	report(t, a)
	h.fires.next(t)
	h.clock.Advance(24 * ms) // t = 61
	b := h.register("b", 200, 60000)
	report(t, b)
	h.fires.next(t)
	c := h.register("c", 1000, 60000)
	report(t, c)
	h.fires.next(t)
	pullsBefore := h.engine.count()

	// a: 100, 200, …; b: 200, 400, …; c: 1000 (first grid point ≥ 561).
	seen := map[string]int{}
	for step := 1; step <= 10; step++ {
		at := time.Duration(step) * 100 * ms
		h.expectWake(at)
		h.advanceTo(at)
		f := h.fires.next(t)
		want := 1 + btoi(step%2 == 0) + btoi(step == 10)
		if f.Delivered["monitor"] != want {
			t.Fatalf("at %v delivered to %d routers, want %d", at, f.Delivered["monitor"], want)
		}
		for _, s := range []*Subscription{a, b, c} {
			select {
			case r := <-s.Reports():
				if r != f.Report {
					t.Fatal("routers of one fire got different reports")
				}
				seen[s.RouterID()]++
			default:
			}
		}
	}
	if seen["a"] != 10 || seen["b"] != 5 || seen["c"] != 1 {
		t.Fatalf("reports per router: %v", seen)
	}
	if got := h.engine.count() - pullsBefore; got != 10 {
		t.Fatalf("pulls over one second = %d, want 10 (one per 100ms grid point)", got)
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

func TestSlowerSessionOnlyAtItsDeadlines(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil, withSchedule(session.Anchored))
	subs := h.registerTogether([]string{"fast", "slow"}, []int64{100, 300}, 60000)
	fast, slow := subs[0], subs[1]
	f := h.fires.next(t)
	if f.Delivered["monitor"] != 2 {
		t.Fatalf("registered together, first fire served %d", f.Delivered["monitor"])
	}
	report(t, fast)
	report(t, slow)
	for i := 1; i <= 6; i++ {
		h.advanceTo(time.Duration(i) * 100 * ms)
		h.fires.next(t)
		report(t, fast)
		if i%3 == 0 {
			report(t, slow)
		} else {
			noReport(t, slow)
		}
	}
}

func TestSessionsRegisteredDuringAPullShareIt(t *testing.T) {
	t.Parallel()
	gate := make(chan struct{})
	h := newHarness(t, func(ctx context.Context, e *engine, n int) (domain.Snapshot, error) {
		if n == 1 {
			select {
			case <-gate:
			case <-ctx.Done():
				return domain.Snapshot{}, ctx.Err()
			}
		}
		return e.snapshot(4), nil
	})
	a := h.register("a", 100, 5000)
	h.waitIdle() // the budget timer: the pull is running
	b := h.register("b", 100, 5000)
	close(gate)
	ra, rb := report(t, a), report(t, b)
	if ra != rb || ra.SequenceID != 1 {
		t.Fatalf("a got %d, b got %d; want the same report", ra.SequenceID, rb.SequenceID)
	}
	if h.engine.count() != 1 {
		t.Fatalf("pulls = %d, want 1", h.engine.count())
	}
}

func TestSequenceSharedWithinAFireAndIncreasingAcross(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(ctx context.Context, e *engine, n int) (domain.Snapshot, error) {
		if n == 2 {
			return domain.Snapshot{}, domain.Errorf(domain.CodeSourceFailed, "engine down")
		}
		return domain.Snapshot{Ranks: []domain.RankLoad{{DPRank: 0, MaxTotalNumTokens: 1, MaxRunningRequests: 1}}}, nil
	})
	subs := h.registerTogether([]string{"a", "b", "c"}, []int64{100, 100, 100}, 5000)
	var last uint64
	for step := range 3 {
		if step > 0 {
			h.advanceTo(time.Duration(step) * 100 * ms)
		}
		f := h.fires.next(t)
		for _, s := range subs {
			if r := report(t, s); r.SequenceID != f.Report.SequenceID {
				t.Fatalf("%s got %d, fire built %d", s.RouterID(), r.SequenceID, f.Report.SequenceID)
			}
		}
		if f.Report.SequenceID != last+1 {
			t.Fatalf("sequence %d after %d", f.Report.SequenceID, last)
		}
		last = f.Report.SequenceID
		if step == 1 && f.Report.Status != domain.StatusUnreachable {
			t.Fatalf("status %v, want UNREACHABLE (it counts in the sequence too)", f.Report.Status)
		}
	}
}

func TestKeepAliveRenewsLeaseButNeverMovesDeadline(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil, withSchedule(session.Anchored))
	sub := h.register("r", 800, 1000)
	report(t, sub)
	h.fires.next(t)
	h.expectWake(800 * ms)
	h.advanceTo(700 * ms)
	if err := sub.KeepAlive(); err != nil {
		t.Fatal(err)
	}
	h.expectWake(800 * ms)
	h.advanceTo(800 * ms)
	report(t, sub)
	h.fires.next(t)
	// Lease now ends at 1700 (700 + 1000), before the 1600 deadline? No: 1600 first.
	h.expectWake(1600 * ms)
	h.advanceTo(1600 * ms)
	report(t, sub)
	h.fires.next(t)
	h.expectWake(1700 * ms)
	h.advanceTo(1700 * ms)
	if code := ended(t, sub); code != domain.CodeLeaseExpired {
		t.Fatalf("ended with %q, want LEASE_EXPIRED", code)
	}
	if h.loop.Count(session.KindMonitor) != 0 {
		t.Fatal("expired session still counted")
	}
}

func TestConfigUpdateIsAtomicAndMovesCadence(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil, withSchedule(session.Anchored))
	sub := h.register("r", 1000, 5000)
	report(t, sub)
	h.fires.next(t)
	ivl, bad := int64(200), int64(0)
	if _, err := sub.Update(&ivl, &bad); domain.ErrorCode(err) != domain.CodeInvalidArgument {
		t.Fatalf("err = %v", err)
	}
	h.expectWake(1000 * ms)
	h.advanceTo(100 * ms)
	cfg, err := sub.Update(&ivl, nil)
	if err != nil || cfg.Interval != 200*ms || cfg.Lease != 5*time.Second {
		t.Fatalf("cfg %+v err %v", cfg, err)
	}
	for _, at := range []time.Duration{300 * ms, 500 * ms, 700 * ms} {
		h.expectWake(at)
		h.advanceTo(at)
		report(t, sub)
		h.fires.next(t)
	}
}

func TestReplacementSafety(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	old := h.register("r", 100, 5000)
	neu := h.register("r", 100, 5000)
	if code := ended(t, old); code != domain.CodeReplaced {
		t.Fatalf("old ended with %q, want REPLACED", code)
	}
	old.Close() // the old stream's cleanup
	if r := report(t, neu); r == nil {
		t.Fatal("no report")
	}
	if h.loop.Count(session.KindMonitor) != 1 {
		t.Fatal("the old session's cleanup removed the new one")
	}
}

func TestSkipNotBurstAfterAStall(t *testing.T) {
	t.Parallel()
	stall := make(chan struct{})
	h := newHarness(t, func(ctx context.Context, e *engine, n int) (domain.Snapshot, error) {
		if n == 2 {
			<-stall // the engine stalls for 3½ intervals
		}
		return e.snapshot(4), nil
	}, withSchedule(session.Anchored), withExpected(4))
	sub := h.register("r", 100, 60000)
	report(t, sub)
	h.fires.next(t)
	h.advanceTo(100 * ms)
	h.waitIdle()              // pull 2 is in flight (its budget timer)
	h.clock.Advance(350 * ms) // t = 450: deadlines 200, 300, 400 pass
	close(stall)
	f := h.fires.next(t)
	if got := report(t, sub); got.SequenceID != 2 || f.Report.SequenceID != 2 {
		t.Fatalf("sequence %d", got.SequenceID)
	}
	h.expectWake(500 * ms)
	if h.engine.count() != 2 {
		t.Fatalf("pulls = %d: missed ticks were burst", h.engine.count())
	}
}

func TestHangingSourceIsBoundedByTheBudget(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(ctx context.Context, e *engine, n int) (domain.Snapshot, error) {
		<-ctx.Done() // hangs until cancelled
		return domain.Snapshot{}, ctx.Err()
	})
	sub := h.register("r", 100, 5000)
	h.expectWake(time.Second)
	h.clock.Advance(time.Second)
	r := report(t, sub)
	if r.Status != domain.StatusUnreachable || len(r.Ranks) != 0 || r.LastError != "load snapshot pull timed out" {
		t.Fatalf("report %v %q", r.Status, r.LastError)
	}
	if f := h.fires.next(t); f.Outcome != ports.PullTimeout {
		t.Fatalf("outcome %v", f.Outcome)
	}
}

func TestRankSetChangeRetriedOnceWithinTheBudget(t *testing.T) {
	t.Parallel()
	t.Run("second attempt complete", func(t *testing.T) {
		h := newHarness(t, func(ctx context.Context, e *engine, n int) (domain.Snapshot, error) {
			if n == 1 {
				return e.snapshot(3), nil
			}
			return e.snapshot(4), nil
		}, withExpected(4))
		sub := h.register("r", 100, 5000)
		if r := report(t, sub); r.Status != domain.StatusHealthy || len(r.Ranks) != 4 {
			t.Fatalf("%v %q", r.Status, r.LastError)
		}
		if f := h.fires.next(t); f.Attempts != 2 || h.engine.count() != 2 {
			t.Fatalf("attempts %d pulls %d", f.Attempts, h.engine.count())
		}
	})
	t.Run("still changed", func(t *testing.T) {
		h := newHarness(t, func(ctx context.Context, e *engine, n int) (domain.Snapshot, error) {
			return e.snapshot(3), nil
		}, withExpected(4))
		sub := h.register("r", 100, 5000)
		r := report(t, sub)
		if r.Status != domain.StatusUnreachable || r.LastError != "rank set changed: missing [3]" || len(r.Ranks) != 0 {
			t.Fatalf("%v %q", r.Status, r.LastError)
		}
		if f := h.fires.next(t); f.Attempts != 2 || f.Outcome != ports.PullRankSet || h.engine.count() != 2 {
			t.Fatalf("attempts %d outcome %v pulls %d", f.Attempts, f.Outcome, h.engine.count())
		}
	})
	t.Run("retry shares the one budget", func(t *testing.T) {
		h := newHarness(t, func(ctx context.Context, e *engine, n int) (domain.Snapshot, error) {
			if n == 1 {
				e.clock.Advance(600 * ms) // the first attempt took 600ms
				return e.snapshot(3), nil
			}
			<-ctx.Done()
			return domain.Snapshot{}, ctx.Err()
		}, withExpected(4))
		sub := h.register("r", 100, 5000)
		h.expectWake(time.Second)
		h.advanceTo(time.Second)
		if r := report(t, sub); r.LastError != "load snapshot pull timed out" {
			t.Fatalf("%q", r.LastError)
		}
	})
	t.Run("no retry for other errors", func(t *testing.T) {
		h := newHarness(t, func(ctx context.Context, e *engine, n int) (domain.Snapshot, error) {
			return domain.Snapshot{}, domain.Errorf(domain.CodeSourceFailed, "HTTP 500")
		}, withExpected(4))
		sub := h.register("r", 100, 5000)
		report(t, sub)
		if h.engine.count() != 1 {
			t.Fatalf("pulls = %d", h.engine.count())
		}
	})
}

func TestUnreachableNeverCarriesOldRanks(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(ctx context.Context, e *engine, n int) (domain.Snapshot, error) {
		switch n {
		case 2:
			return domain.Snapshot{}, domain.Errorf(domain.CodeSourceFailed, "connection refused")
		case 3:
			s := e.snapshot(4)
			s.Ranks[2].NumRunningReqs = -1
			return s, nil
		}
		return e.snapshot(4), nil
	})
	sub := h.register("r", 100, 5000)
	if r := report(t, sub); len(r.Ranks) != 4 {
		t.Fatal("first report has no ranks")
	}
	h.fires.next(t)
	for i, want := range []string{"connection refused", "rank 2: num_running_reqs is negative (-1)"} {
		h.advanceTo(time.Duration(i+1) * 100 * ms)
		r := report(t, sub)
		h.fires.next(t)
		if r.Status != domain.StatusUnreachable || len(r.Ranks) != 0 || r.LastError != want {
			t.Fatalf("report %d: %v %q with %d ranks", r.SequenceID, r.Status, r.LastError, len(r.Ranks))
		}
	}
}

func TestStaleThroughTheLoop(t *testing.T) {
	t.Parallel()
	frozen := t0
	h := newHarness(t, func(ctx context.Context, e *engine, n int) (domain.Snapshot, error) {
		s := e.snapshot(2)
		for i := range s.Ranks {
			s.Ranks[i].SnapshotTime = frozen
		}
		return s, nil
	})
	sub := h.register("r", 1000, 60000)
	report(t, sub)
	h.fires.next(t)
	for _, at := range []time.Duration{time.Second, 2 * time.Second, 3 * time.Second} {
		h.advanceTo(at)
		if r := report(t, sub); r.Status != domain.StatusHealthy {
			t.Fatalf("at %v: %v (%s); an age equal to stale_after is healthy", at, r.Status, r.LastError)
		}
		h.fires.next(t)
	}
	h.advanceTo(4 * time.Second)
	if r := report(t, sub); r.Status != domain.StatusStale || r.LastError != "load snapshot stale by 4000 ms" || len(r.Ranks) != 2 {
		t.Fatalf("%v %q", r.Status, r.LastError)
	}
}

func TestSlowReaderNeverDelaysOthers(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	subs := h.registerTogether([]string{"slow", "fast"}, []int64{100, 100}, 60000)
	slow, fast := subs[0], subs[1] // slow never reads
	report(t, fast)
	h.fires.next(t)
	for i := 1; i <= 5; i++ {
		h.advanceTo(time.Duration(i) * 100 * ms)
		f := h.fires.next(t)
		if r := report(t, fast); r.SequenceID != f.Report.SequenceID {
			t.Fatal("fast router fell behind")
		}
	}
	if r := report(t, slow); r.SequenceID != 6 || slow.Dropped() != 5 {
		t.Fatalf("slow router holds %d, dropped %d; want the latest (6) and 5 dropped", r.SequenceID, slow.Dropped())
	}
	noReport(t, slow)
}

func TestLearnsRankSetFromFirstValidSnapshot(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(ctx context.Context, e *engine, n int) (domain.Snapshot, error) {
		if n >= 2 {
			return e.snapshot(3), nil
		}
		return e.snapshot(4), nil
	})
	sub := h.register("r", 100, 5000)
	report(t, sub)
	h.fires.next(t)
	if got := h.loop.ExpectedRanks(); !got.Equal(domain.RankRange(4)) {
		t.Fatalf("learned %v", got)
	}
	h.advanceTo(100 * ms)
	if r := report(t, sub); r.Status != domain.StatusUnreachable || r.LastError != "rank set changed: missing [3]" {
		t.Fatalf("%v %q", r.Status, r.LastError)
	}
	h.fires.next(t)
	pulls := h.engine.count()
	h.loop.SetExpectedRanks(domain.RankRange(3)) // an explicit topology update
	if h.engine.count() != pulls {
		t.Fatal("a topology update caused a pull")
	}
	h.advanceTo(200 * ms)
	if r := report(t, sub); r.Status != domain.StatusHealthy {
		t.Fatalf("%v %q", r.Status, r.LastError)
	}
}

func TestShutdownEndsEverySession(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	a, b := h.register("a", 100, 5000), h.register("b", 1000, 5000)
	if h.loop.ShuttingDown().Err() != nil {
		t.Fatal("ShuttingDown ended before Shutdown")
	}
	h.loop.Shutdown()
	if h.loop.ShuttingDown().Err() == nil {
		t.Fatal("ShuttingDown lives on after Shutdown")
	}
	h.loop.Shutdown() // idempotent
	for _, s := range []*Subscription{a, b} {
		if code := ended(t, s); code != domain.CodeShuttingDown {
			t.Fatalf("%s ended with %q", s.RouterID(), code)
		}
	}
	if _, _, err := h.loop.Register("c", 100, 5000); domain.ErrorCode(err) != domain.CodeShuttingDown {
		t.Fatalf("register after shutdown: %v", err)
	}
}

func TestMaxSessionsThroughTheReporter(t *testing.T) {
	t.Parallel()
	l := session.DefaultLimits()
	l.MaxSessions = 1
	h := newHarness(t, nil, withLimits(l))
	h.register("a", 100, 5000)
	if _, _, err := h.loop.Register("b", 100, 5000); domain.ErrorCode(err) != domain.CodeResourceExhausted {
		t.Fatalf("err = %v", err)
	}
}

func TestNewRejectsBadOptions(t *testing.T) {
	t.Parallel()
	if _, err := New(Options{}); err == nil {
		t.Fatal("accepted no source and no clock")
	}
	h := newHarness(t, nil)
	if _, err := New(Options{Source: h.engine, Clock: h.clock, PullBudget: -1}); err == nil {
		t.Fatal("accepted a negative budget")
	}
	if _, err := New(Options{Source: h.engine, Clock: h.clock, Schedule: session.Anchored, PhaseSlots: 3}); err == nil ||
		!strings.Contains(err.Error(), "needs the aligned schedule") {
		t.Fatalf("phase slots with anchored deadlines: %v", err)
	}
	// Each refusal names its option, for the composition root to map to
	// its flag.
	ok := domain.ReportBuilder{SourceInstanceID: "test", StaleAfter: time.Second}
	for _, tc := range []struct {
		option string
		edit   func(*Options)
	}{
		{"stale-after", func(o *Options) { o.Builder.StaleAfter = 0 }},
		{"pull-budget", func(o *Options) { o.PullBudget = -time.Second }},
		{"history-interval", func(o *Options) { o.HistoryInterval = -time.Second }},
		{"history-interval", func(o *Options) { o.HistoryInterval = time.Millisecond }},
		{"history-interval", func(o *Options) { o.HistoryInterval = 25 * time.Hour }},
		{"worker-addr", func(o *Options) { o.Builder.Worker.Addr = " w:1" }},
		{"model", func(o *Options) { o.Builder.Worker.Model = "m\x00" }},
		{"zone", func(o *Options) { o.Builder.Worker.Zone = "z\xff" }},
		{"phase-slots", func(o *Options) { o.PhaseSlots = 101 }},
		{"max-sessions", func(o *Options) { o.Limits = session.DefaultLimits(); o.Limits.MaxSessions = -1 }},
	} {
		o := Options{Source: h.engine, Clock: h.clock, Builder: ok}
		tc.edit(&o)
		if _, err := New(o); domain.FieldOf(err) != tc.option || domain.ErrorCode(err) != domain.CodeInvalidArgument {
			t.Errorf("%s: %v, want INVALID_ARGUMENT naming it", tc.option, err)
		}
	}
	if _, err := New(Options{Source: h.engine, Clock: h.clock, Builder: ok, HistoryInterval: MinHistoryInterval}); err != nil {
		t.Errorf("the shortest history interval: %v", err)
	}
}

// With phase slots, a fire serves only the routers of its phase: pulls are
// bounded by the slots per interval, not by the routers, and each router
// still gets one report per interval, always from the same phase.
func TestPhaseSlotsSplitEachFire(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil, func(o *Options) { o.PhaseSlots = 4 })
	ids := []string{"a", "b", "c", "d", "e", "f", "g", "h"}
	subs := h.registerTogether(ids, slices.Repeat([]int64{100}, len(ids)), 60000)
	if f := h.fires.next(t); f.Delivered["monitor"] != len(ids) {
		t.Fatalf("first fire served %d routers, want all %d", f.Delivered["monitor"], len(ids))
	}
	for _, s := range subs {
		report(t, s)
	}
	pullsBefore := h.engine.count()
	// Slots 2 and 3 (phases 50 and 75 ms) come round first, then 0 and 1.
	got := map[string][]time.Duration{}
	for at := 50 * ms; at < 1050*ms; at += 25 * ms {
		h.expectWake(at)
		h.advanceTo(at)
		if f := h.fires.next(t); f.Delivered["monitor"] != 2 {
			t.Fatalf("the fire at %v served %d routers, want the 2 of its phase", at, f.Delivered["monitor"])
		}
		for _, s := range subs {
			select {
			case r := <-s.Reports():
				got[s.RouterID()] = append(got[s.RouterID()], r.ReportTime.Sub(t0))
			default:
			}
		}
	}
	if n := h.engine.count() - pullsBefore; n != 40 {
		t.Fatalf("pulls over one second = %d, want 40 (4 phases × 10 intervals)", n)
	}
	for id, times := range got {
		if len(times) != 10 {
			t.Fatalf("%s got %d reports in a second, want 10: %v", id, len(times), times)
		}
		for i := 1; i < len(times); i++ {
			if times[i]-times[i-1] != 100*ms {
				t.Fatalf("%s: reports at %v, want 100 ms apart", id, times)
			}
		}
	}
}

func TestAFireSaysHowLateItsPullStarted(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	h.clock.Advance(37 * ms)
	sub := h.register("r1", 100, 60000)
	report(t, sub)
	if f := h.fires.next(t); f.Lateness != 0 {
		t.Fatalf("the first fire, at registration: lateness %v, want 0", f.Lateness)
	}
	h.expectWake(100 * ms)
	h.advanceTo(103 * ms) // the timer fired 3 ms after the grid point
	report(t, sub)
	if f := h.fires.next(t); f.Lateness != 3*ms {
		t.Fatalf("lateness %v, want 3ms", f.Lateness)
	}
	h.expectWake(200 * ms)
	h.advanceTo(200 * ms)
	report(t, sub)
	if f := h.fires.next(t); f.Lateness != 0 {
		t.Fatalf("a fire on time: lateness %v, want 0", f.Lateness)
	}
}

// TestAPanicInAFireCrashesInsteadOfWedging: a fire that panics while it
// holds the loop's lock releases it, so Run's own shutdown runs and the
// panic reaches the top (the process dies loudly) instead of the loop
// waiting forever for its own lock, serving nothing. A zero interval, which
// Subscribe's callers must never pass, makes Deliver divide by zero.
func TestAPanicInAFireCrashesInsteadOfWedging(t *testing.T) {
	t.Parallel()
	clk := porttest.NewClock(t0)
	l, err := New(Options{Source: &engine{clock: clk}, Clock: clk,
		Builder: domain.ReportBuilder{SourceInstanceID: "test", StaleAfter: 3 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Subscribe(session.Options{Kind: session.KindWatch, Name: "zero", NoLease: true}); err != nil {
		t.Fatal(err)
	}
	panicked := make(chan any, 1)
	go func() {
		defer func() { panicked <- recover() }()
		_ = l.Run(context.Background())
	}()
	select {
	case p := <-panicked:
		if p == nil {
			t.Fatal("Run returned without the fire's panic")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run neither returned nor panicked: it waits for the lock its fire still holds")
	}
}

// TestASourceIgnoringCancellationLeavesOnePullBehind: a source that hangs
// and ignores its context's cancellation keeps its pull's goroutine. The
// next fires start no pull beside it (each would leave one more goroutine
// behind) and say why; once it returns, pulls resume.
func TestASourceIgnoringCancellationLeavesOnePullBehind(t *testing.T) {
	t.Parallel()
	entered, release := make(chan struct{}), make(chan struct{})
	var releaseOnce sync.Once
	unblock := func() { releaseOnce.Do(func() { close(release) }) }
	t.Cleanup(unblock) // before the harness's: Run waits for the pull
	h := newHarness(t, func(ctx context.Context, e *engine, n int) (domain.Snapshot, error) {
		if n == 1 {
			close(entered)
			<-release // deaf to ctx
		}
		return e.snapshot(4), nil
	})
	sub := h.register("r", 100, 5000)
	<-entered
	h.expectWake(time.Second)
	h.clock.Advance(time.Second) // the budget
	if r := report(t, sub); r.LastError != "load snapshot pull timed out" {
		t.Fatalf("first fire: %v %q", r.Status, r.LastError)
	}
	for range 3 {
		h.expectWake(h.clock.Now().Add(100 * ms).Sub(t0))
		h.clock.Advance(100 * ms)
		r := report(t, sub)
		if r.Status != domain.StatusUnreachable || !strings.Contains(r.LastError, "ignores cancellation") {
			t.Fatalf("fire while the pull hangs: %v %q", r.Status, r.LastError)
		}
	}
	if n := h.engine.count(); n != 1 {
		t.Fatalf("%d pulls started while the first one hung, want none", n-1)
	}
	unblock()
	for deadline := time.Now().Add(5 * time.Second); h.loop.pullRunning.Load(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the released pull never returned")
		}
	}
	h.expectWake(h.clock.Now().Add(100 * ms).Sub(t0))
	h.clock.Advance(100 * ms)
	if r := report(t, sub); r.Status != domain.StatusHealthy || h.engine.count() != 2 {
		t.Fatalf("once the pull returned: %v %q after %d pulls, want a new pull, healthy", r.Status, r.LastError, h.engine.count())
	}
}

func TestBehindOnlyWhileItsTimerIsDueAndNotTakenUp(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	if h.loop.Behind(t0.Add(time.Hour)) {
		t.Fatal("behind with no timer to wait on")
	}
	sub := h.register("r1", 100, 60000)
	report(t, sub)
	h.waitIdle()
	now := h.clock.Now()
	if h.loop.Behind(now) {
		t.Fatal("behind before its timer's time")
	}
	if !h.loop.Behind(now.Add(time.Hour)) {
		t.Fatal("not behind at a time past its timer's, which it has not taken up")
	}
	h.clock.Advance(150 * ms)
	report(t, sub)
	h.waitIdle()
	if h.loop.Behind(h.clock.Now()) {
		t.Fatal("behind once it took up its timer and armed the next")
	}
}
