package client

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	pb "github.com/loadreporter/loadreporter/gen/sglang/router/loadmonitor/v1"
)

func TestScore(t *testing.T) {
	t.Parallel()
	k := &pb.RankLoad{NumRunningReqs: 3, NumWaitingReqs: 1, MaxRunningRequests: 256, NumWaitingUncachedTokens: 100, MaxTotalNumTokens: 4000}
	if got, want := RankScore(k), 100+4*RequestWeight; got != want {
		t.Fatalf("RankScore %v, want %v", got, want)
	}
	r := &pb.LoadReport{Ranks: []*pb.RankLoad{
		{DpRank: 0, NumRunningReqs: 100, MaxRunningRequests: 100},                   // 100
		{DpRank: 1, NumRunningReqs: 50, NumWaitingReqs: 0, MaxRunningRequests: 100}, // 50
		{DpRank: 2, NumRunningReqs: 100, NumWaitingReqs: 50, MaxRunningRequests: 100,
			NumWaitingUncachedTokens: 1000, MaxTotalNumTokens: 2000}, // 1150
	}}
	score, best := Score(r)
	if score != 1300.0/3 || best != 1 {
		t.Fatalf("Score %v best %d, want mean %v and rank 1", score, best, 1300.0/3)
	}
	if s, b := Score(nil); !math.IsInf(s, 1) || b != -1 {
		t.Fatalf("no report: %v %d", s, b)
	}
	if s, b := Score(unreachable("a", 1)); !math.IsInf(s, 1) || b != -1 {
		t.Fatalf("no ranks: %v %d", s, b)
	}
}

// The score orders workers by the prefill a new request would wait
// behind: the worker with a long prompt queued loses to one with a short
// one, however many requests either holds; a prompt queued outweighs a
// larger batch; with nothing queued anywhere, the fewer requests win.
func TestScoreOrdersByWhatMakesTTFT(t *testing.T) {
	t.Parallel()
	one := func(running, waiting, tokens int64) *pb.LoadReport {
		return &pb.LoadReport{Ranks: []*pb.RankLoad{{NumRunningReqs: running, NumWaitingReqs: waiting,
			NumWaitingUncachedTokens: tokens, MaxRunningRequests: 256, MaxTotalNumTokens: 400_000}}}
	}
	for _, c := range []struct {
		name          string
		better, worse *pb.LoadReport
	}{
		{"a short prompt queued beats a long one", one(200, 3, 600), one(20, 1, 8000)},
		{"a big batch with nothing queued beats a small one with a prompt queued", one(200, 0, 0), one(10, 1, 512)},
		{"nothing queued: fewer requests", one(40, 0, 0), one(41, 0, 0)},
		{"the same prompts queued: fewer requests", one(40, 2, 1000), one(60, 2, 1000)},
	} {
		if b, w := scoreOf(c.better), scoreOf(c.worse); !(b < w) {
			t.Errorf("%s: %v, want below %v", c.name, b, w)
		}
	}
}

// loaded is a report whose one rank has running requests out of 100.
func loaded(running int64) *pb.LoadReport {
	r := healthy("x", 1, 1)
	r.Ranks[0].NumRunningReqs, r.Ranks[0].NumWaitingReqs, r.Ranks[0].MaxRunningRequests = running, 0, 100
	r.Ranks[0].NumWaitingUncachedTokens = 0
	return r
}

// standing is a worker that is never dialed, showing view v.
func standing(addr string, s State, r *pb.LoadReport, staleAt time.Time) *Worker {
	w := &Worker{addr: addr}
	w.view.Store(&View{Addr: addr, State: s, Report: r, StaleAt: staleAt})
	return w
}

// testFleet is a fleet of standing workers on a fixed clock and seed.
func testFleet(t *testing.T, now time.Time, seed uint64, ws ...*Worker) *Fleet {
	t.Helper()
	f, err := newFleet(Options{RouterID: "r"}, deps{clock: newFakeClock(now)}, rand.New(rand.NewPCG(seed, seed)))
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(ws, func(a, b *Worker) int { return strings.Compare(a.addr, b.addr) })
	f.workers.Store(&ws)
	return f
}

func picked(res PickResult) []string {
	var out []string
	for _, p := range res.Picks {
		out = append(out, p.Worker.Addr())
	}
	return out
}

