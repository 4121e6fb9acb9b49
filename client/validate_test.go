package client

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	pb "github.com/loadreporter/loadreporter/gen/sglang/router/loadmonitor/v1"
)

// rank is a valid rank at dp_rank i, snapshotted now.
func rank(i int32) *pb.RankLoad {
	return &pb.RankLoad{DpRank: i, SnapshotTimeUnixMs: time.Now().UnixMilli(), NumRunningReqs: 3, NumWaitingReqs: 1,
		NumWaitingUncachedTokens: 100, NumUsedTokens: 1000, NumTotalTokens: 1000, MaxTotalNumTokens: 4000,
		MaxRunningRequests: 256, TokenUsage: 0.25, GenThroughput: 120, CacheHitRate: 0.5, Utilization: 0.4}
}

// healthy is a valid HEALTHY report of instance id, sequence seq, n ranks.
func healthy(id string, seq uint64, n int32) *pb.LoadReport {
	r := &pb.LoadReport{SourceInstanceId: id, SequenceId: seq, ReportTimeUnixMs: 1_700_000_000_000,
		Worker: &pb.Worker{WorkerAddr: "w:1"}, Status: pb.ReportStatus_REPORT_STATUS_HEALTHY}
	for i := range n {
		r.Ranks = append(r.Ranks, rank(i))
	}
	return r
}

func unreachable(id string, seq uint64) *pb.LoadReport {
	return &pb.LoadReport{SourceInstanceId: id, SequenceId: seq, Status: pb.ReportStatus_REPORT_STATUS_UNREACHABLE,
		LastError: new("load snapshot pull timed out")}
}

func TestValidateReport(t *testing.T) {
	t.Parallel()
	edit := func(f func(r *pb.LoadReport)) *pb.LoadReport {
		r := healthy("a", 1, 2)
		f(r)
		return r
	}
	cases := []struct {
		name string
		r    *pb.LoadReport
		want RejectReason // "" accepted
	}{
		{"healthy", healthy("a", 1, 2), ""},
		{"stale with ranks", edit(func(r *pb.LoadReport) {
			r.Status = pb.ReportStatus_REPORT_STATUS_STALE
			r.LastError = new("load snapshot stale by 4000 ms")
		}), ""},
		{"unreachable", unreachable("a", 1), ""},
		{"no instance", edit(func(r *pb.LoadReport) { r.SourceInstanceId = "" }), RejectInstance},
		{"instance id at its bound", edit(func(r *pb.LoadReport) { r.SourceInstanceId = strings.Repeat("i", MaxInstanceIDBytes) }), ""},
		{"instance id past its bound", edit(func(r *pb.LoadReport) { r.SourceInstanceId = strings.Repeat("i", MaxInstanceIDBytes+1) }), RejectInstance},
		{"unspecified status", edit(func(r *pb.LoadReport) { r.Status = 0 }), RejectStatus},
		{"unknown status", edit(func(r *pb.LoadReport) { r.Status = 7 }), RejectStatus},
		{"unreachable with ranks", edit(func(r *pb.LoadReport) {
			r.Status, r.LastError = pb.ReportStatus_REPORT_STATUS_UNREACHABLE, new("x")
		}), RejectUnreachableShape},
		{"unreachable without last_error", edit(func(r *pb.LoadReport) {
			r.Status, r.Ranks = pb.ReportStatus_REPORT_STATUS_UNREACHABLE, nil
		}), RejectUnreachableShape},
		{"healthy without ranks", edit(func(r *pb.LoadReport) { r.Ranks = nil }), RejectNoRanks},
		{"stale without ranks", edit(func(r *pb.LoadReport) {
			r.Status, r.Ranks = pb.ReportStatus_REPORT_STATUS_STALE, nil
		}), RejectNoRanks},
		{"duplicate rank", edit(func(r *pb.LoadReport) { r.Ranks[1].DpRank = 0 }), RejectRank},
		{"negative rank", edit(func(r *pb.LoadReport) { r.Ranks[1].DpRank = -1 }), RejectRank},
		{"negative running", edit(func(r *pb.LoadReport) { r.Ranks[0].NumRunningReqs = -1 }), RejectCounter},
		{"negative uncached", edit(func(r *pb.LoadReport) { r.Ranks[0].NumWaitingUncachedTokens = -5 }), RejectCounter},
		{"negative max", edit(func(r *pb.LoadReport) { r.Ranks[0].MaxRunningRequests = -5 }), RejectCounter},
		{"used over max", edit(func(r *pb.LoadReport) { r.Ranks[0].NumUsedTokens = 4001 }), RejectCapacity},
		{"used with max 0", edit(func(r *pb.LoadReport) { r.Ranks[0].MaxTotalNumTokens = 0 }), ""},
		{"running over max", edit(func(r *pb.LoadReport) { r.Ranks[1].NumRunningReqs = 257 }), RejectCapacity},
		{"running with max 0", edit(func(r *pb.LoadReport) { r.Ranks[1].MaxRunningRequests = 0 }), ""},
		{"NaN usage", edit(func(r *pb.LoadReport) { r.Ranks[0].TokenUsage = math.NaN() }), RejectRatio},
		{"Inf throughput", edit(func(r *pb.LoadReport) { r.Ranks[0].GenThroughput = math.Inf(1) }), RejectRatio},
		{"NaN hit rate", edit(func(r *pb.LoadReport) { r.Ranks[0].CacheHitRate = math.NaN() }), RejectRatio},
		{"-Inf utilization", edit(func(r *pb.LoadReport) { r.Ranks[0].Utilization = math.Inf(-1) }), RejectRatio},
		{"usage above 1", edit(func(r *pb.LoadReport) { r.Ranks[0].TokenUsage = 1.01 }), RejectRatio},
		{"usage below 0", edit(func(r *pb.LoadReport) { r.Ranks[0].TokenUsage = -0.01 }), RejectRatio},
		{"usage exactly 1", edit(func(r *pb.LoadReport) { r.Ranks[0].TokenUsage = 1 }), ""},
		{"MaxRanks ranks", healthy("a", 1, MaxRanks), ""},
		{"more than MaxRanks ranks", healthy("a", 1, MaxRanks+1), RejectRank},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := ValidateReport(c.r)
			if c.want == "" {
				if err != nil {
					t.Fatalf("rejected: %v", err)
				}
				return
			}
			var re *ReportError
			if !errors.As(err, &re) || re.Reason != c.want {
				t.Fatalf("got %v, want reason %s", err, c.want)
			}
			if re.Message == "" {
				t.Fatal("a rejection names the field")
			}
		})
	}
}

