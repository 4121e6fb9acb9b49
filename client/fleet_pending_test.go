package client

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	pb "github.com/loadreporter/loadreporter/gen/sglang/router/loadmonitor/v1"
)

// at1ms is a report of one rank, running requests out of 100 slots and
// 10 000 tokens, snapshotted at snap.
func at1ms(running int64, snap time.Time) *pb.LoadReport {
	r := loaded(running)
	r.Ranks[0].SnapshotTimeUnixMs = snap.UnixMilli()
	r.Ranks[0].MaxTotalNumTokens, r.Ranks[0].NumUsedTokens, r.Ranks[0].NumTotalTokens = 10_000, 0, 0
	return r
}

// counting is a standing worker that a fleet counts dispatches for.
func counting(addr string, r *pb.LoadReport, staleAt time.Time) *Worker {
	w := standing(addr, Fresh, r, staleAt)
	w.pending = new(pendingSet)
	return w
}

// countingFleet is a fleet of counting workers on a fake clock, with
// opts (RouterID filled in) and seed.
func countingFleet(t *testing.T, opts Options, clk *fakeClock, seed uint64, ws ...*Worker) *Fleet {
	t.Helper()
	opts.RouterID = "r"
	f, err := newFleet(opts, deps{clock: clk}, rand.New(rand.NewPCG(seed, seed)))
	if err != nil {
		t.Fatal(err)
	}
	if f.opts.Accounting == AccountingOff {
		for _, w := range ws {
			w.pending = nil // as dial leaves it with accounting off
		}
	}
	slices.SortFunc(ws, func(a, b *Worker) int { return strings.Compare(a.addr, b.addr) })
	f.workers.Store(&ws)
	return f
}

// report shows r as w's latest view, received now, as the Worker would
// publish it.
func report(w *Worker, r *pb.LoadReport, now time.Time) {
	w.view.Store(&View{Addr: w.addr, State: Fresh, Report: r, ReceivedAt: now, StaleAt: now.Add(time.Hour)})
}

// TestABurstBetweenTwoReportsSpreads: 100 requests picked between two
// reports, one every millisecond, over four workers of which one was
// a little less loaded at the report. With accounting, each pick sees the
// ones before and the burst spreads over all four, for the best of two
// and for the least loaded over all; without it, every pick sees the
// same report, and the least loaded over all sends them all to one
// worker (the best of two, half). The next report, snapshotted after the
// burst, counts them: nothing is pending any more.
func TestABurstBetweenTwoReportsSpreads(t *testing.T) {
	t.Parallel()
	start := time.UnixMilli(1_700_000_000_000)
	for _, tc := range []struct {
		name string
		opts Options
		// fewest and most bound the picks of every worker; the busiest
		// gets at least herd.
		fewest, most, herd int
	}{
		{"best of two, accounting", Options{}, 20, 30, 0},
		{"least loaded over all, accounting", Options{Choices: 1}, 24, 26, 0},
		{"best of two, no accounting", Options{Accounting: AccountingOff}, 0, 100, 40},
		{"least loaded over all, no accounting", Options{Choices: 1, Accounting: AccountingOff}, 0, 100, 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := newFakeClock(start)
			snap := start.Add(-10 * time.Millisecond)
			ws := []*Worker{
				counting("a", at1ms(10, snap), start.Add(time.Hour)),
				counting("b", at1ms(11, snap), start.Add(time.Hour)),
				counting("c", at1ms(11, snap), start.Add(time.Hour)),
				counting("d", at1ms(11, snap), start.Add(time.Hour)),
			}
			f := countingFleet(t, tc.opts, clk, 5, ws...)
			count := map[string]int{}
			for range 100 {
				clk.Advance(time.Millisecond)
				res := f.PickFor(Request{Tokens: 100}, 1)
				if len(res.Picks) != 1 || res.Degraded {
					t.Fatalf("result %+v", res)
				}
				if (res.Dispatch != nil) != (tc.opts.Accounting != AccountingOff) {
					t.Fatalf("Dispatch %v with accounting %v", res.Dispatch, tc.opts.Accounting)
				}
				count[res.Picks[0].Worker.Addr()]++
			}
			t.Logf("picks %v", count)
			lo, hi := math.MaxInt, 0
			for _, w := range ws {
				lo, hi = min(lo, count[w.addr]), max(hi, count[w.addr])
			}
			if lo < tc.fewest || hi > tc.most || hi < tc.herd {
				t.Fatalf("picks %v: want each worker in [%d, %d], the busiest at least %d", count, tc.fewest, tc.most, tc.herd)
			}
			if tc.opts.Accounting == AccountingOff {
				if p := ws[0].Pending(); p != (Pending{}) {
					t.Fatalf("pending %+v with accounting off", p)
				}
				return
			}
			var sum int64
			for _, w := range ws {
				p := w.Pending()
				if p.Requests != int64(count[w.addr]) || p.Tokens != 100*p.Requests {
					t.Fatalf("%s: pending %+v after %d picks of 100 tokens", w.addr, p, count[w.addr])
				}
				sum += p.Requests
			}
			if sum != 100 {
				t.Fatalf("%d pending, want the 100 picked", sum)
			}
			next := clk.Now().Add(time.Millisecond)
			for _, w := range ws {
				report(w, at1ms(11, next), next)
				if p := w.Pending(); p != (Pending{}) {
					t.Fatalf("%s: %+v pending after a report snapshotted after the burst", w.addr, p)
				}
			}
		})
	}
}

