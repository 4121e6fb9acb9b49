package main

import (
	"math"
	"testing"
	"time"

	"github.com/loadreporter/loadreporter/cmd/loadreporter/enginesim/model"
	"github.com/loadreporter/loadreporter/domain/forwarded"
)

func testFleet(engines, routers int) fleet {
	return fleet{Engines: engines, Routers: routers, Params: model.DefaultParams(), SnapshotStamps: true}
}

// TestSimulateTimesARequest: one request on an idle engine is timed as
// the model's step costs say: TTFT one prefill step, no queue, then one
// decode step.
func TestSimulateTimesARequest(t *testing.T) {
	t.Parallel()
	p := model.DefaultParams()
	trace := []request{{At: 1500 * time.Millisecond, Prompt: 100, Output: 2}}
	res, err := simulate(testFleet(2, 1), policies[rowOracle], trace, window{Warmup: time.Second, Measure: time.Second, Drain: time.Second}, 1)
	if err != nil {
		t.Fatal(err)
	}
	prefill := p.StepOverhead + 100*p.PrefillPerToken
	decode := p.StepOverhead + p.DecodePerSeq + 101*p.DecodePer1kKVTokens/1000
	if res.Measured != 1 || res.Served != 1 || len(res.TTFT) != 1 ||
		math.Abs(res.TTFT[0]-prefill.Seconds()) > 1e-9 || res.Queue[0] != 0 || math.Abs(res.E2E[0]-(prefill+decode).Seconds()) > 1e-9 {
		t.Errorf("got %+v, want TTFT %v, queue 0, e2e %v", res, prefill, prefill+decode)
	}
	if res.Dispatched[0]+res.Dispatched[1] != 1 {
		t.Errorf("dispatched %v", res.Dispatched)
	}
}

// TestSimulateWindowAndDrain: only the window's arrivals are measured;
// one that cannot finish within the drain counts as +Inf but its TTFT is
// kept.
func TestSimulateWindowAndDrain(t *testing.T) {
	t.Parallel()
	trace := []request{
		{At: 100 * time.Millisecond, Prompt: 50, Output: 4},             // warm-up
		{At: 1100 * time.Millisecond, Prompt: 50, Output: 4},            // measured
		{At: 1200 * time.Millisecond, Prompt: 50, Output: 2000},         // measured, too long for the drain
		{At: 2100 * time.Millisecond, Prompt: 50, Output: 4, Router: 0}, // after the window: never sent
	}
	res, err := simulate(testFleet(2, 1), policies[rowRandom], trace, window{Warmup: time.Second, Measure: time.Second, Drain: 2 * time.Second}, 1)
	if err != nil {
		t.Fatal(err)
	}
	if res.Measured != 2 || res.Served != 1 || math.IsInf(res.TTFT[1], 1) || math.IsInf(res.Queue[1], 1) || !math.IsInf(res.E2E[1], 1) || math.IsInf(res.E2E[0], 1) {
		t.Errorf("got %+v: want two measured, the second started but unfinished", res)
	}
}

// TestSimulateReads: the reporters pull on their aligned grid (10 a
// second at 100 ms, the history's one a second else), a poller is served
// the latest report, and the oracle reads every engine at each pick.
func TestSimulateReads(t *testing.T) {
	t.Parallel()
	f := testFleet(4, 2)
	win := window{Warmup: 5 * time.Second, Measure: 20 * time.Second, Drain: 30 * time.Second}
	trace := arrivals(1, workloads[1], profile{Rate: 4}, win.end(), f.Routers)
	measured := 0
	for _, q := range trace {
		if q.At >= win.Warmup && q.At < win.end() {
			measured++
		}
	}
	for _, tc := range []struct {
		row  int
		want float64
	}{
		// A front's pushes on forward read nothing of the engine.
		{rowPush100Acct, 10}, {rowPush100Fwd, 10}, {rowPush1sAcct, 1}, {rowPoll1sB2, 1}, {rowPoll10B2, 1}, {rowLocal, 0},
		// The least loaded reads every engine at each pick, the best of
		// two the two it drew.
		{rowOracleLeast, float64(measured) / win.Measure.Seconds()},
		{rowOracle, 2 * float64(measured) / float64(f.Engines) / win.Measure.Seconds()},
	} {
		res, err := simulate(f, policies[tc.row], trace, win, 1)
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(res.Reads-tc.want) > 0.051 {
			t.Errorf("%s: %.2f reads a second an engine, want %.2f", policies[tc.row].Name, res.Reads, tc.want)
		}
		if res.Served != measured {
			t.Errorf("%s: served %d of %d at a light load", policies[tc.row].Name, res.Served, measured)
		}
	}
}