// The power of two choices never picks the most loaded of three, picks the
// least loaded most often, and repeats itself under the same seed.
func TestPickPowerOfTwoChoices(t *testing.T) {
	t.Parallel()
	now := time.Unix(1000, 0)
	later := now.Add(time.Hour)
	mk := func() *Fleet {
		return testFleet(t, now, 7,
			standing("a", Fresh, loaded(10), later),
			standing("b", Fresh, loaded(50), later),
			standing("c", Fresh, loaded(90), later))
	}
	f, g := mk(), mk()
	count := map[string]int{}
	for range 3000 {
		res := f.Pick(1)
		if res.Degraded || res.State != Fresh || len(res.Picks) != 1 {
			t.Fatalf("result %+v", res)
		}
		if got := picked(g.Pick(1)); !slices.Equal(got, picked(res)) {
			t.Fatalf("same seed, different pick: %v vs %v", got, picked(res))
		}
		count[res.Picks[0].Worker.Addr()]++
	}
	// Each pair is drawn a third of the time: a wins two pairs, b one.
	if count["c"] != 0 || count["a"] < 1800 || count["b"] < 800 {
		t.Fatalf("picks %v, want a ≈ 2000, b ≈ 1000, c never", count)
	}
	all := f.Pick(5)
	if got := picked(all); len(got) != 3 || slices.Contains(got[:1], "c") {
		t.Fatalf("Pick(5) of 3 = %v, want the 3 distinct, c not first", got)
	}
	if p := all.Picks[0]; p.Score != scoreOf(p.View.Report) || p.BestRank != 0 {
		t.Fatalf("pick %+v", p)
	}
}

// scoreOf is Score's first result.
func scoreOf(r *pb.LoadReport) float64 { s, _ := Score(r); return s }

// Only Fresh views are picked while one exists; a Fresh view past its
// StaleAt on the fleet's clock is not Fresh.
func TestPickOnlyFresh(t *testing.T) {
	t.Parallel()
	now := time.Unix(1000, 0)
	f := testFleet(t, now, 1,
		standing("fresh-busy", Fresh, loaded(99), now.Add(time.Second)),
		standing("aged-idle", Fresh, loaded(0), now.Add(-time.Nanosecond)),
		standing("stale-idle", Stale, loaded(0), time.Time{}),
		standing("gone", Disconnected, loaded(0), time.Time{}))
	for range 100 {
		res := f.Pick(2)
		if res.Degraded || !slices.Equal(picked(res), []string{"fresh-busy"}) {
			t.Fatalf("got %v %+v, want only the fresh worker", picked(res), res)
		}
	}
}

// With no Fresh view, Pick takes the best state there is and says so.
func TestPickDegraded(t *testing.T) {
	t.Parallel()
	now := time.Unix(1000, 0)
	cases := []struct {
		name  string
		ws    []*Worker
		state State
		want  []string
	}{
		{"stale first", []*Worker{
			standing("u", Unreachable, unreachable("a", 1), time.Time{}),
			standing("s", Stale, loaded(80), time.Time{}),
			standing("d", Disconnected, nil, time.Time{}),
		}, Stale, []string{"s"}},
		{"then unreachable", []*Worker{
			standing("u", Unreachable, unreachable("a", 1), time.Time{}),
			standing("d", Disconnected, loaded(1), time.Time{}),
		}, Unreachable, []string{"u"}},
		{"then disconnected, least loaded first", []*Worker{
			standing("d1", Disconnected, loaded(70), time.Time{}),
			standing("d2", Disconnected, loaded(10), time.Time{}),
		}, Disconnected, []string{"d2", "d1"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res := testFleet(t, now, 3, c.ws...).Pick(2)
			if !res.Degraded || res.State != c.state || !strings.Contains(res.Reason, "no worker is fresh") {
				t.Fatalf("result %+v", res)
			}
			if got := picked(res); !slices.Equal(got, c.want) {
				t.Fatalf("picked %v, want %v", got, c.want)
			}
		})
	}
	empty := testFleet(t, now, 3)
	if res := empty.Pick(1); len(res.Picks) != 0 || res.Reason == "" {
		t.Fatalf("empty fleet: %+v", res)
	}
}