// Pick's score is ScorePending of the report and what was pending, and
// the pick itself counts from the next one on; Done takes it out once.
func TestDoneDecrements(t *testing.T) {
	t.Parallel()
	start := time.UnixMilli(1_700_000_000_000)
	clk := newFakeClock(start)
	w := counting("a", at1ms(10, start.Add(-time.Second)), start.Add(time.Hour))
	f := countingFleet(t, Options{}, clk, 1, w)

	first := f.PickFor(Request{Tokens: 700}, 1)
	if p := first.Picks[0]; p.Pending != (Pending{}) || p.Score != scoreOf(p.View.Report) {
		t.Fatalf("first pick %+v", p)
	}
	if first.Dispatch.Worker() != w {
		t.Fatalf("dispatch on %v", first.Dispatch.Worker())
	}
	second := f.PickFor(Request{Tokens: -5}, 1) // a negative size counts as 0
	want := Pending{Requests: 1, Tokens: 700}
	if p := second.Picks[0]; p.Pending != want {
		t.Fatalf("second pick sees %+v pending, want %+v", p.Pending, want)
	}
	if s, _ := ScorePending(w.View().Report, want); second.Picks[0].Score != s || s <= first.Picks[0].Score {
		t.Fatalf("second pick scores %v, want %v, above the first's %v", second.Picks[0].Score, s, first.Picks[0].Score)
	}
	if got := w.Pending(); got != (Pending{Requests: 2, Tokens: 700}) {
		t.Fatalf("pending %+v", got)
	}
	first.Dispatch.Done()
	if got := w.Pending(); got != (Pending{Requests: 1, Tokens: 0}) {
		t.Fatalf("after Done: %+v", got)
	}
	first.Dispatch.Done() // again: nothing
	if got := w.Pending(); got != (Pending{Requests: 1, Tokens: 0}) {
		t.Fatalf("after a second Done: %+v", got)
	}
	second.Dispatch.Done()
	if got := w.Pending(); got != (Pending{}) {
		t.Fatalf("after both Done: %+v", got)
	}
	var none *Dispatch
	none.Done()
	if none.Worker() != nil {
		t.Fatal("a nil Dispatch names a worker")
	}

	// A fallback is counted where it goes.
	d := f.Dispatch(w, Request{Tokens: 3})
	if got := w.Pending(); got != (Pending{Requests: 1, Tokens: 3}) {
		t.Fatalf("after Dispatch: %+v", got)
	}
	d.Done()
	if f.Dispatch(counting("stranger", nil, start), Request{}) != nil || f.Dispatch(nil, Request{}) != nil {
		t.Fatal("a dispatch to a worker outside the fleet is counted")
	}
}

