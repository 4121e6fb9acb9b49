package domain

import (
	"math"
	"strings"
	"testing"
	"time"
)

func goodRank(rank int64) RankLoad {
	return RankLoad{
		DPRank: rank, NumRunningReqs: 10, NumWaitingReqs: 2, NumWaitingUncachedTokens: 300,
		NumUsedTokens: 5000, NumTotalTokens: 5300, MaxTotalNumTokens: 10000, MaxRunningRequests: 64,
		TokenUsage: 0.5, GenThroughput: 100, CacheHitRate: 0.4, Utilization: 0.15,
	}
}

func snapshotOf(ranks ...RankLoad) Snapshot { return Snapshot{Ranks: ranks} }

func TestValidateSnapshot(t *testing.T) {
	t.Parallel()
	mod := func(f func(*RankLoad)) Snapshot {
		r := goodRank(1)
		f(&r)
		return snapshotOf(goodRank(0), r)
	}
	cases := []struct {
		name     string
		snap     Snapshot
		expected RankSet
		wantCode string
		wantText string
	}{
		{"valid", snapshotOf(goodRank(0), goodRank(1)), RankRange(2), "", ""},
		{"valid, set not known yet", snapshotOf(goodRank(5)), RankSet{}, "", ""},
		{"no ranks", Snapshot{}, RankRange(2), CodeInvalidSnapshot, "snapshot has no ranks"},
		{"negative rank", mod(func(r *RankLoad) { r.DPRank = -1 }), RankSet{}, CodeInvalidSnapshot, "dp_rank -1 is outside"},
		{"rank beyond int32", mod(func(r *RankLoad) { r.DPRank = math.MaxInt32 + 1 }), RankSet{}, CodeInvalidSnapshot, "dp_rank 2147483648 is outside"},
		{"rank at int32 max", snapshotOf(func() RankLoad { r := goodRank(0); r.DPRank = math.MaxInt32; return r }()), RankSet{}, "", ""},
		{"negative running", mod(func(r *RankLoad) { r.NumRunningReqs = -1 }), RankRange(2), CodeInvalidSnapshot, "rank 1: num_running_reqs is negative (-1)"},
		{"negative waiting", mod(func(r *RankLoad) { r.NumWaitingReqs = -3 }), RankRange(2), CodeInvalidSnapshot, "rank 1: num_waiting_reqs is negative"},
		{"negative uncached", mod(func(r *RankLoad) { r.NumWaitingUncachedTokens = -1 }), RankRange(2), CodeInvalidSnapshot, "num_waiting_uncached_tokens is negative"},
		{"negative used", mod(func(r *RankLoad) { r.NumUsedTokens = -1 }), RankRange(2), CodeInvalidSnapshot, "num_used_tokens is negative"},
		{"negative total", mod(func(r *RankLoad) { r.NumTotalTokens = -1 }), RankRange(2), CodeInvalidSnapshot, "num_total_tokens is negative"},
		{"negative max total", mod(func(r *RankLoad) { r.MaxTotalNumTokens = -1; r.NumUsedTokens = -2 }), RankRange(2), CodeInvalidSnapshot, "num_used_tokens is negative"},
		{"negative max running", mod(func(r *RankLoad) { r.MaxRunningRequests = -1 }), RankRange(2), CodeInvalidSnapshot, "max_running_requests is negative"},
		{"used over max", mod(func(r *RankLoad) { r.NumUsedTokens = 10001 }), RankRange(2), CodeInvalidSnapshot, "rank 1: num_used_tokens 10001 exceeds max_total_num_tokens 10000"},
		{"used at max", mod(func(r *RankLoad) { r.NumUsedTokens = 10000 }), RankRange(2), "", ""},
		{"running over max", mod(func(r *RankLoad) { r.NumRunningReqs = 65 }), RankRange(2), CodeInvalidSnapshot, "rank 1: num_running_reqs 65 exceeds max_running_requests 64"},
		{"NaN usage", mod(func(r *RankLoad) { r.TokenUsage = math.NaN() }), RankRange(2), CodeInvalidSnapshot, "rank 1: token_usage is not finite"},
		{"Inf throughput", mod(func(r *RankLoad) { r.GenThroughput = math.Inf(1) }), RankRange(2), CodeInvalidSnapshot, "gen_throughput is not finite"},
		{"-Inf hit rate", mod(func(r *RankLoad) { r.CacheHitRate = math.Inf(-1) }), RankRange(2), CodeInvalidSnapshot, "cache_hit_rate is not finite"},
		{"NaN utilization", mod(func(r *RankLoad) { r.Utilization = math.NaN() }), RankRange(2), CodeInvalidSnapshot, "utilization is not finite"},
		{"duplicate rank", snapshotOf(goodRank(0), goodRank(0)), RankRange(1), CodeInvalidSnapshot, "rank 0 appears more than once"},
		{"missing rank", snapshotOf(goodRank(0), goodRank(1)), RankRange(4), CodeRankSetChanged, "rank set changed: missing [2 3]"},
		{"unexpected rank", snapshotOf(goodRank(0), goodRank(1), goodRank(7)), RankRange(2), CodeRankSetChanged, "rank set changed: unexpected [7]"},
		{"both", snapshotOf(goodRank(0), goodRank(9)), RankRange(2), CodeRankSetChanged, "rank set changed: missing [1], unexpected [9]"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := ValidateSnapshot(c.snap, c.expected)
			if got := ErrorCode(err); got != c.wantCode {
				t.Fatalf("code = %q (%v), want %q", got, err, c.wantCode)
			}
			if c.wantText != "" && !strings.Contains(ErrorMessage(err), c.wantText) {
				t.Fatalf("message = %q, want it to contain %q", ErrorMessage(err), c.wantText)
			}
		})
	}
}

