package historytest

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/loadreporter/loadreporter/domain"
	"github.com/loadreporter/loadreporter/domain/audit"
	"github.com/loadreporter/loadreporter/ports"
)

// Fake is a ports.HistoryQuery whose answers are its function
// fields. Like a store, it validates each query first, so argument errors
// are the port's own; a nil field fails the query.
type Fake struct {
	ReportsFunc   func(audit.ReportsQuery) (audit.ReportsPage, error)
	OutagesFunc   func(audit.OutagesQuery) (audit.OutagesResult, error)
	RankStatsFunc func(audit.RankStatsQuery) (audit.RankStatsResult, error)
	GapsFunc      func(audit.GapsQuery) (audit.GapsResult, error)
	ImbalanceFunc func(audit.ImbalanceQuery) (audit.ImbalanceResult, error)
	// ChartFunc answers Chart; nil counts the chart from ReportsFunc's
	// pages, as a store counts it from its reports.
	ChartFunc func(audit.ChartQuery) (audit.ChartResult, error)
}

var (
	_ ports.HistoryQuery = (*Fake)(nil)
	_ ports.HistoryChart = (*Fake)(nil)
)

// Reports answers with ReportsFunc.
func (f *Fake) Reports(ctx context.Context, q audit.ReportsQuery) (audit.ReportsPage, error) {
	return answer(ctx, "reports", q, f.ReportsFunc)
}

// Outages answers with OutagesFunc.
func (f *Fake) Outages(ctx context.Context, q audit.OutagesQuery) (audit.OutagesResult, error) {
	return answer(ctx, "outages", q, f.OutagesFunc)
}

// RankStats answers with RankStatsFunc.
func (f *Fake) RankStats(ctx context.Context, q audit.RankStatsQuery) (audit.RankStatsResult, error) {
	return answer(ctx, "rank stats", q, f.RankStatsFunc)
}

// Gaps answers with GapsFunc.
func (f *Fake) Gaps(ctx context.Context, q audit.GapsQuery) (audit.GapsResult, error) {
	return answer(ctx, "gaps", q, f.GapsFunc)
}

// Imbalance answers with ImbalanceFunc.
func (f *Fake) Imbalance(ctx context.Context, q audit.ImbalanceQuery) (audit.ImbalanceResult, error) {
	return answer(ctx, "imbalance", q, f.ImbalanceFunc)
}

// Chart answers with ChartFunc, or counts the window's reports.
func (f *Fake) Chart(ctx context.Context, q audit.ChartQuery) (audit.ChartResult, error) {
	fn := f.ChartFunc
	if fn == nil && f.ReportsFunc != nil {
		fn = func(q audit.ChartQuery) (audit.ChartResult, error) { return f.countChart(ctx, q) }
	}
	return answer(ctx, "chart", q, fn)
}

func (f *Fake) countChart(ctx context.Context, q audit.ChartQuery) (audit.ChartResult, error) {
	b := audit.NewChartBuilder(q)
	for cursor := ""; ; {
		pg, err := f.Reports(ctx, audit.ReportsQuery{Window: q.Window, Workers: q.Workers, Limit: audit.MaxLimit, Cursor: cursor})
		if err != nil {
			return audit.ChartResult{}, err
		}
		for _, r := range pg.Reports {
			b.Report(r.ReportTime, r.Ranks)
		}
		if cursor = pg.NextCursor; cursor == "" {
			return b.Result(time.Time{}), nil
		}
	}
}

func answer[Q interface{ Validate() error }, R any](ctx context.Context, what string, q Q, fn func(Q) (R, error)) (R, error) {
	var zero R
	if err := q.Validate(); err != nil {
		return zero, err
	}
	if err := ctx.Err(); err != nil {
		return zero, err
	}
	if fn == nil {
		return zero, fmt.Errorf("Fake: no answer for %s", what)
	}
	return fn(q)
}

// PageOf answers q from reports, which are in key order, as a store
// does: the window and the filters, the order, one page and its cursor.
func PageOf(reports []*domain.Report, q audit.ReportsQuery) audit.ReportsPage {
	after, hasAfter, _ := q.After() // q is valid
	seq := slices.All(reports)
	if q.Descending {
		seq = slices.Backward(reports)
	}
	var out []*domain.Report
	for _, r := range seq {
		if hasAfter {
			if c := audit.KeyOf(r).Compare(after); q.Descending && c >= 0 || !q.Descending && c <= 0 {
				continue
			}
		}
		if !q.Window.Contains(r.ReportTime) || !Matches(q.Workers, r.Worker.Addr) || !Matches(q.Statuses, r.Status) {
			continue
		}
		c := *r
		c.Ranks = nil
		for _, k := range r.Ranks {
			if Matches(q.Ranks, k.DPRank) {
				c.Ranks = append(c.Ranks, k)
			}
		}
		out = append(out, &c)
	}
	var page audit.ReportsPage
	if size := q.PageSize(); len(out) > size {
		out = out[:size]
		page.NextCursor = audit.KeyOf(out[size-1]).Cursor(q.Descending)
	}
	page.Reports = out
	return page
}

// Matches reports whether v passes a filter: an empty filter passes all.
func Matches[T comparable](filter []T, v T) bool {
	return len(filter) == 0 || slices.Contains(filter, v)
}

// Canned returns the rows of a Canned answer that a query over w and
// workers keeps, in their order, at most limit of them, and whether the
// limit cut some. A row stands for its worker's reports from…to: a window
// holding them all keeps it, one holding none of them drops it, and one
// holding some would change it, so there is no Canned answer for it.
func Canned[T any](rows []T, w audit.Window, workers []string, limit int, cover func(T) (worker string, from, to time.Time)) ([]T, bool, error) {
	var out []T
	for _, r := range rows {
		worker, from, to := cover(r)
		switch {
		case !Matches(workers, worker), to.Before(w.Since), !from.Before(w.Until):
		case w.Contains(from) && w.Contains(to):
			out = append(out, r)
		default:
			return nil, false, fmt.Errorf("Fake: no Canned answer for %s–%s, which cuts a row of %s–%s",
				w.Since.Format(time.RFC3339), w.Until.Format(time.RFC3339), from.Format(time.RFC3339), to.Format(time.RFC3339))
		}
	}
	if len(out) > limit {
		return out[:limit], true, nil
	}
	return out, false, nil
}

// EpisodeCover is what an outage or an imbalance covers: from its first report
// to the one that ended it or, while it goes on, its last.
func EpisodeCover(e audit.Episode) (worker string, from, to time.Time) {
	if e.Ongoing {
		return e.WorkerAddr, e.Start, e.LastSeen
	}
	return e.WorkerAddr, e.Start, e.End
}
