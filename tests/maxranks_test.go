package tests

import (
	"strings"
	"testing"
	"time"

	"github.com/loadreporter/loadreporter/adapters/rpc"
	"github.com/loadreporter/loadreporter/client"
	"github.com/loadreporter/loadreporter/domain"
)

// TestRoutersTakeTheLargestReportAWorkerBuilds: a worker builds reports
// of up to domain.MaxRanks ranks and refuses a --max-dp-size past it; the
// client library, which routers and the fleet view use, takes every one
// of them (a worker at --dp-size 5000 once built reports every router
// refused).
func TestRoutersTakeTheLargestReportAWorkerBuilds(t *testing.T) {
	t.Parallel()
	if client.MaxRanks != domain.MaxRanks {
		t.Fatalf("client.MaxRanks %d, domain.MaxRanks %d: a worker could build reports routers refuse", client.MaxRanks, domain.MaxRanks)
	}
	now := time.Now()
	snap := domain.Snapshot{}
	for i := range domain.MaxRanks {
		snap.Ranks = append(snap.Ranks, domain.RankLoad{DPRank: int64(i), SnapshotTime: now, MaxTotalNumTokens: 100, MaxRunningRequests: 8})
	}
	b := domain.ReportBuilder{SourceInstanceID: "i", StaleAfter: 3 * time.Second, Worker: domain.Worker{Addr: "w:1"}}
	r := b.Build(1, now, snap, nil, domain.RankSet{})
	if r.Status != domain.StatusHealthy {
		t.Fatalf("%d ranks: %v (%s)", domain.MaxRanks, r.Status, r.LastError)
	}
	if err := client.ValidateReport(rpc.ReportToProto(r)); err != nil {
		t.Fatalf("the client refuses the worker's largest report: %v", err)
	}
	if err := checkServe("--max-dp-size", "4097"); err == nil || !strings.Contains(err.Error(), "want 1 to 4096") {
		t.Fatalf("--max-dp-size 4097: %v", err)
	}
}