// TestSimulateStaleLeastLoadedHerds: polling every 10 s and sending to
// the least loaded herds (Mitzenmacher): queues pile up on one engine at
// a time, far worse than the best of two on the same reports.
func TestSimulateStaleLeastLoadedHerds(t *testing.T) {
	t.Parallel()
	f := testFleet(8, 4)
	c, err := capacity(f.Params, workloads[1], 1, 60*time.Second, 120*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	win := window{Warmup: 60 * time.Second, Measure: 120 * time.Second, Drain: 120 * time.Second}
	trace := arrivals(1, workloads[1], profile{Rate: 0.85 * c * 8}, win.end(), f.Routers)
	herd, err := simulate(f, policies[rowPoll10Least], trace, win, 1)
	if err != nil {
		t.Fatal(err)
	}
	b2, err := simulate(f, policies[rowPoll10B2], trace, win, 1)
	if err != nil {
		t.Fatal(err)
	}
	if h, b := summarize(herd), summarize(b2); h.TTFT99 < 10*b.TTFT99 || h.Imbalance < 2*b.Imbalance {
		t.Errorf("poll 10 s: least loaded p99 TTFT %.3f s, imbalance %.0f; best of two %.3f s, %.0f", h.TTFT99, h.Imbalance, b.TTFT99, b.Imbalance)
	}
}

// TestCapacity: a saturated engine of 512/512 requests completes what
// its batch allows: 256 running requests, each needing 512 decode steps
// and a prefill step of its own, bound the rate between these figures.
func TestCapacity(t *testing.T) {
	t.Parallel()
	p := model.DefaultParams()
	c, err := capacity(p, workloads[1], 1, 60*time.Second, 300*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	// Decode alone: 256 sequences of up to 1024 KV tokens a step.
	full := p.StepOverhead + 256*p.DecodePerSeq + 256*1024*p.DecodePer1kKVTokens/1000
	decodeOnly := 256 / (512 * full.Seconds())
	// Every request also needs its prefill (512 tokens, overhead shared
	// in the best case of a full chunk).
	prefill := (512*p.PrefillPerToken + p.StepOverhead/16).Seconds()
	low := 1 / (512*full.Seconds()/256 + prefill + p.StepOverhead.Seconds())
	if c > decodeOnly || c < low {
		t.Errorf("capacity %.2f requests/s, want between %.2f and %.2f", c, low, decodeOnly)
	}
}

// TestAFrontsReportCountsWhatItPassedOn: in the rows with fronts, a
// report is the engine's published snapshot plus the requests its front
// passed on since the snapshot's stamp (domain/forwarded's rules).
func TestAFrontsReportCountsWhatItPassedOn(t *testing.T) {
	t.Parallel()
	f := testFleet(1, 1)
	e, err := model.New(f.Params, modelEpoch)
	if err != nil {
		t.Fatal(err)
	}
	// More than the batch holds: the engine decodes with a queue, and
	// publishes every 15 decode steps only.
	for range f.Params.MaxRunningRequests + 40 {
		if _, err := e.Submit(modelEpoch, model.Request{PromptTokens: 100, MaxNewTokens: 1000, Rank: model.AnyRank}); err != nil {
			t.Fatal(err)
		}
	}
	s := &sim{f: f, pol: policies[rowPush100Acct], engines: []*model.Engine{e}, reps: make([]vreporter, 1), fronts: make([]forwarded.Ledger, 1)}
	s.advance(2 * time.Second)
	pub := e.PublishedAt(0, s.clock(s.now))
	if !pub.Timestamp.Before(s.clock(s.now)) {
		t.Fatalf("the busy engine's snapshot is stamped %v, not before now", pub.Timestamp)
	}
	r := s.fronts[0].Add(s.clock(s.now), 1, 500)
	rep := s.reportNow(0)
	k := rep.GetRanks()[0]
	if k.GetNumWaitingReqs() != int64(pub.NumWaitingReqs)+1 || k.GetNumWaitingUncachedTokens() != pub.NumWaitingUncachedTokens+500 {
		t.Errorf("report: waiting %d (%d tokens), want the snapshot's %d (%d) and the request passed on", k.GetNumWaitingReqs(), k.GetNumWaitingUncachedTokens(), pub.NumWaitingReqs, pub.NumWaitingUncachedTokens)
	}
	r.Done()
	if k := s.reportNow(0).GetRanks()[0]; k.GetNumWaitingReqs() != int64(pub.NumWaitingReqs) {
		t.Errorf("answered: waiting %d, want the snapshot's %d", k.GetNumWaitingReqs(), pub.NumWaitingReqs)
	}
}
