package main

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"io"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/loadreporter/loadreporter/adapters/pollapi"
	"github.com/loadreporter/loadreporter/client"
	"github.com/loadreporter/loadreporter/domain"
	pb "github.com/loadreporter/loadreporter/gen/sglang/router/loadmonitor/v1"
)

// TestChooseDraws: the best of d picks as client.Fleet draws: d = 0 is
// the least loaded; d = 2 two distinct workers (the least loaded of four
// wins half the time, the most loaded never); d = 3 of four, the least
// loaded three times in four; d = 1 uniform; on a tie the first drawn.
func TestChooseDraws(t *testing.T) {
	t.Parallel()
	scores := []float64{2, 0, 3, 1} // least loaded 1, most 2
	score := func(i int) float64 { return scores[i] }
	rng := rand.New(rand.NewPCG(1, 2))
	const n = 40_000
	for _, tc := range []struct {
		d             int
		least, most   float64
		uniformOnTies bool
	}{{0, 1, 0, false}, {2, 0.5, 0, true}, {3, 0.75, 0, true}, {1, 0.25, 0.25, true}} {
		counts := make([]int, 4)
		for range n {
			counts[choose(rng, 4, tc.d, score)]++
		}
		if got := float64(counts[1]) / n; math.Abs(got-tc.least) > 0.01 {
			t.Errorf("d = %d: the least loaded won %.3f of the picks, want %.2f (%v)", tc.d, got, tc.least, counts)
		}
		if got := float64(counts[2]) / n; math.Abs(got-tc.most) > 0.01 {
			t.Errorf("d = %d: the most loaded won %.3f of the picks, want %.2f (%v)", tc.d, got, tc.most, counts)
		}
		ties := make([]int, 4)
		for range n {
			ties[choose(rng, 4, tc.d, func(int) float64 { return 1 })]++
		}
		for i, c := range ties {
			if math.Abs(float64(c)/n-0.25) > 0.01 {
				t.Errorf("d = %d, equal scores: worker %d won %d of %d", tc.d, i, c, n)
			}
		}
	}
}

// fakeSources serves one report per worker to every router.
type fakeSources struct{ reports []*pb.LoadReport }

func (f fakeSources) live(k int) *pb.LoadReport      { return f.reports[k] }
func (f fakeSources) report(_, k int) *pb.LoadReport { return f.reports[k] }

func loaded(running int64, at time.Time) *pb.LoadReport {
	return &pb.LoadReport{Ranks: []*pb.RankLoad{{SnapshotTimeUnixMs: at.UnixMilli(), NumRunningReqs: running, MaxRunningRequests: 256, MaxTotalNumTokens: 400_000}}}
}

// TestAccountingSpreadsABurst: between two reports, a router that
// compares every worker on the last report alone sends a burst to the one
// it showed least loaded (Mitzenmacher's herd); counting its own
// dispatches with client's Ledger, as client.Fleet does, spreads the
// burst; a report whose numbers moved after the dispatches ages them out,
// one showing the old numbers again does not, and Done uncounts one.
func TestAccountingSpreadsABurst(t *testing.T) {
	t.Parallel()
	snap := time.Unix(1_800_000_000, 0)
	src := fakeSources{[]*pb.LoadReport{loaded(10, snap), loaded(11, snap), loaded(11, snap), loaded(11, snap)}}
	for _, acct := range []bool{false, true} {
		r := newRouter(0, policy{Kind: kindPush, Choices: 0, Accounting: acct}, 4, 1)
		got := map[int]int{}
		var ds []*client.Sent
		for i := range 8 {
			at := snap.Add(time.Duration(i+1) * time.Millisecond)
			k := r.pick(at, src)
			got[k]++
			ds = append(ds, r.sent(k, at, request{Prompt: 100, Output: 100}))
		}
		if !acct && got[0] != 8 {
			t.Errorf("without accounting the burst went %v, want all 8 to worker 0", got)
		}
		// Each pending request adds its 100 prompt tokens and one
		// request: worker 0's lead of one request is gone after its
		// first, so eight spread two a worker.
		if acct && (got[0] != 2 || got[1] != 2 || got[2] != 2 || got[3] != 2) {
			t.Errorf("with accounting the burst went %v, want two to each worker", got)
		}
		if !acct {
			continue
		}
		want := client.Pending{Requests: 2, Tokens: 400, PromptTokens: 200}
		if p := r.pend[0].Pending(); p != want {
			t.Errorf("pending on worker 0 before a new report: %+v, want %+v", p, want)
		}
		r.finished(0, ds[0])
		if p := r.pend[0].Pending(); p.Requests != 1 || p.PromptTokens != 100 {
			t.Errorf("after Done of the first: %+v, want 1 request, 100 prompt tokens", p)
		}
		late := snap.Add(time.Second)
		r.observe(1, loaded(11, late), late) // the old snapshot pulled again
		if p := r.pend[1].Pending(); p.Requests != 2 {
			t.Errorf("after the old numbers again: %+v pending on worker 1, want the 2 sent", p)
		}
		r.observe(1, loaded(13, late), late) // numbers that moved
		if p := r.pend[1].Pending(); p != (client.Pending{}) {
			t.Errorf("after numbers taken since: %+v pending on worker 1, want none", p)
		}
	}
}