func TestBuildStatus(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 11, 29, 8, 0, 0, 0, time.UTC)
	b := ReportBuilder{SourceInstanceID: "inst", Worker: Worker{Addr: "w:1", Type: WorkerTypeRegular}, StaleAfter: 3 * time.Second}
	at := func(age time.Duration, rank int64) RankLoad {
		r := goodRank(rank)
		r.SnapshotTime = t0.Add(-age)
		return r
	}

	t.Run("healthy at exactly stale_after", func(t *testing.T) {
		r := b.Build(7, t0, snapshotOf(at(time.Second, 1), at(3*time.Second, 0)), nil, RankRange(2))
		if r.Status != StatusHealthy || r.LastError != "" {
			t.Fatalf("status %v %q, want HEALTHY with no error", r.Status, r.LastError)
		}
		if r.SequenceID != 7 || r.SourceInstanceID != "inst" || !r.ReportTime.Equal(t0) || r.Worker.Addr != "w:1" {
			t.Fatalf("identity not carried: %+v", r)
		}
		if len(r.Ranks) != 2 || r.Ranks[0].DPRank != 0 || r.Ranks[1].DPRank != 1 {
			t.Fatalf("ranks not sorted: %+v", r.Ranks)
		}
	})
	t.Run("judged in the wire's milliseconds", func(t *testing.T) {
		// report_time and snapshot_time each go out in whole
		// milliseconds; the status is what a router computes from them.
		for _, tc := range []struct {
			completed, snapshot time.Duration // after t0
			want                Status
		}{
			{3*time.Second + 999*time.Microsecond, 0, StatusHealthy},                        // 3000 ms on the wire
			{3*time.Second + 1100*time.Microsecond, 900 * time.Microsecond, StatusStale},    // 3001 − 0: 3001 ms
			{3*time.Second + 1100*time.Microsecond, 1100 * time.Microsecond, StatusHealthy}, // 3001 − 1
		} {
			rk := goodRank(0)
			rk.SnapshotTime = t0.Add(tc.snapshot)
			r := b.Build(7, t0.Add(tc.completed), snapshotOf(rk), nil, RankRange(1))
			wire := r.ReportTime.UnixMilli() - r.Ranks[0].SnapshotTime.UnixMilli()
			if r.Status != tc.want {
				t.Errorf("completed +%s, snapshot +%s (%d ms on the wire): %v, want %v", tc.completed, tc.snapshot, wire, r.Status, tc.want)
			}
		}
	})
	t.Run("stale one millisecond past", func(t *testing.T) {
		r := b.Build(8, t0, snapshotOf(at(0, 0), at(3*time.Second+time.Millisecond, 1)), nil, RankRange(2))
		if r.Status != StatusStale {
			t.Fatalf("status %v, want STALE", r.Status)
		}
		if r.LastError != "load snapshot stale by 3001 ms" {
			t.Fatalf("last_error %q", r.LastError)
		}
		if len(r.Ranks) != 2 {
			t.Fatalf("STALE must keep ranks, got %d", len(r.Ranks))
		}
	})
	t.Run("missing timestamp takes completion time", func(t *testing.T) {
		r0 := goodRank(0) // zero SnapshotTime
		r1 := goodRank(1)
		r1.SnapshotTime = time.UnixMilli(0)
		r := b.Build(1, t0, snapshotOf(r1, r0), nil, RankRange(2))
		if r.Status != StatusHealthy {
			t.Fatalf("status %v (%s)", r.Status, r.LastError)
		}
		for _, rk := range r.Ranks {
			if !rk.SnapshotTime.Equal(t0) {
				t.Fatalf("rank %d time %v, want %v", rk.DPRank, rk.SnapshotTime, t0)
			}
		}
	})
	t.Run("pull error is unreachable without ranks", func(t *testing.T) {
		r := b.Build(9, t0, snapshotOf(at(0, 0), at(0, 1)), Errorf(CodeSourceFailed, "GET /v1/loads: HTTP 500"), RankRange(2))
		if r.Status != StatusUnreachable || len(r.Ranks) != 0 || r.LastError != "GET /v1/loads: HTTP 500" {
			t.Fatalf("got %v %q %d ranks", r.Status, r.LastError, len(r.Ranks))
		}
	})
	t.Run("invalid data is unreachable without ranks", func(t *testing.T) {
		bad := at(0, 1)
		bad.NumUsedTokens = bad.MaxTotalNumTokens + 1
		r := b.Build(10, t0, snapshotOf(at(0, 0), bad), nil, RankRange(2))
		if r.Status != StatusUnreachable || len(r.Ranks) != 0 || !strings.Contains(r.LastError, "rank 1: num_used_tokens") {
			t.Fatalf("got %v %q %d ranks", r.Status, r.LastError, len(r.Ranks))
		}
	})
	t.Run("plain error text is kept", func(t *testing.T) {
		r := b.Build(11, t0, Snapshot{}, errString("dial tcp 127.0.0.1:1: connection refused"), RankSet{})
		if r.LastError != "dial tcp 127.0.0.1:1: connection refused" {
			t.Fatalf("last_error %q", r.LastError)
		}
	})
	t.Run("builder does not alias the snapshot", func(t *testing.T) {
		snap := snapshotOf(at(0, 1), at(0, 0))
		r := b.Build(12, t0, snap, nil, RankRange(2))
		snap.Ranks[0].NumRunningReqs = 63
		if r.Ranks[1].NumRunningReqs != 10 {
			t.Fatal("report shares memory with the snapshot")
		}
	})
}

