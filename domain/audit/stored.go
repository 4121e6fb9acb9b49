package audit

import (
	"cmp"
	"slices"
	"time"

	"github.com/loadreporter/loadreporter/domain"
)

// Stored is a copy of r as every history store keeps it, so that both
// stores answer with the same reports: times in UTC to the microsecond
// (PostgreSQL's precision), a rank without a snapshot time taking the
// report's (docs/routers.md), ranks in dp_rank order, no ranks as nil.
func Stored(r *domain.Report) *domain.Report {
	c := *r
	c.ReportTime = micro(r.ReportTime)
	c.Ranks = nil
	if len(r.Ranks) > 0 {
		c.Ranks = make([]domain.RankLoad, len(r.Ranks))
	}
	for i, k := range r.Ranks {
		if k.SnapshotTime.IsZero() {
			k.SnapshotTime = c.ReportTime
		}
		k.SnapshotTime = micro(k.SnapshotTime)
		c.Ranks[i] = k
	}
	slices.SortFunc(c.Ranks, func(a, b domain.RankLoad) int { return cmp.Compare(a.DPRank, b.DPRank) })
	return &c
}

func micro(t time.Time) time.Time { return t.UTC().Truncate(time.Microsecond) }
