package sglangzmq

import (
	"context"
	"time"

	"github.com/loadreporter/loadreporter/domain"
)

// detailState is what the detail pull has told, guarded by Source.mu.
//
// Load fields (rates, ratios, token counts) are used only while the pull
// that brought them is at most DetailMaxAge old: there is no last-good
// store for load (docs/routers.md), so an engine whose /v1/loads keeps failing
// reports them as 0 rather than as old numbers. Capacities
// (max_running_requests, max_total_num_tokens) are the engine's
// configuration, not load, so the latest value each rank reported is kept
// whatever its age; without them every busy rank would fail
// domain.ValidateSnapshot (running > max_running_requests) as soon as a
// detail pull failed.
type detailState struct {
	at    time.Time                 // completion of the latest successful pull
	ranks map[int64]domain.RankLoad // its ranks, by dp_rank
	caps  map[int64]capacities      // by dp_rank, from every successful pull
}

type capacities struct {
	maxRunning, maxTokens int64
}

// runDetail pulls the detail source every DetailInterval until ctx ends.
// Each pull is bounded by the interval, so a slow engine never stacks pulls.
func (s *Source) runDetail(ctx context.Context) {
	next := s.cfg.Clock.Now()
	for {
		pctx, cancel := context.WithTimeout(ctx, s.cfg.DetailInterval)
		snap, err := s.cfg.Detail.Pull(pctx)
		cancel()
		if ctx.Err() != nil {
			return
		}
		s.storeDetail(snap, err)
		if f := s.cfg.Observer.DetailPull; f != nil {
			f(err)
		}
		next = next.Add(s.cfg.DetailInterval)
		if now := s.cfg.Clock.Now(); next.Before(now) {
			next = now // fell behind: pull now, then keep the new phase
		}
		if !s.wait(ctx, next) {
			return
		}
	}
}

func (s *Source) storeDetail(snap domain.Snapshot, err error) {
	if err != nil {
		return // the previous values age out by themselves
	}
	now := s.cfg.Clock.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	d := &s.detail
	d.at = now
	d.ranks = make(map[int64]domain.RankLoad, len(snap.Ranks))
	if d.caps == nil {
		d.caps = make(map[int64]capacities, len(snap.Ranks))
	}
	for _, r := range snap.Ranks {
		d.ranks[r.DPRank] = r
		d.caps[r.DPRank] = capacities{maxRunning: r.MaxRunningRequests, maxTokens: r.MaxTotalNumTokens}
	}
}

// merge makes r's RankLoad at now: the LoadStat's own values first, the
// detail pull's for what LoadStat did not carry. s.mu is held.
func (s *Source) merge(r *rankState, now time.Time) domain.RankLoad {
	st := r.stat
	rl := domain.RankLoad{
		DPRank:            int64(r.index),
		SnapshotTime:      r.at,
		NumRunningReqs:    st.running,
		NumWaitingReqs:    st.waiting,
		NumUsedTokens:     st.tokens,
		MaxTotalNumTokens: st.maxTokens,
	}
	if st.rank.ok {
		rl.DPRank = st.rank.v
	}
	d := &s.detail
	if det, ok := d.ranks[rl.DPRank]; ok && now.Sub(d.at) <= s.cfg.DetailMaxAge {
		rl.GenThroughput = det.GenThroughput
		rl.CacheHitRate = det.CacheHitRate
		rl.Utilization = det.Utilization
		rl.NumWaitingUncachedTokens = det.NumWaitingUncachedTokens
		rl.NumTotalTokens = det.NumTotalTokens
	}
	caps := d.caps[rl.DPRank]
	rl.MaxRunningRequests = caps.maxRunning
	if rl.MaxRunningRequests == 0 {
		rl.MaxRunningRequests = s.cfg.MaxRunningRequests
	}
	if rl.MaxTotalNumTokens == 0 { // LoadStat's "unknown"
		rl.MaxTotalNumTokens = caps.maxTokens
	}
	// Newer engines append these to LoadStat; they are fresher than the
	// detail pull's.
	if st.uncached.ok {
		rl.NumWaitingUncachedTokens = st.uncached.v
	}
	if st.totalTokens.ok {
		rl.NumTotalTokens = st.totalTokens.v
	}
	if st.maxRunning.ok {
		rl.MaxRunningRequests = st.maxRunning.v
	}
	if rl.MaxTotalNumTokens > 0 {
		rl.TokenUsage = float64(rl.NumUsedTokens) / float64(rl.MaxTotalNumTokens)
	}
	return rl
}
