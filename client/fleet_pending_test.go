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
// 10 000 tokens, that the engine snapshotted at snap (its own stamp: the
// pull completed a millisecond later).
func at1ms(running int64, snap time.Time) *pb.LoadReport {
	r := loaded(running)
	r.ReportTimeUnixMs = snap.UnixMilli() + 1
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

// report shows r as w's latest view, received now, and hands it to the
// fleet's count, as the Worker does with a report it accepts.
func report(w *Worker, r *pb.LoadReport, now time.Time) {
	w.view.Store(&View{Addr: w.addr, State: Fresh, Report: r, ReceivedAt: now, StaleAt: now.Add(time.Hour)})
	if w.pending != nil {
		w.pending.observe(r, now)
	}
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
				if p.Requests != int64(count[w.addr]) || p.Tokens != 100*p.Requests || p.PromptTokens != p.Tokens {
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
	want := Pending{Requests: 1, Tokens: 700, PromptTokens: 700}
	if p := second.Picks[0]; p.Pending != want {
		t.Fatalf("second pick sees %+v pending, want %+v", p.Pending, want)
	}
	if s, _ := ScorePending(w.View().Report, want); second.Picks[0].Score != s || s <= first.Picks[0].Score {
		t.Fatalf("second pick scores %v, want %v, above the first's %v", second.Picks[0].Score, s, first.Picks[0].Score)
	}
	if got := w.Pending(); got != (Pending{Requests: 2, Tokens: 700, PromptTokens: 700}) {
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
	d := f.Dispatch(w, Request{Tokens: 3, PromptTokens: 2})
	if got := w.Pending(); got != (Pending{Requests: 1, Tokens: 3, PromptTokens: 2}) {
		t.Fatalf("after Dispatch: %+v", got)
	}
	d.Done()
	if f.Dispatch(counting("stranger", nil, start), Request{}) != nil || f.Dispatch(nil, Request{}) != nil {
		t.Fatal("a dispatch to a worker outside the fleet is counted")
	}
}

// A dispatch ages out once the worker reports numbers taken after it:
// stamped by the engine after it, or (stamped by the pull) numbers that
// moved since a pull after it (the Ledger's tests go through each rule);
// a report without ranks counts nothing.
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
	one := Pending{Requests: 1, Tokens: 50, PromptTokens: 50}

	pulled := func(running int64, pull time.Time) *pb.LoadReport {
		r := at1ms(running, pull)
		r.ReportTimeUnixMs = pull.UnixMilli()
		return r
	}
	for _, c := range []struct {
		name     string
		r        *pb.LoadReport
		received time.Time
		want     Pending
	}{
		{"snapshot the millisecond before", at1ms(10, ms(-1)), t0.Add(time.Millisecond), one},
		{"snapshot within the dispatch's millisecond, before it", at1ms(11, ms(0)), t0.Add(time.Millisecond), one},
		{"unreachable", unreachable("a", 9), t0.Add(time.Second), one},
		{"pulled after it, numbers that moved since the last, taken before it", pulled(12, ms(5)), t0.Add(5 * time.Millisecond), one},
		{"pulled after it, the same numbers again", pulled(12, ms(6)), t0.Add(6 * time.Millisecond), one},
		{"pulled after it, numbers that moved since a pull after it", pulled(13, ms(7)), t0.Add(7 * time.Millisecond), Pending{}},
	} {
		report(w, c.r, c.received)
		if got := w.Pending(); got != c.want {
			t.Fatalf("%s: pending %+v, want %+v", c.name, got, c.want)
		}
	}
	clk.Advance(10 * time.Millisecond)
	f.PickFor(Request{}, 1)
	report(w, at1ms(13, clk.Now().Add(time.Millisecond)), clk.Now().Add(2*time.Millisecond))
	if got := w.Pending(); got != (Pending{}) {
		t.Fatalf("stamped by the engine after it: %+v", got)
	}
}

// The same through a Worker's stream: the fake worker's reports, on the
// fleet's fake clock, age a dispatch out only once one is snapshotted
// after it.
func TestReportsOnTheStreamAgeDispatchesOut(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 10*time.Second)
	fw := startFakeWorker(t)
	clk, d := onFakeClock()
	o := fastOptions(ProtocolGRPC)
	o.StaleAfterIntervals = 1000 // the fake clock moves little, but keep the view Fresh anyway
	reg := prometheus.NewPedanticRegistry()
	o.Registerer = reg
	f, changed, fs := fleetOf(ctx, t, fw, o, d)
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
	if got := w.Pending(); got != (Pending{Requests: 1, Tokens: 40, PromptTokens: 40}) {
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

	// A worker whose engine stamps no rank: the reporter's pull stamps
	// them (and the report). Its old numbers pulled again after a
	// dispatch keep it counted; numbers that moved since a pull after it
	// count it.
	pulled := func(seq uint64, running int64, pull time.Time) {
		t.Helper()
		r := at1ms(running, pull)
		r.SourceInstanceId, r.SequenceId, r.ReportTimeUnixMs = "a", seq, pull.UnixMilli()
		fs.report(t, r)
		waitFleet(ctx, t, f, changed, "the report", func(vs []*View) bool { return vs[0].Report.GetSequenceId() == seq })
	}
	clk.Advance(10 * time.Millisecond)
	f.PickFor(Request{PromptTokens: 7}, 1)
	one := Pending{Requests: 1, PromptTokens: 7}
	pulled(4, 10, clk.Now().Add(5*time.Millisecond))
	if got := w.Pending(); got != one {
		t.Fatalf("after the old numbers pulled after the dispatch: %+v", got)
	}
	pulled(5, 11, clk.Now().Add(10*time.Millisecond))
	if got := w.Pending(); got != (Pending{}) {
		t.Fatalf("after numbers that moved since a pull after the dispatch: %+v", got)
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
	if !res.Degraded || res.Dispatch.Worker() != old || old.Pending() != (Pending{Requests: 2, Tokens: 18, PromptTokens: 18}) {
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
			want[d.Worker()] = p.plus(d.sent.req, 1)
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

// Through a Fleet on a fake clock, least loaded over all: the worker with
// a long prompt queued loses to the one with a short one queued; a long
// prompt the router sends there counts as queued, so the next pick goes
// to the other; once the reports count it (numbers that moved since a
// pull after it), the worker is judged on its report again.
func TestPickForWeighsPromptsQueuedAndSent(t *testing.T) {
	t.Parallel()
	start := time.UnixMilli(1_700_000_000_000)
	clk := newFakeClock(start)
	queued := func(tokens int64, pull time.Time) *pb.LoadReport {
		r := at1ms(50, pull)
		r.ReportTimeUnixMs = pull.UnixMilli()
		r.Ranks[0].NumWaitingReqs, r.Ranks[0].NumWaitingUncachedTokens = 1, tokens
		return r
	}
	long := counting("long", nil, start.Add(time.Hour))
	short := counting("short", nil, start.Add(time.Hour))
	f := countingFleet(t, Options{Choices: 1}, clk, 1, long, short)
	report(long, queued(8000, start), start)
	report(short, queued(600, start), start)
	pick := func() string {
		t.Helper()
		clk.Advance(time.Millisecond)
		res := f.PickFor(Request{PromptTokens: 9000, Tokens: 9500}, 1)
		if len(res.Picks) != 1 {
			t.Fatalf("result %+v", res)
		}
		return res.Picks[0].Worker.Addr()
	}
	if got := pick(); got != "short" {
		t.Fatalf("picked %s, want the worker with the short prompt queued", got)
	}
	if got, want := short.Pending(), (Pending{Requests: 1, Tokens: 9500, PromptTokens: 9000}); got != want {
		t.Fatalf("pending %+v, want %+v", got, want)
	}
	if got := pick(); got != "long" {
		t.Fatalf("picked %s, want the other: the 9 000 tokens sent count on the first", got)
	}
	// Both engines took their request in and prefilled it; their next
	// reports, pulled after the dispatches, show it.
	now := clk.Now()
	report(long, queued(8000, now), now)
	report(short, queued(600, now), now)
	if got := short.Pending(); got.Requests != 1 {
		t.Fatalf("the old numbers pulled again age out %+v", got)
	}
	report(long, queued(8001, now.Add(time.Millisecond)), now.Add(time.Millisecond))
	report(short, queued(601, now.Add(time.Millisecond)), now.Add(time.Millisecond))
	if got := short.Pending(); got != (Pending{}) {
		t.Fatalf("numbers that moved since: %+v still pending", got)
	}
	if got := pick(); got != "short" {
		t.Fatalf("picked %s, want the worker with the short prompt queued again", got)
	}
}

// What the router sent counts as the engine's own queue would: its
// prompt tokens and a request each, spread over the ranks; so a worker
// the router just sent a long prompt loses to a twin it sent a short one.
func TestScorePending(t *testing.T) {
	t.Parallel()
	r := &pb.LoadReport{Ranks: []*pb.RankLoad{
		{DpRank: 0, NumRunningReqs: 10, NumWaitingUncachedTokens: 500, MaxRunningRequests: 100},
		{DpRank: 1, NumRunningReqs: 20, MaxRunningRequests: 200},
	}}
	// 4 requests and 600 prompt tokens, 2 and 300 per rank: rank 0 is
	// 500 + 300 + 12, rank 1 300 + 22.
	score, best := ScorePending(r, Pending{Requests: 4, Tokens: 5000, PromptTokens: 600})
	if want := (812.0 + 322.0) / 2; math.Abs(score-want) > 1e-12 || best != 1 {
		t.Fatalf("ScorePending %v best %d, want %v and rank 1", score, best, want)
	}
	if s, b := ScorePending(r, Pending{}); s != scoreOf(r) || b != 1 {
		t.Fatalf("nothing pending: %v %d, want Score's %v 1", s, b, scoreOf(r))
	}
	if s, b := ScorePending(nil, Pending{Requests: 1}); !math.IsInf(s, 1) || b != -1 {
		t.Fatalf("no ranks: %v %d", s, b)
	}
	twin := loaded(10)
	short, _ := ScorePending(twin, Pending{Requests: 1, PromptTokens: 200})
	long, _ := ScorePending(twin, Pending{Requests: 1, PromptTokens: 4000})
	unknown, _ := ScorePending(twin, Pending{Requests: 1})
	if !(scoreOf(twin) < unknown && unknown < short && short < long) {
		t.Fatalf("nothing %v, a request of unknown size %v, a short prompt %v, a long one %v: want that order",
			scoreOf(twin), unknown, short, long)
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

// Standings read each worker's view with what was sent it, in address
// order whatever order the fleet was given.
func TestStandingsPairEachViewWithItsPending(t *testing.T) {
	t.Parallel()
	start := time.UnixMilli(1_700_000_000_000)
	clk := newFakeClock(start)
	b := counting("b", at1ms(10, start.Add(-time.Second)), start.Add(time.Hour))
	a := counting("a", at1ms(90, start.Add(-time.Second)), start.Add(time.Hour))
	f := countingFleet(t, Options{}, clk, 1, b, a)

	d := f.Dispatch(b, Request{Tokens: 40, PromptTokens: 30})
	got := f.Standings()
	if len(got) != 2 || got[0].View != a.View() || got[1].View != b.View() {
		t.Fatalf("standings %+v, want a's view then b's", got)
	}
	if got[0].Pending != (Pending{}) || got[1].Pending != (Pending{Requests: 1, Tokens: 40, PromptTokens: 30}) {
		t.Fatalf("pending a %+v, b %+v", got[0].Pending, got[1].Pending)
	}
	d.Done()
	if p := f.Standings()[1].Pending; p != (Pending{}) {
		t.Fatalf("b after Done: %+v", p)
	}
}
