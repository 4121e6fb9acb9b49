package domain

import (
	"math"
	"strings"
)

// MaxRanks bounds the ranks of one report, far above any data-parallel
// size: routers refuse a report with more (the client library's MaxRanks
// is the same number), and --max-dp-size stops at it.
const MaxRanks = 4096

// ValidateSnapshot checks a snapshot against docs/routers.md: it has ranks (at
// most MaxRanks), each
// dp_rank fits int32, is not negative and appears once, the seven counters
// are non-negative, used ≤ max_total_num_tokens, running ≤
// max_running_requests, the four ratios are finite, and the rank set equals
// expected (unless expected is empty). The first problem found is returned
// as an *Error naming the rank and the field.
func ValidateSnapshot(s Snapshot, expected RankSet) error {
	if len(s.Ranks) == 0 {
		return Errorf(CodeInvalidSnapshot, "snapshot has no ranks")
	}
	if len(s.Ranks) > MaxRanks {
		return Errorf(CodeInvalidSnapshot, "snapshot has %d ranks, more than the %d a report may hold", len(s.Ranks), MaxRanks)
	}
	seen := make(map[int64]struct{}, len(s.Ranks))
	for _, r := range s.Ranks {
		if err := validateRank(r); err != nil {
			return err
		}
		if _, dup := seen[r.DPRank]; dup {
			return Errorf(CodeInvalidSnapshot, "rank %d appears more than once", r.DPRank)
		}
		seen[r.DPRank] = struct{}{}
	}
	if expected.Empty() {
		return nil
	}
	return CheckRankSet(expected, s.RankSet())
}

// CheckRankSet returns a CodeRankSetChanged error naming the missing and
// unexpected ranks when got differs from expected.
func CheckRankSet(expected, got RankSet) error {
	missing, extra := expected.Diff(got)
	if len(missing) == 0 && len(extra) == 0 {
		return nil
	}
	var parts []string
	if len(missing) > 0 {
		parts = append(parts, "missing "+formatRanks(missing))
	}
	if len(extra) > 0 {
		parts = append(parts, "unexpected "+formatRanks(extra))
	}
	return Errorf(CodeRankSetChanged, "rank set changed: %s", strings.Join(parts, ", "))
}

func validateRank(r RankLoad) error {
	if r.DPRank < 0 || r.DPRank > math.MaxInt32 {
		return Errorf(CodeInvalidSnapshot, "dp_rank %d is outside 0..%d", r.DPRank, math.MaxInt32)
	}
	counters := [...]struct {
		name string
		v    int64
	}{
		{"num_running_reqs", r.NumRunningReqs},
		{"num_waiting_reqs", r.NumWaitingReqs},
		{"num_waiting_uncached_tokens", r.NumWaitingUncachedTokens},
		{"num_used_tokens", r.NumUsedTokens},
		{"num_total_tokens", r.NumTotalTokens},
		{"max_total_num_tokens", r.MaxTotalNumTokens},
		{"max_running_requests", r.MaxRunningRequests},
	}
	for _, c := range counters {
		if c.v < 0 {
			return Errorf(CodeInvalidSnapshot, "rank %d: %s is negative (%d)", r.DPRank, c.name, c.v)
		}
	}
	if r.NumUsedTokens > r.MaxTotalNumTokens {
		return Errorf(CodeInvalidSnapshot, "rank %d: num_used_tokens %d exceeds max_total_num_tokens %d",
			r.DPRank, r.NumUsedTokens, r.MaxTotalNumTokens)
	}
	if r.NumRunningReqs > r.MaxRunningRequests {
		return Errorf(CodeInvalidSnapshot, "rank %d: num_running_reqs %d exceeds max_running_requests %d",
			r.DPRank, r.NumRunningReqs, r.MaxRunningRequests)
	}
	ratios := [...]struct {
		name string
		v    float64
	}{
		{"token_usage", r.TokenUsage},
		{"gen_throughput", r.GenThroughput},
		{"cache_hit_rate", r.CacheHitRate},
		{"utilization", r.Utilization},
	}
	for _, f := range ratios {
		if math.IsNaN(f.v) || math.IsInf(f.v, 0) {
			return Errorf(CodeInvalidSnapshot, "rank %d: %s is not finite (%v)", r.DPRank, f.name, f.v)
		}
	}
	return nil
}
