package metrics

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/loadreporter/loadreporter/domain"
)

// setByLookup is how rankGauges.set worked before it kept each rank's
// handles: one label lookup per gauge and rank on every fire. It is the
// baseline BenchmarkRankGauges compares with.
func (g *rankGauges) setByLookup(ranks []domain.RankLoad) {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := make(map[string]bool, len(ranks))
	for _, r := range ranks {
		label := strconv.FormatInt(r.DPRank, 10)
		now[label] = true
		for _, x := range g.gauges {
			x.vec.WithLabelValues(label).Set(x.value(r))
		}
	}
}

// BenchmarkRankGauges prints the cost of one fire's rank gauges, kept
// handles against a lookup per gauge and rank, side by side with their
// ratio: go test ./adapters/metrics -run '^$' -bench RankGauges.
func BenchmarkRankGauges(b *testing.B) {
	for _, n := range []int{8, 1024} {
		ranks := make([]domain.RankLoad, n)
		for i := range ranks {
			ranks[i] = domain.RankLoad{DPRank: int64(i), SnapshotTime: time.Unix(100, 0), NumRunningReqs: int64(i), TokenUsage: 0.5}
		}
		b.Run(fmt.Sprintf("ranks=%d", n), func(b *testing.B) {
			lookup, kept := newRankGauges(), newRankGauges()
			var tLookup, tKept time.Duration
			for range b.N { // both side by side, so machine noise hits both
				start := time.Now()
				lookup.setByLookup(ranks)
				mid := time.Now()
				kept.set(ranks)
				tLookup, tKept = tLookup+mid.Sub(start), tKept+time.Since(mid)
			}
			per := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / float64(b.N) / 1000 }
			b.ReportMetric(per(tLookup), "µs/fire-lookup")
			b.ReportMetric(per(tKept), "µs/fire-kept")
			b.ReportMetric(float64(tLookup)/float64(tKept), "×-faster")
		})
	}
}
