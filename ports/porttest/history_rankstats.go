package porttest

import (
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/loadreporter/loadreporter/domain"
	"github.com/loadreporter/loadreporter/domain/audit"
)

func describeStat(st audit.RankStat) string {
	return fmt.Sprintf("%s/%d n=%d avg=%.6f max=%.6f p95=%.6f maxwait=%d gen=%.6f", st.WorkerAddr, st.DPRank,
		st.Reports, st.AvgTokenUsage, st.MaxTokenUsage, st.P95TokenUsage, st.MaxWaitingReqs, st.MeanGenThroughput)
}

func testRankStats(t *testing.T, s Store) {
	ctx := ctxFor(t)
	check := func(name string, q audit.RankStatsQuery, want []string) {
		t.Helper()
		res, err := s.RankStats(ctx, q)
		if err != nil {
			t.Fatalf("RankStats(%s): %v", name, err)
		}
		var got []string
		for _, st := range res.Stats {
			got = append(got, describeStat(st))
		}
		equalLines(t, name, got, want)
	}
	// Worker 1 rank 0: usages .5 .5 .375 .875 .75 .375 .125 .125 (p95 at
	// position 6.65 of the sorted values: .75 + .65·.125).
	check("every rank", audit.RankStatsQuery{Window: full}, []string{
		w1 + "/0 n=8 avg=0.453125 max=0.875000 p95=0.831250 maxwait=9 gen=52.500000",
		w1 + "/1 n=8 avg=0.375000 max=0.875000 p95=0.787500 maxwait=1 gen=77.500000",
		w2 + "/0 n=4 avg=0.406250 max=0.750000 p95=0.712500 maxwait=5 gen=25.000000",
		w2 + "/1 n=4 avg=0.375000 max=0.500000 p95=0.500000 maxwait=0 gen=10.000000",
		w2 + "/2 n=4 avg=0.437500 max=0.500000 p95=0.500000 maxwait=0 gen=10.000000",
	})
	check("worker 2, rank 1", audit.RankStatsQuery{Window: full, Workers: []string{w2}, Ranks: []int64{1}}, []string{
		w2 + "/1 n=4 avg=0.375000 max=0.500000 p95=0.500000 maxwait=0 gen=10.000000",
	})
	check("window [1s, 4s)", audit.RankStatsQuery{Window: audit.Window{Since: at(1), Until: at(4)}, Ranks: []int64{0}}, []string{
		w1 + "/0 n=2 avg=0.437500 max=0.500000 p95=0.493750 maxwait=2 gen=50.000000",
		w2 + "/0 n=2 avg=0.187500 max=0.250000 p95=0.243750 maxwait=5 gen=15.000000",
	})
	res, err := s.RankStats(ctx, audit.RankStatsQuery{Window: full, Limit: 3})
	if err != nil {
		t.Fatalf("RankStats(limit 3): %v", err)
	}
	if len(res.Stats) != 3 || !res.Truncated {
		t.Errorf("RankStats(limit 3) = %d rows, truncated=%t; want 3, true", len(res.Stats), res.Truncated)
	}
}

// testRankStatsSlowUsage is rank statistics over usage that changes
// slowly, as a loaded worker's does: a store that summarises minutes may
// find the 95th percentile from a few of them, and must still find it
// exactly (compared to every digit). Rank 0 is a slow wave, rank 70 (ranks
// need not be small) climbs in steps that minutes share at their bounds,
// rank 2 never changes, and windows cut minutes anywhere.
func testRankStatsSlowUsage(t *testing.T, s Store) {
	ctx := ctxFor(t)
	start := time.Date(2026, 3, 5, 6, 0, 0, 0, time.UTC)
	var rs []*domain.Report
	for _, worker := range []string{w1, w3} {
		for i := range 1500 {
			tm := start.Add(time.Duration(i) * time.Second)
			if worker == w3 {
				tm = tm.Add(700 * time.Millisecond)
			}
			r := &domain.Report{SourceInstanceID: "src-" + worker, SequenceID: uint64(i + 1), ReportTime: tm,
				Worker: domain.Worker{Addr: worker}, Status: domain.StatusHealthy}
			for j, u := range []float64{0.5 + 0.4*math.Sin(float64(i)/120), float64(i/45) / 40, 0.25} {
				r.Ranks = append(r.Ranks, domain.RankLoad{DPRank: []int64{0, 70, 2}[j], TokenUsage: u, NumWaitingReqs: int64(i % 5),
					GenThroughput: float64(i % 7), NumTotalTokens: 1024})
			}
			rs = append(rs, r)
		}
	}
	for b := range slices.Chunk(rs, 400) {
		if err := s.Append(ctx, b); err != nil {
			t.Fatalf("Append: %v", err)
		}
	}
	ref := newReference(rs)
	describe := func(st audit.RankStat) string {
		return fmt.Sprintf("%s/%d n=%d avg=%.9f max=%v p95=%v maxwait=%d", st.WorkerAddr, st.DPRank, st.Reports,
			st.AvgTokenUsage, st.MaxTokenUsage, st.P95TokenUsage, st.MaxWaitingReqs)
	}
	at := func(sec float64) time.Time { return start.Add(time.Duration(sec * float64(time.Second))) }
	for _, w := range []audit.Window{
		{Since: at(-60), Until: at(1600)},
		{Since: at(0), Until: at(1440)},
		{Since: at(31.5), Until: at(1417.25)},
		{Since: at(300), Until: at(905.9)},
		{Since: at(600.7), Until: at(659.2)},
	} {
		for _, workers := range [][]string{nil, {w3}} {
			st, err := s.RankStats(ctx, audit.RankStatsQuery{Window: w, Workers: workers, Limit: audit.MaxLimit})
			if err != nil {
				t.Fatalf("RankStats: %v", err)
			}
			equalLines(t, fmt.Sprintf("rank stats [%s, %s) workers %v", ts(w.Since), ts(w.Until), workers),
				describeAll(st.Stats, describe), describeAll(ref.rankStats(w, workers, nil), describe))
		}
	}
}