type errString string

func (e errString) Error() string { return string(e) }

func TestRankSetDiff(t *testing.T) {
	t.Parallel()
	missing, extra := NewRankSet(0, 1, 2, 3).Diff(NewRankSet(3, 1, 5, 1))
	if formatRanks(missing) != "[0 2]" || formatRanks(extra) != "[5]" {
		t.Fatalf("missing %v extra %v", missing, extra)
	}
	if !RankRange(3).Equal(NewRankSet(2, 0, 1)) || RankRange(0).Len() != 0 || !RankRange(-1).Empty() {
		t.Fatal("RankRange")
	}
}

func TestErrorCode(t *testing.T) {
	t.Parallel()
	if ErrorCode(nil) != "" || ErrorCode(errString("x")) != CodeInternal || ErrorMessage(errString("secret")) != "internal error" {
		t.Fatal("non-domain errors must map to INTERNAL with a generic message")
	}
	e := Errorf(CodeReplaced, "by %s", "r2")
	if ErrorCode(e) != CodeReplaced || ErrorMessage(e) != "by r2" || e.Error() != "REPLACED: by r2" {
		t.Fatalf("%v", e)
	}
}

func TestRankSetChangeIsBounded(t *testing.T) {
	t.Parallel()
	err := CheckRankSet(RankRange(50000), RankRange(2))
	want := "rank set changed: missing [2 3 4 5 6 7 8 9 … and 49990 more]"
	if ErrorMessage(err) != want {
		t.Fatalf("got %q, want %q", ErrorMessage(err), want)
	}
}

