package memory

import (
	"context"
	"math"
	"slices"
	"sort"

	"github.com/loadreporter/loadreporter/domain"
	"github.com/loadreporter/loadreporter/domain/audit"
)

// Reports returns one page of reports. See ports.HistoryQuery.
func (s *Store) Reports(ctx context.Context, q audit.ReportsQuery) (audit.ReportsPage, error) {
	if err := q.Validate(); err != nil {
		return audit.ReportsPage{}, err
	}
	if err := ctx.Err(); err != nil {
		return audit.ReportsPage{}, err
	}
	after, hasAfter, _ := q.After()
	size := q.PageSize()
	workers, statuses, ranks := set(q.Workers), set(q.Statuses), set(q.Ranks)

	s.mu.RLock()
	defer s.mu.RUnlock()
	in := s.window(q.Window)
	var out []*domain.Report
	take := func(r *domain.Report) bool {
		if len(workers) > 0 && !workers[r.Worker.Addr] || len(statuses) > 0 && !statuses[r.Status] {
			return true
		}
		out = append(out, r)
		return len(out) <= size
	}
	if q.Descending {
		i := len(in)
		if hasAfter {
			i = sort.Search(len(in), func(i int) bool { return audit.KeyOf(in[i]).Compare(after) >= 0 })
		}
		for i--; i >= 0 && take(in[i]); i-- {
		}
	} else {
		i := 0
		if hasAfter {
			i = sort.Search(len(in), func(i int) bool { return audit.KeyOf(in[i]).Compare(after) > 0 })
		}
		for ; i < len(in) && take(in[i]); i++ {
		}
	}
	var page audit.ReportsPage
	if len(out) > size {
		out = out[:size]
		page.NextCursor = audit.KeyOf(out[size-1]).Cursor(q.Descending)
	}
	for i, r := range out {
		out[i] = clone(r, ranks)
	}
	page.Reports = out
	return page, nil
}

// clone copies r for a caller, keeping only the ranks in keep (all when
// keep is empty).
func clone(r *domain.Report, keep map[int64]bool) *domain.Report {
	c := *r
	c.Ranks = nil
	for _, k := range r.Ranks {
		if len(keep) == 0 || keep[k.DPRank] {
			c.Ranks = append(c.Ranks, k)
		}
	}
	return &c
}

// ofWorkers keeps the reports of workers (all when workers is empty).
func ofWorkers(reports []*domain.Report, workers []string) []*domain.Report {
	if len(workers) == 0 {
		return reports
	}
	keep := set(workers)
	var out []*domain.Report
	for _, r := range reports {
		if keep[r.Worker.Addr] {
			out = append(out, r)
		}
	}
	return out
}

func set[T comparable](vs []T) map[T]bool {
	m := make(map[T]bool, len(vs))
	for _, v := range vs {
		m[v] = true
	}
	return m
}

// Outages returns the maximal runs of non-HEALTHY reports. See
// ports.HistoryQuery.
func (s *Store) Outages(ctx context.Context, q audit.OutagesQuery) (audit.OutagesResult, error) {
	if err := q.Validate(); err != nil {
		return audit.OutagesResult{}, err
	}
	if err := ctx.Err(); err != nil {
		return audit.OutagesResult{}, err
	}
	var res audit.OutagesResult
	s.mu.RLock()
	for _, rn := range audit.Runs(ofWorkers(s.window(q.Window), q.Workers), audit.Unhealthy) {
		run := rn.Reports
		o := audit.Outage{Episode: rn.Episode()}
		seen := map[domain.Status]bool{}
		for _, r := range run {
			if !seen[r.Status] {
				seen[r.Status] = true
				o.Statuses = append(o.Statuses, r.Status)
			}
			if r.LastError != "" {
				o.LastError = r.LastError
			}
		}
		slices.Sort(o.Statuses)
		res.Outages = append(res.Outages, o)
	}
	s.mu.RUnlock()
	res.Finish(q.MaxResults())
	return res, nil
}