// A dispatch ages out once the worker's view shows a report whose
// snapshot (its oldest stamped rank) was taken after it, and not before;
// an unstamped report counts from its arrival; one without ranks counts
// nothing.
func TestAReportAfterTheDispatchAgesItOut(t *testing.T) {
	t.Parallel()
	// 0.5 ms into a millisecond: a snapshot stamped at that millisecond
	// was taken before the dispatch.
	t0 := time.UnixMilli(1_700_000_000_000).Add(500 * time.Microsecond)
	ms := func(d int64) time.Time { return time.UnixMilli(1_700_000_000_000 + d) }
	clk := newFakeClock(t0)
	w := counting("a", at1ms(10, ms(-100)), t0.Add(time.Hour))
	f := countingFleet(t, Options{}, clk, 1, w)
	f.PickFor(Request{Tokens: 50}, 1)
	one := Pending{Requests: 1, Tokens: 50}

	two := func(a, b time.Time) *pb.LoadReport {
		r := at1ms(10, a)
		r.Ranks = append(r.Ranks, &pb.RankLoad{DpRank: 1, SnapshotTimeUnixMs: b.UnixMilli(), MaxRunningRequests: 100})
		return r
	}
	unstamped := at1ms(10, t0)
	unstamped.Ranks[0].SnapshotTimeUnixMs = 0
	for _, c := range []struct {
		name     string
		r        *pb.LoadReport
		received time.Time
		want     Pending
	}{
		{"snapshot the millisecond before", at1ms(10, ms(-1)), t0.Add(time.Millisecond), one},
		{"snapshot within the dispatch's millisecond, before it", at1ms(10, ms(0)), t0.Add(time.Millisecond), one},
		{"one rank after, one before", two(ms(1), ms(0)), t0.Add(time.Millisecond), one},
		{"unstamped, received before", unstamped, t0.Add(-time.Millisecond), one},
		{"unreachable", unreachable("a", 9), t0.Add(time.Second), one},
		{"every rank after", two(ms(1), ms(2)), t0.Add(time.Millisecond), Pending{}},
	} {
		report(w, c.r, c.received)
		if got := w.Pending(); got != c.want {
			t.Fatalf("%s: pending %+v, want %+v", c.name, got, c.want)
		}
	}
	// An unstamped report counts from its arrival.
	clk.Advance(time.Millisecond)
	d := f.PickFor(Request{}, 1).Dispatch
	report(w, unstamped, clk.Now().Add(time.Nanosecond))
	if got := w.Pending(); got != (Pending{}) {
		t.Fatalf("unstamped, received after: %+v", got)
	}
	d.Done() // after the count aged out: nothing goes negative
	if got := w.Pending(); got != (Pending{}) {
		t.Fatalf("Done after the age-out: %+v", got)
	}
}

// The same through a Worker's stream: the fake worker's reports, on the
// fleet's fake clock, age a dispatch out only once one is snapshotted
// after it.
func TestReportsOnTheStreamAgeDispatchesOut(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 10*time.Second)
	fw := startFakeWorker(t)
	clk := newFakeClock(time.UnixMilli(1_700_000_000_000))
	o := fastOptions(ProtocolGRPC)
	o.StaleAfterIntervals = 1000 // the fake clock moves little, but keep the view Fresh anyway
	reg := prometheus.NewPedanticRegistry()
	o.Registerer = reg
	f, err := newFleet(o, deps{clock: clk, rand: func() float64 { return 0.5 }}, rand.New(rand.NewPCG(1, 2)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() })
	changed, cancel := f.Subscribe()
	defer cancel()
	if err := f.Add(fw.addr); err != nil {
		t.Fatal(err)
	}
	fs := fw.next(ctx, t)
	fs.register(ctx, t, 60_000, 20_000)
	send := func(seq uint64, snap time.Time) {
		t.Helper()
		r := at1ms(10, snap)
		r.SourceInstanceId, r.SequenceId = "a", seq
		fs.report(t, r)
		waitFleet(ctx, t, f, changed, "the report", func(vs []*View) bool { return vs[0].Report.GetSequenceId() == seq })
	}
	send(1, clk.Now().Add(-time.Second))
	clk.Advance(10 * time.Millisecond)
	res := f.PickFor(Request{Tokens: 40}, 3)
	if len(res.Picks) != 1 || res.Degraded || res.Dispatch == nil {
		t.Fatalf("pick %+v", res)
	}
	w := f.Worker(fw.addr)
	send(2, clk.Now().Add(-time.Millisecond))
	if got := w.Pending(); got != (Pending{Requests: 1, Tokens: 40}) {
		t.Fatalf("after a report snapshotted before the dispatch: %+v", got)
	}
	if r, k := gauge(t, reg, "loadreporter_client_pending_requests", "worker", fw.addr),
		gauge(t, reg, "loadreporter_client_pending_tokens", "worker", fw.addr); r != 1 || k != 40 {
		t.Fatalf("pending metrics %v requests, %v tokens", r, k)
	}
	send(3, clk.Now().Add(time.Millisecond))
	if got := w.Pending(); got != (Pending{}) {
		t.Fatalf("after a report snapshotted after the dispatch: %+v", got)
	}
	if r := gauge(t, reg, "loadreporter_client_pending_requests", "worker", fw.addr); r != 0 {
		t.Fatalf("pending metric %v after the age-out", r)
	}
}

