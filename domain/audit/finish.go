package audit

import (
	"cmp"
	"slices"
)

// Every store lists an answer's rows in the same order and stops at the
// query's limit; these finish an answer a store has computed, so that order
// is written once.

// Finish orders the outages by (Start, WorkerAddr) and keeps the first max.
func (r *OutagesResult) Finish(max int) {
	slices.SortStableFunc(r.Outages, func(a, b Outage) int { return compareSpans(a.Span, b.Span) })
	r.Outages, r.Truncated = limit(r.Outages, max)
}

// Finish orders the rows by (WorkerAddr, DPRank) and keeps the first max.
func (r *RankStatsResult) Finish(max int) {
	slices.SortFunc(r.Stats, func(a, b RankStat) int {
		return cmp.Or(cmp.Compare(a.WorkerAddr, b.WorkerAddr), cmp.Compare(a.DPRank, b.DPRank))
	})
	r.Stats, r.Truncated = limit(r.Stats, max)
}

// Finish orders the gaps by (Start, WorkerAddr) and the restarts by
// (FirstTime, WorkerAddr), and keeps the first max of each.
func (r *GapsResult) Finish(max int) {
	slices.SortStableFunc(r.Gaps, func(a, b Gap) int { return compareSpans(a.Span, b.Span) })
	slices.SortStableFunc(r.Restarts, func(a, b Restart) int {
		return cmp.Or(a.FirstTime.Compare(b.FirstTime), cmp.Compare(a.WorkerAddr, b.WorkerAddr))
	})
	var gaps, restarts bool
	r.Gaps, gaps = limit(r.Gaps, max)
	r.Restarts, restarts = limit(r.Restarts, max)
	r.Truncated = gaps || restarts
}

// Finish orders the spans by (Start, WorkerAddr) and keeps the first max.
func (r *ImbalanceResult) Finish(max int) {
	slices.SortStableFunc(r.Spans, func(a, b Imbalance) int { return compareSpans(a.Span, b.Span) })
	r.Spans, r.Truncated = limit(r.Spans, max)
}

func compareSpans(a, b Span) int {
	return cmp.Or(a.Start.Compare(b.Start), cmp.Compare(a.WorkerAddr, b.WorkerAddr))
}

// limit keeps the first n of s and reports whether it cut any.
func limit[T any](s []T, n int) ([]T, bool) {
	if len(s) > n {
		return s[:n], true
	}
	return s, false
}