// TestParseLoads: the poller reads the reporter's own /v1/loads answer
// (pollapi's envelope) into the report client.Score reads.
func TestParseLoads(t *testing.T) {
	t.Parallel()
	rep := &domain.Report{ReportTime: time.Unix(1_800_000_000, 0), Status: domain.StatusHealthy, Ranks: []domain.RankLoad{
		{DPRank: 0, SnapshotTime: time.Unix(1_800_000_000, 0), NumRunningReqs: 7, NumWaitingReqs: 2, NumWaitingUncachedTokens: 900,
			NumUsedTokens: 5000, NumTotalTokens: 5900, MaxTotalNumTokens: 400_000, MaxRunningRequests: 256, TokenUsage: 0.0125},
		{DPRank: 1, SnapshotTime: time.Unix(1_800_000_000, 0), NumRunningReqs: 1, MaxTotalNumTokens: 400_000, MaxRunningRequests: 256},
	}}
	b, err := json.Marshal(pollapi.EnvelopeOf(rep))
	if err != nil {
		t.Fatal(err)
	}
	got, err := parseLoads(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Ranks) != 2 || got.Ranks[0].GetNumRunningReqs() != 7 || got.Ranks[0].GetNumWaitingReqs() != 2 ||
		got.Ranks[0].GetNumWaitingUncachedTokens() != 900 || got.Ranks[0].GetMaxRunningRequests() != 256 ||
		got.Ranks[0].GetMaxTotalNumTokens() != 400_000 || got.Ranks[1].GetDpRank() != 1 {
		t.Fatalf("parsed %v from %s", got, b)
	}
	want, _ := client.Score(&pb.LoadReport{Ranks: []*pb.RankLoad{
		{NumRunningReqs: 7, NumWaitingReqs: 2, NumWaitingUncachedTokens: 900, MaxTotalNumTokens: 400_000, MaxRunningRequests: 256},
		{NumRunningReqs: 1, MaxTotalNumTokens: 400_000, MaxRunningRequests: 256},
	}})
	if s, _ := client.Score(got); s != want {
		t.Errorf("score %g, want %g", s, want)
	}
	if _, err := parseLoads(strings.NewReader("{")); err == nil {
		t.Error("a cut answer parsed")
	}
}

// TestChartIsSVG: the chart is well-formed XML with every series named.
func TestChartIsSVG(t *testing.T) {
	t.Parallel()
	c := chart{Title: "t <&>", XLabel: "x", YLabel: "y", X: []string{"0", "10", "100"}, Panels: []panel{
		{Title: "a", Series: []series{{Name: "one", Color: "#000", Y: []float64{0.1, 0.2, math.Inf(1)}}, {Name: "ref", Color: "#111", Flat: true, Y: []float64{0.15}}}},
		{Title: "b", Series: []series{{Name: "one", Color: "#000", Y: []float64{0.3, math.NaN(), 2}}, {Name: "ref", Color: "#111", Flat: true, Y: []float64{0.5}}}},
	}}
	s := c.svg()
	dec := xml.NewDecoder(strings.NewReader(s))
	for {
		_, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("not well-formed: %v\n%s", err, s)
		}
	}
	for _, want := range []string{"<svg", "one", "ref", "t &lt;&amp;&gt;", "100 ms", "1 s", "polyline"} {
		if !strings.Contains(s, want) {
			t.Errorf("no %q in the chart", want)
		}
	}
}

func TestRowKeys(t *testing.T) {
	t.Parallel()
	if got, err := rowKeys("push100, oracle,push100"); err != nil || len(got) != 2 || got[0] != rowOracle || got[1] != rowPush100 {
		t.Errorf("rowKeys: %v %v", got, err)
	}
	if got, _ := rowKeys("all"); len(got) != len(policies) {
		t.Errorf("all: %v", got)
	}
	if got, _ := rowKeys("none"); got != nil {
		t.Errorf("none: %v", got)
	}
	if _, err := rowKeys("push10"); err == nil || !strings.Contains(err.Error(), "push100-acct") {
		t.Errorf("an unknown row: %v", err)
	}
}

func TestNiceBounds(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ v, below, above float64 }{
		{0.923, 0.5, 1}, {4.474, 2, 5}, {1, 1, 1}, {0.03, 0.02, 0.05}, {7, 5, 10},
	} {
		if b, a := niceBelow(tc.v), niceAbove(tc.v); math.Abs(b-tc.below) > 1e-12 || math.Abs(a-tc.above) > 1e-12 {
			t.Errorf("%g: %g and %g, want %g and %g", tc.v, b, a, tc.below, tc.above)
		}
	}
}