func TestSequencer(t *testing.T) {
	t.Parallel()
	var s sequencer
	steps := []struct {
		id   string
		seq  uint64
		want bool
	}{
		{"a", 5, true},
		{"a", 6, true},
		{"a", 6, false}, // repeated
		{"a", 4, false}, // out of order
		{"a", 9, true},  // gaps are fine (the worker skips missed ticks)
		{"b", 1, true},  // restarted worker: a new sequence
		{"b", 2, true},
		{"a", 10, true}, // a new instance id replaces the view, whatever it is
		{"a", 3, false},
	}
	for i, st := range steps {
		err := s.accept(&pb.LoadReport{SourceInstanceId: st.id, SequenceId: st.seq})
		if (err == nil) != st.want {
			t.Fatalf("step %d (%s #%d): err %v, want accepted %t", i, st.id, st.seq, err, st.want)
		}
		if err != nil && err.(*ReportError).Reason != RejectSequence {
			t.Fatalf("step %d: reason %v", i, err)
		}
	}
}

func TestRejectReasonsIsACopy(t *testing.T) {
	t.Parallel()
	rs := RejectReasons()
	if len(rs) != numRejectReasons {
		t.Fatalf("%d reasons, want %d", len(rs), numRejectReasons)
	}
	rs[0] = "mutated"
	if RejectReasons()[0] == "mutated" {
		t.Fatal("RejectReasons exposes its array")
	}
	seen := map[RejectReason]bool{}
	for _, r := range RejectReasons() {
		if seen[r] {
			t.Fatalf("reason %s twice", r)
		}
		seen[r] = true
	}
}

// reports are never modified by validation.
func TestValidateReportDoesNotModify(t *testing.T) {
	t.Parallel()
	r := healthy("a", 1, 3)
	before := proto.Clone(r)
	_ = ValidateReport(r)
	if !proto.Equal(r, before) {
		t.Fatal("ValidateReport modified the report")
	}
}
