package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/loadreporter/loadreporter/cmd/loadreporter/internal/routerflags"
	"github.com/loadreporter/loadreporter/cmd/loadreporter/internal/workertest"
	pb "github.com/loadreporter/loadreporter/gen/sglang/router/loadmonitor/v1"
)

// watch prints what the worker granted (its lease, not the one asked,
// and its renew_after_ms), as it did before it went through package
// client.
func TestWatchPrintsTheGrant(t *testing.T) {
	t.Parallel()
	// A lease of its own choosing, as a worker clamping the lease does,
	// and reports until the router stops.
	addr := workertest.Serve(t, &workertest.Reporting{Grant: &pb.RegisterResponse{LeaseTtlMs: 3000, RenewAfterMs: 1000},
		Every: 20 * time.Millisecond, Report: func(seq uint64) *pb.LoadReport {
			now := time.Now().UnixMilli()
			return &pb.LoadReport{SourceInstanceId: "fake", SequenceId: seq, ReportTimeUnixMs: now,
				Status: pb.ReportStatus_REPORT_STATUS_HEALTHY,
				Ranks:  []*pb.RankLoad{{DpRank: 0, SnapshotTimeUnixMs: now, MaxRunningRequests: 8}}}
		}})

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c := WatchConfig{Target: addr, Count: 2,
		Router: routerflags.Router{Interval: 250 * time.Millisecond, Lease: 20 * time.Second, RouterID: "watch-test"}}
	var out bytes.Buffer
	if err := Watch(ctx, c, &out); err != nil {
		t.Fatal(err)
	}
	want := `registered as "watch-test" with ` + c.Target + ": interval 250 ms, lease 3000 ms granted (20000 ms asked), renew after 1000 ms\n"
	if first, _, _ := strings.Cut(out.String(), "#"); first != want {
		t.Fatalf("watch printed\n%s\nwant it to open with\n%s", out.String(), want)
	}
	if n := strings.Count(out.String(), " HEALTHY 1 ranks"); n != 2 {
		t.Fatalf("%d reports printed, want 2:\n%s", n, out.String())
	}
}
