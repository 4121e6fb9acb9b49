package orca

import (
	"maps"
	"testing"
	"time"

	v3orcapb "github.com/cncf/xds/go/xds/data/orca/v3"

	"github.com/loadreporter/loadreporter/domain"
)

var t0 = time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)

func rank(n int64, usage float64, running, waiting int64, age time.Duration) domain.RankLoad {
	return domain.RankLoad{
		DPRank: n, SnapshotTime: t0.Add(-age), NumRunningReqs: running, NumWaitingReqs: waiting,
		TokenUsage: usage, GenThroughput: 100 * float64(n+1), CacheHitRate: 0.5,
	}
}

// wrrWeight is grpc-go's weighted_round_robin weight for a report (its
// endpointWeight.OnLoadReport) with the default error penalty of 1; 0 means
// WRR ignores the report.
func wrrWeight(r *v3orcapb.OrcaLoadReport) float64 {
	u := r.GetApplicationUtilization()
	if u == 0 {
		u = r.GetCpuUtilization()
	}
	if u == 0 || r.GetRpsFractional() == 0 {
		return 0
	}
	return r.GetRpsFractional() / (u + r.GetEps()/r.GetRpsFractional())
}

func TestLoadReportHealthySeveralRanks(t *testing.T) {
	t.Parallel()
	r := &domain.Report{SequenceID: 7, ReportTime: t0, Status: domain.StatusHealthy, Ranks: []domain.RankLoad{
		rank(0, 0.25, 3, 1, 0), rank(1, 0.75, 5, 0, 40*time.Millisecond), rank(3, 0.5, 2, 4, 10*time.Millisecond),
	}}
	got := loadReport(r, 1)
	if err := got.Validate(); err != nil {
		t.Fatalf("the report breaks ORCA's own constraints: %v", err)
	}
	if got.ApplicationUtilization != 0.75 || got.CpuUtilization != 0.75 || got.RpsFractional != 1 || got.Eps != 0 {
		t.Fatalf("utilization %v / cpu %v, rps %v, eps %v; want the busiest rank's 0.75, rps 1, eps 0",
			got.ApplicationUtilization, got.CpuUtilization, got.RpsFractional, got.Eps)
	}
	if !maps.Equal(got.Utilization, map[string]float64{"kv_cache": 0.75}) {
		t.Fatalf("utilization map %v", got.Utilization)
	}
	want := map[string]float64{
		"status": 1, "ranks": 3, "snapshot_age_ms": 40, "running": 10, "waiting": 5, "gen_throughput": 100 + 200 + 400,
		"rank.0.token_usage": 0.25, "rank.0.running": 3, "rank.0.waiting": 1, "rank.0.gen_throughput": 100, "rank.0.cache_hit_rate": 0.5,
		"rank.1.token_usage": 0.75, "rank.1.running": 5, "rank.1.waiting": 0, "rank.1.gen_throughput": 200, "rank.1.cache_hit_rate": 0.5,
		"rank.3.token_usage": 0.5, "rank.3.running": 2, "rank.3.waiting": 4, "rank.3.gen_throughput": 400, "rank.3.cache_hit_rate": 0.5,
	}
	if !maps.Equal(got.NamedMetrics, want) {
		t.Fatalf("named metrics\n got %v\nwant %v", got.NamedMetrics, want)
	}
}

func TestLoadReportIdleWorkerKeepsAWeight(t *testing.T) {
	t.Parallel()
	r := &domain.Report{ReportTime: t0, Status: domain.StatusHealthy, Ranks: []domain.RankLoad{rank(0, 0, 0, 0, 0)}}
	got := loadReport(r, 1)
	if got.ApplicationUtilization != UtilizationFloor || got.Utilization["kv_cache"] != 0 || wrrWeight(got) != 100 {
		t.Fatalf("idle worker: utilization %v, kv_cache %v, weight %v; want the floor, 0, 100",
			got.ApplicationUtilization, got.Utilization["kv_cache"], wrrWeight(got))
	}
}

func TestLoadReportStale(t *testing.T) {
	t.Parallel()
	r := &domain.Report{ReportTime: t0, Status: domain.StatusStale, LastError: "load snapshot stale by 5000 ms",
		Ranks: []domain.RankLoad{rank(0, 0.125, 1, 0, 5*time.Second), rank(1, 0.25, 2, 0, 5*time.Second)}}
	got := loadReport(r, 1)
	if err := got.Validate(); err != nil {
		t.Fatal(err)
	}
	if got.ApplicationUtilization != 1 || got.CpuUtilization != 1 || got.Eps != 0 {
		t.Fatalf("utilization %v / cpu %v, eps %v; want a full worker without errors",
			got.ApplicationUtilization, got.CpuUtilization, got.Eps)
	}
	m := got.NamedMetrics
	if m["status"] != 2 || m["ranks"] != 2 || m["snapshot_age_ms"] != 5000 || m["rank.1.token_usage"] != 0.25 ||
		got.Utilization["kv_cache"] != 0.25 {
		t.Fatalf("stale numbers not kept: %v, %v", m, got.Utilization)
	}
}

func TestLoadReportUnreachable(t *testing.T) {
	t.Parallel()
	for _, st := range []domain.Status{domain.StatusUnreachable, domain.StatusUnspecified} {
		r := &domain.Report{ReportTime: t0, Status: st, LastError: "load snapshot pull timed out"}
		got := loadReport(r, 2)
		if err := got.Validate(); err != nil {
			t.Fatal(err)
		}
		if got.ApplicationUtilization != 1 || got.CpuUtilization != 1 || got.RpsFractional != 2 || got.Eps != 2 ||
			got.Utilization != nil || !maps.Equal(got.NamedMetrics, map[string]float64{"status": 3, "ranks": 0}) {
			t.Fatalf("%v: got %v", st, got)
		}
	}
}

// TestLoadReportSteersWRR: under grpc-go's WRR formula an idle worker
// outweighs a loaded one, a loaded one a full one, a full one a STALE one
// (equal), and any of them an UNREACHABLE one.
func TestLoadReportSteersWRR(t *testing.T) {
	t.Parallel()
	healthy := func(u float64) *domain.Report {
		return &domain.Report{ReportTime: t0, Status: domain.StatusHealthy, Ranks: []domain.RankLoad{rank(0, u, 1, 0, 0)}}
	}
	weights := []float64{
		wrrWeight(loadReport(healthy(0.1), 1)),
		wrrWeight(loadReport(healthy(0.5), 1)),
		wrrWeight(loadReport(healthy(1), 1)),
		wrrWeight(loadReport(&domain.Report{ReportTime: t0, Status: domain.StatusStale, Ranks: healthy(0.1).Ranks}, 1)),
		wrrWeight(loadReport(&domain.Report{ReportTime: t0, Status: domain.StatusUnreachable}, 1)),
	}
	want := []float64{10, 2, 1, 1, 0.5}
	for i := range want {
		if d := weights[i] - want[i]; d > 1e-9 || d < -1e-9 {
			t.Fatalf("WRR weights %v, want %v (healthy 0.1, 0.5, 1, stale, unreachable)", weights, want)
		}
	}
}
