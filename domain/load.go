package domain

import (
	"time"
)

// RankLoad is one data-parallel rank's load as the engine published it.
//
// DPRank is wider than the wire's int32 so that an engine's out-of-range rank
// can be seen and rejected by ValidateSnapshot instead of silently wrapping.
type RankLoad struct {
	DPRank int64
	// SnapshotTime is when the engine took this rank's numbers; zero when the
	// engine did not say (the builder then uses the pull-completion time).
	SnapshotTime time.Time

	NumRunningReqs           int64
	NumWaitingReqs           int64
	NumWaitingUncachedTokens int64
	NumUsedTokens            int64
	NumTotalTokens           int64
	MaxTotalNumTokens        int64
	MaxRunningRequests       int64

	TokenUsage    float64
	GenThroughput float64
	CacheHitRate  float64
	Utilization   float64
}

// Snapshot is what one pull from a snapshot source returned.
type Snapshot struct {
	Ranks []RankLoad
}

// RankSet returns the set of ranks a snapshot carries (duplicates collapse).
func (s Snapshot) RankSet() RankSet {
	ranks := make([]int64, len(s.Ranks))
	for i, r := range s.Ranks {
		ranks[i] = r.DPRank
	}
	return NewRankSet(ranks...)
}
