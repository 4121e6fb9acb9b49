package metrics

import (
	"strconv"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/loadreporter/loadreporter/domain"
)

// rankGauges re-export the latest report's per-rank load, so a fleet's
// Prometheus sees engine load through the reporter without scraping the
// engine too. Only the ranks of the latest report have series: a rank that
// left the topology, and every rank while the report is UNREACHABLE, has
// none (an old value would be read as current load).
type rankGauges struct {
	mu     sync.Mutex
	shown  map[int64][]prometheus.Gauge // per dp_rank with series: one handle per gauge
	gauges []rankGauge
	seen   map[int64]bool // scratch for set: the ranks of the report at hand
}

type rankGauge struct {
	vec   *prometheus.GaugeVec
	value func(domain.RankLoad) float64
}

func newRankGauges() rankGauges {
	g := func(name, help string, value func(domain.RankLoad) float64) rankGauge {
		return rankGauge{
			vec:   prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "loadreporter_rank_" + name, Help: help}, []string{"dp_rank"}),
			value: value,
		}
	}
	return rankGauges{shown: map[int64][]prometheus.Gauge{}, seen: map[int64]bool{}, gauges: []rankGauge{
		g("running_reqs", "Running requests of the rank in the latest report.", func(r domain.RankLoad) float64 { return float64(r.NumRunningReqs) }),
		g("waiting_reqs", "Waiting requests of the rank in the latest report.", func(r domain.RankLoad) float64 { return float64(r.NumWaitingReqs) }),
		g("waiting_uncached_tokens", "Uncached prompt tokens waiting on the rank.", func(r domain.RankLoad) float64 { return float64(r.NumWaitingUncachedTokens) }),
		g("token_usage", "Fraction of the rank's KV cache in use (0..1).", func(r domain.RankLoad) float64 { return r.TokenUsage }),
		g("used_tokens", "KV tokens in use on the rank (0 when the engine does not say).", func(r domain.RankLoad) float64 { return float64(r.NumUsedTokens) }),
		g("max_total_tokens", "KV token capacity of the rank (0 when unknown).", func(r domain.RankLoad) float64 { return float64(r.MaxTotalNumTokens) }),
		g("gen_throughput", "Generated tokens per second on the rank.", func(r domain.RankLoad) float64 { return r.GenThroughput }),
		g("cache_hit_rate", "Prefix cache hit rate of the rank (0..1).", func(r domain.RankLoad) float64 { return r.CacheHitRate }),
		g("utilization", "Utilization of the rank (0..1).", func(r domain.RankLoad) float64 { return r.Utilization }),
	}}
}

func (g *rankGauges) register(r *prometheus.Registry) {
	for _, x := range g.gauges {
		r.MustRegister(x.vec)
	}
}

// set shows ranks and removes the series of every rank not among them. A
// rank's gauges are looked up by label once, when it appears, and kept:
// a fire then costs one Set per gauge and rank, which matters with
// hundreds of ranks and a fire every few milliseconds (--phase-slots).
func (g *rankGauges) set(ranks []domain.RankLoad) {
	g.mu.Lock()
	defer g.mu.Unlock()
	clear(g.seen)
	for _, r := range ranks {
		g.seen[r.DPRank] = true
		handles, ok := g.shown[r.DPRank]
		if !ok {
			label := strconv.FormatInt(r.DPRank, 10)
			handles = make([]prometheus.Gauge, len(g.gauges))
			for i, x := range g.gauges {
				handles[i] = x.vec.WithLabelValues(label)
			}
			g.shown[r.DPRank] = handles
		}
		for i, x := range g.gauges {
			handles[i].Set(x.value(r))
		}
	}
	if len(g.shown) == len(g.seen) {
		return // the same ranks as before (dp_rank is unique in a valid report)
	}
	for rank := range g.shown {
		if !g.seen[rank] {
			label := strconv.FormatInt(rank, 10)
			for _, x := range g.gauges {
				x.vec.DeleteLabelValues(label)
			}
			delete(g.shown, rank)
		}
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
