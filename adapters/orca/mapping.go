package orca

import (
	"strconv"

	v3orcapb "github.com/cncf/xds/go/xds/data/orca/v3"

	"github.com/loadreporter/loadreporter/domain"
)

// UtilizationFloor is the least application_utilization a HEALTHY report
// carries: ORCA clients read 0 as "no report" and would keep the worker's
// previous weight, so an idle worker reports 1 % instead.
const UtilizationFloor = 0.01

// Named metrics. Every report carries status and ranks; HEALTHY and STALE
// reports also carry the others, summed over ranks, and per rank as
// "rank.<dp_rank>.<name>".
const (
	MetricStatus        = "status"          // 1 HEALTHY, 2 STALE, 3 UNREACHABLE
	MetricRanks         = "ranks"           // ranks in the report; 0 when UNREACHABLE
	MetricSnapshotAgeMs = "snapshot_age_ms" // oldest rank's age at the pull's end
	MetricRunning       = "running"         // num_running_reqs (summed, or per rank)
	MetricWaiting       = "waiting"         // num_waiting_reqs (summed, or per rank)
	MetricGenThroughput = "gen_throughput"  // tokens/s (summed, or per rank)
	MetricTokenUsage    = "token_usage"     // per rank: KV-cache usage
	MetricCacheHitRate  = "cache_hit_rate"  // per rank
	// UtilizationKVCache is the utilization map's key: the busiest rank's
	// token_usage.
	UtilizationKVCache = "kv_cache"
)

// perRankMetrics is how many named metrics each rank adds.
const perRankMetrics = 5

// loadReport maps one report to ORCA (the table is in the package doc).
// The result is shared by every stream of the fire and must not be
// modified.
func loadReport(r *domain.Report, nominalRPS float64) *v3orcapb.OrcaLoadReport {
	out := &v3orcapb.OrcaLoadReport{
		RpsFractional:          nominalRPS,
		ApplicationUtilization: 1,
		CpuUtilization:         1,
		NamedMetrics:           make(map[string]float64, 6+perRankMetrics*len(r.Ranks)),
	}
	status := r.Status
	if status != domain.StatusHealthy && status != domain.StatusStale {
		// UNREACHABLE (and anything unknown, which nobody should trust):
		// no numbers, every request expected to fail.
		status = domain.StatusUnreachable
		out.Eps = nominalRPS
	}
	out.NamedMetrics[MetricStatus] = float64(status)
	out.NamedMetrics[MetricRanks] = float64(len(r.Ranks))
	if status == domain.StatusUnreachable || len(r.Ranks) == 0 {
		return out
	}
	busiest := rankMetrics(out.NamedMetrics, r)
	out.Utilization = map[string]float64{UtilizationKVCache: min(max(busiest, 0), 1)}
	if status == domain.StatusHealthy {
		out.ApplicationUtilization = max(busiest, UtilizationFloor)
		out.CpuUtilization = out.ApplicationUtilization
	}
	return out
}

// rankMetrics fills m with r's per-rank and summed metrics and returns the
// busiest rank's token_usage. r has at least one rank.
func rankMetrics(m map[string]float64, r *domain.Report) (busiest float64) {
	var running, waiting int64
	var throughput float64
	busiest = r.Ranks[0].TokenUsage
	for _, rk := range r.Ranks {
		prefix := "rank." + strconv.FormatInt(rk.DPRank, 10) + "."
		m[prefix+MetricTokenUsage] = rk.TokenUsage
		m[prefix+MetricRunning] = float64(rk.NumRunningReqs)
		m[prefix+MetricWaiting] = float64(rk.NumWaitingReqs)
		m[prefix+MetricGenThroughput] = rk.GenThroughput
		m[prefix+MetricCacheHitRate] = rk.CacheHitRate
		busiest = max(busiest, rk.TokenUsage)
		running += rk.NumRunningReqs
		waiting += rk.NumWaitingReqs
		throughput += rk.GenThroughput
	}
	m[MetricRunning] = float64(running)
	m[MetricWaiting] = float64(waiting)
	m[MetricGenThroughput] = throughput
	m[MetricSnapshotAgeMs] = float64(r.OldestSnapshotAge().Milliseconds())
	return busiest
}