// A worker that leaves the fleet takes its pending with it: its count is
// zero, a Done that comes later changes nothing, and the worker added
// back under the same address starts from nothing.
func TestAWorkerThatLeavesDropsItsPending(t *testing.T) {
	t.Parallel()
	// Nothing listens: the workers stay Disconnected and are picked as
	// Degraded, which counts as any pick does.
	f, err := NewFleet(Options{RouterID: "r", Backoff: Backoff{Initial: time.Millisecond, Max: 10 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() })
	const addr = "127.0.0.1:1"
	if err := f.Add(addr); err != nil {
		t.Fatal(err)
	}
	old := f.Worker(addr)
	res := f.PickFor(Request{Tokens: 9}, 1)
	f.PickFor(Request{Tokens: 9}, 1)
	if !res.Degraded || res.Dispatch.Worker() != old || old.Pending() != (Pending{Requests: 2, Tokens: 18}) {
		t.Fatalf("pick %+v, pending %+v", res, old.Pending())
	}
	if !f.Remove(addr) {
		t.Fatal("Remove")
	}
	if got := old.Pending(); got != (Pending{}) {
		t.Fatalf("a removed worker keeps %+v pending", got)
	}
	res.Dispatch.Done()
	if got := old.Pending(); got != (Pending{}) {
		t.Fatalf("Done after Remove: %+v", got)
	}
	if f.Dispatch(old, Request{}) != nil {
		t.Fatal("a dispatch to a removed worker is counted")
	}
	if err := f.Add(addr); err != nil {
		t.Fatal(err)
	}
	if got := f.Worker(addr).Pending(); got != (Pending{}) {
		t.Fatalf("the worker added back starts with %+v", got)
	}
	f.PickFor(Request{}, 1)
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if got := f.Worker(addr); got != nil {
		t.Fatal("a closed fleet keeps workers")
	}
}

// Picks, Done, reports and reads from many goroutines at once, under the
// race detector: every dispatch that is Done or aged is counted out
// exactly once, so the counts end where the unfinished dispatches say.
func TestConcurrentPickAndDone(t *testing.T) {
	t.Parallel()
	start := time.UnixMilli(1_700_000_000_000)
	clk := newFakeClock(start)
	var ws []*Worker
	for _, a := range []string{"a", "b", "c", "d"} {
		ws = append(ws, counting(a, at1ms(10, start.Add(-time.Second)), start.Add(time.Hour)))
	}
	f := countingFleet(t, Options{}, clk, 9, slices.Clone(ws)...)
	const pickers, picks = 8, 300
	var wg sync.WaitGroup
	kept := make([][]*Dispatch, pickers) // the unfinished ones, per picker
	for g := range pickers {
		wg.Go(func() {
			for i := range picks {
				res := f.PickFor(Request{Tokens: int64(i)}, 2)
				if res.Dispatch == nil {
					t.Error("no dispatch")
					return
				}
				if i%3 == 0 {
					kept[g] = append(kept[g], res.Dispatch)
					continue
				}
				res.Dispatch.Done()
				if i%5 == 0 {
					res.Dispatch.Done()
					_ = res.Picks[1].Worker.Pending()
				}
			}
		})
	}
	wg.Go(func() { // reports snapshotted long ago: they age nothing
		for i := range picks {
			report(ws[i%len(ws)], at1ms(int64(i%50), start.Add(-time.Second)), start)
		}
	})
	wg.Wait()
	want := map[*Worker]Pending{}
	for _, ds := range kept {
		for _, d := range ds {
			p := want[d.Worker()]
			p.Requests++
			p.Tokens += d.tokens
			want[d.Worker()] = p
		}
	}
	for _, w := range ws {
		if got := w.Pending(); got != want[w] {
			t.Fatalf("%s: pending %+v, want the unfinished %+v", w.addr, got, want[w])
		}
	}
	// Finish half concurrently, age the rest with reports after them.
	for _, ds := range kept {
		wg.Go(func() {
			for _, d := range ds[:len(ds)/2] {
				d.Done()
			}
		})
	}
	wg.Wait()
	for _, w := range ws {
		report(w, at1ms(10, start.Add(time.Second)), start.Add(time.Second))
		if got := w.Pending(); got != (Pending{}) {
			t.Fatalf("%s: pending %+v after every dispatch finished or was counted", w.addr, got)
		}
	}
}

// A router that never calls Done, to a worker that never reports, keeps
// at most maxPendingDispatches: the oldest are forgotten.
func TestPendingIsBounded(t *testing.T) {
	t.Parallel()
	s := new(pendingSet)
	w := &Worker{}
	at := time.UnixMilli(1)
	first := s.add(w, at, 1)
	for range maxPendingDispatches + 10 {
		s.add(w, at, 1)
	}
	if got := s.current(time.Time{}); got.Requests != maxPendingDispatches || got.Tokens != maxPendingDispatches {
		t.Fatalf("pending %+v, want %d", got, maxPendingDispatches)
	}
	first.Done() // forgotten: nothing changes
	if got := s.current(time.Time{}); got.Requests != maxPendingDispatches {
		t.Fatalf("pending %+v after a forgotten Done", got)
	}
	if len(s.q)-s.head > 2*maxPendingDispatches+64 {
		t.Fatalf("%d records kept for %d counted", len(s.q)-s.head, s.live)
	}
}

// Done in any order keeps the records in proportion to what is counted.
func TestDoneOutOfOrderIsTidied(t *testing.T) {
	t.Parallel()
	s := new(pendingSet)
	w := &Worker{}
	long := s.add(w, time.UnixMilli(1), 0) // one long request holds the head
	for range 10_000 {
		s.add(w, time.UnixMilli(2), 0).Done()
	}
	if n := len(s.q) - s.head; n > 2*s.live+64 {
		t.Fatalf("%d records kept for %d counted", n, s.live)
	}
	long.Done()
	if got := s.current(time.Time{}); got != (Pending{}) || len(s.q) != s.head {
		t.Fatalf("pending %+v, %d records", got, len(s.q)-s.head)
	}
}

func TestScorePending(t *testing.T) {
	t.Parallel()
	r := &pb.LoadReport{Ranks: []*pb.RankLoad{
		{DpRank: 0, NumRunningReqs: 10, MaxRunningRequests: 100, MaxTotalNumTokens: 1000},
		{DpRank: 1, NumRunningReqs: 20, MaxRunningRequests: 200}, // capacity unknown
	}}
	// 4 requests and 600 tokens, 2 and 300 per rank: rank 0 is
	// (10+2)/100 + 300/1000 = 0.42, rank 1 (20+2)/200 = 0.11 (no token
	// term without a capacity).
	score, best := ScorePending(r, Pending{Requests: 4, Tokens: 600})
	if want := (0.42 + 0.11) / 2; math.Abs(score-want) > 1e-12 || best != 1 {
		t.Fatalf("ScorePending %v best %d, want %v and rank 1", score, best, want)
	}
	if s, b := ScorePending(r, Pending{}); s != scoreOf(r) || b != 0 {
		t.Fatalf("nothing pending: %v %d, want Score's %v 0", s, b, scoreOf(r))
	}
	if s, b := ScorePending(nil, Pending{Requests: 1}); !math.IsInf(s, 1) || b != -1 {
		t.Fatalf("no ranks: %v %d", s, b)
	}
}

// The best of three never picks the most loaded two of four, and best of
// d at least the pool compares every worker.
func TestBestOfD(t *testing.T) {
	t.Parallel()
	now := time.Unix(1000, 0)
	later := now.Add(time.Hour)
	mk := func(d int) *Fleet {
		return countingFleet(t, Options{Choices: d, Accounting: AccountingOff}, newFakeClock(now), 3,
			standing("a", Fresh, loaded(10), later), standing("b", Fresh, loaded(20), later),
			standing("c", Fresh, loaded(30), later), standing("d", Fresh, loaded(40), later))
	}
	three, all := mk(3), mk(4)
	count := map[string]int{}
	for range 2000 {
		count[picked(three.Pick(1))[0]]++
		if got := picked(all.Pick(1)); got[0] != "a" {
			t.Fatalf("best of 4 of 4 picked %v", got)
		}
	}
	// a is in 3 of the 4 triples, b wins the one without a.
	if count["c"] != 0 || count["d"] != 0 || count["a"] < 1300 || count["b"] < 350 {
		t.Fatalf("best of three: %v, want a ≈ 1500, b ≈ 500", count)
	}
}