// RankStats returns per-rank statistics. See ports.HistoryQuery.
func (s *Store) RankStats(ctx context.Context, q audit.RankStatsQuery) (audit.RankStatsResult, error) {
	if err := q.Validate(); err != nil {
		return audit.RankStatsResult{}, err
	}
	if err := ctx.Err(); err != nil {
		return audit.RankStatsResult{}, err
	}
	type key struct {
		worker string
		rank   int64
	}
	type acc struct {
		usage      []float64
		sum, gen   float64
		maxUsage   float64
		maxWaiting int64
	}
	workers, ranks := set(q.Workers), set(q.Ranks)
	accs := map[key]*acc{}
	s.mu.RLock()
	for _, r := range s.window(q.Window) {
		if len(workers) > 0 && !workers[r.Worker.Addr] {
			continue
		}
		for _, k := range r.Ranks {
			if len(ranks) > 0 && !ranks[k.DPRank] {
				continue
			}
			kk := key{r.Worker.Addr, k.DPRank}
			a := accs[kk]
			if a == nil {
				a = &acc{maxUsage: math.Inf(-1), maxWaiting: math.MinInt64}
				accs[kk] = a
			}
			a.usage = append(a.usage, k.TokenUsage)
			a.sum += k.TokenUsage
			a.gen += k.GenThroughput
			a.maxUsage = max(a.maxUsage, k.TokenUsage)
			a.maxWaiting = max(a.maxWaiting, k.NumWaitingReqs)
		}
	}
	s.mu.RUnlock()
	var res audit.RankStatsResult
	for k, a := range accs {
		n := float64(len(a.usage))
		res.Stats = append(res.Stats, audit.RankStat{
			WorkerAddr: k.worker, DPRank: k.rank, Reports: int64(len(a.usage)),
			AvgTokenUsage: a.sum / n, MaxTokenUsage: a.maxUsage, P95TokenUsage: audit.Percentile(a.usage, 0.95),
			MaxWaitingReqs: a.maxWaiting, MeanGenThroughput: a.gen / n,
		})
	}
	res.Finish(q.MaxResults())
	return res, nil
}

// Gaps returns recording gaps and restarts. See ports.HistoryQuery.
func (s *Store) Gaps(ctx context.Context, q audit.GapsQuery) (audit.GapsResult, error) {
	if err := q.Validate(); err != nil {
		return audit.GapsResult{}, err
	}
	if err := ctx.Err(); err != nil {
		return audit.GapsResult{}, err
	}
	workers := set(q.Workers)
	threshold := 2 * q.Interval
	prev := map[string]*domain.Report{}
	var res audit.GapsResult
	s.mu.RLock()
	for _, r := range s.window(q.Window) {
		w := r.Worker.Addr
		if len(workers) > 0 && !workers[w] {
			continue
		}
		if p := prev[w]; p != nil {
			if d := r.ReportTime.Sub(p.ReportTime); d > threshold {
				res.Gaps = append(res.Gaps, audit.Gap{Span: audit.Span{WorkerAddr: w, Start: p.ReportTime, End: r.ReportTime, Duration: d}})
			}
			if p.SourceInstanceID != r.SourceInstanceID {
				res.Restarts = append(res.Restarts, audit.Restart{
					WorkerAddr: w, SourceInstanceID: r.SourceInstanceID, FirstTime: r.ReportTime,
					PreviousSourceInstanceID: p.SourceInstanceID, PreviousLastTime: p.ReportTime,
				})
			}
		}
		prev[w] = r
	}
	s.mu.RUnlock()
	res.Finish(q.MaxResults())
	return res, nil
}

// Imbalance returns runs of reports whose token_usage spread exceeds the
// threshold. See ports.HistoryQuery.
func (s *Store) Imbalance(ctx context.Context, q audit.ImbalanceQuery) (audit.ImbalanceResult, error) {
	if err := q.Validate(); err != nil {
		return audit.ImbalanceResult{}, err
	}
	if err := ctx.Err(); err != nil {
		return audit.ImbalanceResult{}, err
	}
	var res audit.ImbalanceResult
	s.mu.RLock()
	hot := func(r *domain.Report) bool { return audit.Spread(r) > q.Threshold }
	for _, rn := range audit.Runs(ofWorkers(s.window(q.Window), q.Workers), hot) {
		run := rn.Reports
		sp := audit.Imbalance{Episode: rn.Episode(), PeakSpread: math.Inf(-1)}
		for _, r := range run {
			if v := audit.Spread(r); v > sp.PeakSpread {
				sp.PeakSpread, sp.PeakTime = v, r.ReportTime
			}
		}
		res.Spans = append(res.Spans, sp)
	}
	s.mu.RUnlock()
	res.Finish(q.MaxResults())
	return res, nil
}

// Chart summarises the reports of a window in buckets, for the history
// page's charts. See audit.ChartQuery.
func (s *Store) Chart(ctx context.Context, q audit.ChartQuery) (audit.ChartResult, error) {
	if err := q.Validate(); err != nil {
		return audit.ChartResult{}, err
	}
	if err := ctx.Err(); err != nil {
		return audit.ChartResult{}, err
	}
	b := audit.NewChartBuilder(q)
	s.mu.RLock()
	defer s.mu.RUnlock()
	// The budget counts the whole minutes that hold the window, the last
	// one too (as PostgreSQL's rollups do); Report keeps only the window.
	reports := ofWorkers(s.window(q.Minutes()), q.Workers)
	through := audit.ChartThrough(q, reports)
	for _, r := range reports {
		if !through.IsZero() && !r.ReportTime.Before(through) {
			break
		}
		b.Report(r.ReportTime, r.Ranks)
	}
	return b.Result(through), nil
}