func TestLastErrorIsOneBoundedLine(t *testing.T) {
	t.Parallel()
	b := ReportBuilder{SourceInstanceID: "i", Worker: Worker{Addr: "w"}}
	long := Errorf(CodeSourceFailed, "%s\nsecond line", strings.Repeat("x", 5000))
	r := b.Report(1, time.Unix(100, 0), Snapshot{}, long)
	if len(r.LastError) > MaxLastErrorBytes || !strings.HasSuffix(r.LastError, "…") || strings.Contains(r.LastError, "\n") || r.Status != StatusUnreachable {
		t.Fatalf("last_error of %d bytes (at most %d, the cut marked): %.80q…", len(r.LastError), MaxLastErrorBytes, r.LastError)
	}
	// An error that says nothing still gives UNREACHABLE a reason.
	for _, empty := range []error{Errorf(CodeSourceFailed, "%s", ""), Errorf(CodeSourceFailed, "%s", strings.Repeat("\n", 100))} {
		if r := b.Report(1, time.Unix(100, 0), Snapshot{}, empty); r.LastError == "" {
			t.Errorf("an empty error gave last_error %q", r.LastError)
		}
	}
}

// TestARankFromTheFutureIsRefused: a rank stamped later than the pull's
// completion by more than stale_after would look fresh for as long as the
// engine's clock runs ahead (or for a millennium, given a garbage stamp);
// within the bound, a skew is taken as it is.
func TestARankFromTheFutureIsRefused(t *testing.T) {
	t.Parallel()
	b := ReportBuilder{SourceInstanceID: "i", StaleAfter: 3 * time.Second}
	done := time.Unix(1000, 0)
	snap := func(ahead time.Duration) Snapshot {
		return Snapshot{Ranks: []RankLoad{
			{DPRank: 0, SnapshotTime: done, MaxTotalNumTokens: 10, MaxRunningRequests: 10},
			{DPRank: 1, SnapshotTime: done.Add(ahead), MaxTotalNumTokens: 10, MaxRunningRequests: 10},
		}}
	}
	if r := b.Build(1, done, snap(3*time.Second), nil, RankRange(2)); r.Status != StatusHealthy {
		t.Errorf("3 s ahead, stale_after 3 s: %v %q, want HEALTHY", r.Status, r.LastError)
	}
	r := b.Build(2, done, snap(time.Hour), nil, RankRange(2))
	if r.Status != StatusUnreachable || len(r.Ranks) != 0 ||
		r.LastError != "rank 1: its snapshot time is 1h0m0s ahead of the reporter's clock (more than 3s): the engine's clock is off" {
		t.Errorf("an hour ahead: %v %q", r.Status, r.LastError)
	}
	// Year 5138 is past what a Duration holds: the date, not 292 years.
	far := Snapshot{Ranks: []RankLoad{{DPRank: 0, SnapshotTime: time.Unix(99999999999, 0), MaxTotalNumTokens: 10, MaxRunningRequests: 10}}}
	if r := b.Build(3, done, far, nil, RankRange(1)); !strings.Contains(r.LastError, "is centuries (5138-11-16T09:46:39Z) ahead") {
		t.Errorf("year 5138: %q", r.LastError)
	}
	b.StaleAfter = 0
	if err := b.Verdict(snap(1500*time.Millisecond), nil, RankRange(2), done); ErrorCode(err) != CodeInvalidSnapshot {
		t.Errorf("1.5 s ahead with no stale_after: %v, want refused past the 1 s floor", err)
	}
}

// TestSnapshotOfMoreRanksThanAReportHolds: an engine (or a learned rank
// set) past MaxRanks is UNREACHABLE, naming the count, instead of a
// report every router refuses.
func TestSnapshotOfMoreRanksThanAReportHolds(t *testing.T) {
	t.Parallel()
	ranks := make([]RankLoad, MaxRanks+1)
	for i := range ranks {
		ranks[i] = goodRank(int64(i))
	}
	err := ValidateSnapshot(snapshotOf(ranks...), RankSet{})
	if err == nil || !strings.Contains(ErrorMessage(err), "4097 ranks, more than the 4096") {
		t.Fatalf("err = %v", err)
	}
	if err := ValidateSnapshot(snapshotOf(ranks[:MaxRanks]...), RankSet{}); err != nil {
		t.Fatalf("MaxRanks ranks: %v", err)
	}
}