// Add, Remove and Close at run time (nothing listens at the address:
// the workers keep trying until closed).
func TestFleetMembership(t *testing.T) {
	t.Parallel()
	f, err := NewFleet(Options{RouterID: "r", Backoff: Backoff{Initial: time.Millisecond, Max: 10 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range []string{"127.0.0.1:3", "127.0.0.1:1", "127.0.0.1:2"} {
		if err := f.Add(a); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Add("127.0.0.1:1"); err == nil {
		t.Fatal("a duplicate address was added")
	}
	// The same worker spelled as a URL would take turns with itself.
	if err := f.Add("http://127.0.0.1:1"); err == nil || !strings.Contains(err.Error(), "already in the fleet as 127.0.0.1:1") {
		t.Fatalf("the same worker as a URL: %v", err)
	}
	var addrs []string
	for _, v := range f.Views() {
		addrs = append(addrs, v.Addr)
	}
	if !slices.Equal(addrs, []string{"127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"}) {
		t.Fatalf("views %v", addrs)
	}
	if w := f.Worker("127.0.0.1:2"); w == nil || f.Worker("nope") != nil {
		t.Fatal("Worker lookup")
	}
	if !f.Remove("127.0.0.1:2") || f.Remove("127.0.0.1:2") {
		t.Fatal("Remove twice")
	}
	if len(f.Workers()) != 2 {
		t.Fatalf("%d workers", len(f.Workers()))
	}
	if res := f.Pick(1); !res.Degraded || res.State != Disconnected {
		t.Fatalf("nothing reachable: %+v", res)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Add("127.0.0.1:4"); err == nil || len(f.Workers()) != 0 {
		t.Fatal("a closed fleet takes workers")
	}
	if _, err := NewFleet(Options{}); err == nil {
		t.Fatal("a fleet without RouterID")
	}
}

// waitFleet takes signals from changed until the fleet's views satisfy ok.
func waitFleet(ctx context.Context, t *testing.T, f *Fleet, changed <-chan struct{}, what string, ok func([]*View) bool) {
	t.Helper()
	for {
		select {
		case _, open := <-changed:
			if !open {
				t.Fatalf("fleet subscription closed waiting for %s", what)
			}
			if ok(f.Views()) {
				return
			}
		case <-ctx.Done():
			t.Fatalf("no signal for %s; views %+v", what, f.Views())
		}
	}
}

// Fleet.Subscribe signals the fleet as it is, a worker added, each view a
// worker publishes (its registration, a report) and a worker removed;
// cancel and Close close the channel.
func TestFleetSubscribe(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 10*time.Second)
	fw := startFakeWorker(t)
	f := newFleetT(t, fastOptions(ProtocolConnect), deps{})
	changed, cancel := f.Subscribe()
	defer cancel()
	waitFleet(ctx, t, f, changed, "the empty fleet", func(vs []*View) bool { return len(vs) == 0 })
	other, cancelOther := f.Subscribe()
	cancelOther()
	<-other // the signal it was made with
	if _, open := <-other; open {
		t.Fatal("a cancelled subscription stays open")
	}

	if err := f.Add(fw.addr); err != nil {
		t.Fatal(err)
	}
	waitFleet(ctx, t, f, changed, "the worker added", func(vs []*View) bool { return len(vs) == 1 && vs[0].Addr == fw.addr })
	fs := fw.next(ctx, t)
	fs.register(ctx, t, 1000, 300)
	waitFleet(ctx, t, f, changed, "the registration", func(vs []*View) bool { return vs[0].State == Stale && vs[0].Granted.Lease == time.Second })
	for seq := uint64(1); seq <= 3; seq++ {
		fs.report(t, healthy("i1", seq, 2))
		waitFleet(ctx, t, f, changed, fmt.Sprintf("report %d", seq), func(vs []*View) bool { return vs[0].Report.GetSequenceId() == seq })
	}

	if !f.Remove(fw.addr) {
		t.Fatal("Remove")
	}
	waitFleet(ctx, t, f, changed, "the worker removed", func(vs []*View) bool { return len(vs) == 0 })
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	for range changed { // a signal may be pending; then the channel closes
	}
	late, _ := f.Subscribe()
	<-late
	if _, open := <-late; open {
		t.Fatal("a subscription to a closed fleet stays open")
	}
}
