package rpc

import (
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/loadreporter/loadreporter/domain"
	pb "github.com/loadreporter/loadreporter/gen/sglang/router/loadmonitor/v1"
)

func sampleReport() *domain.Report {
	at := time.UnixMilli(1795940000123).UTC()
	return &domain.Report{
		SourceInstanceID: "inst", SequenceID: 42, ReportTime: at, Status: domain.StatusStale,
		LastError: "load snapshot stale by 4000 ms",
		Worker:    domain.Worker{Addr: "10.0.0.1:30000", Type: domain.WorkerTypeDecode, Model: "llama", Zone: "a"},
		Ranks: []domain.RankLoad{{DPRank: 3, SnapshotTime: at.Add(-4 * time.Second), NumRunningReqs: 5,
			NumWaitingReqs: 1, NumWaitingUncachedTokens: 2, NumUsedTokens: 3, NumTotalTokens: 4, MaxTotalNumTokens: 10,
			MaxRunningRequests: 6, TokenUsage: 0.3, GenThroughput: 7.5, CacheHitRate: 0.25, Utilization: 0.5}},
	}
}

func TestReportRoundTrip(t *testing.T) {
	t.Parallel()
	r := sampleReport()
	back := ReportFromProto(ReportToProto(r))
	if back.SequenceID != r.SequenceID || back.Worker != r.Worker || back.LastError != r.LastError ||
		back.Status != r.Status || !back.ReportTime.Equal(r.ReportTime) || len(back.Ranks) != 1 {
		t.Fatalf("round trip changed the report:\n%+v\n%+v", r, back)
	}
	if got, want := back.Ranks[0], r.Ranks[0]; got.DPRank != want.DPRank || !got.SnapshotTime.Equal(want.SnapshotTime) ||
		got.NumUsedTokens != want.NumUsedTokens || got.Utilization != want.Utilization {
		t.Fatalf("rank %+v, want %+v", got, want)
	}
	healthy := &domain.Report{Status: domain.StatusHealthy}
	if p := ReportToProto(healthy); p.LastError != nil || p.Worker.Model != nil || p.Worker.Zone != nil {
		t.Fatal("empty optional fields must stay absent on the wire")
	}
}

// TestFrameBuiltOncePerReport: every stream of a fire gets the same frame
// (encoded once by fanout's codecs), holding the report as the wire says.
func TestFrameBuiltOncePerReport(t *testing.T) {
	t.Parallel()
	cache := newReportFrames()
	r := sampleReport()
	f := cache.Get(r)
	if cache.Get(r) != f {
		t.Fatal("the same report must reuse its frame")
	}
	want := &pb.WorkerFrame{Payload: &pb.WorkerFrame_Report{Report: ReportToProto(r)}}
	if !proto.Equal(f.Proto(), want) {
		t.Fatalf("frame %v, want %v", f.Proto(), want)
	}
	if cache.Get(sampleReport()) == f {
		t.Fatal("a new report must get a new frame")
	}
}
