package audit

import (
	"math"
	"slices"

	"github.com/loadreporter/loadreporter/domain"
)

// Spread is max − min token_usage across r's ranks: 0 with fewer than two
// ranks (an UNREACHABLE report has none).
func Spread(r *domain.Report) float64 {
	if len(r.Ranks) == 0 {
		return 0
	}
	lo, hi := r.Ranks[0].TokenUsage, r.Ranks[0].TokenUsage
	for _, k := range r.Ranks[1:] {
		lo, hi = min(lo, k.TokenUsage), max(hi, k.TokenUsage)
	}
	return hi - lo
}

// Percentile is PostgreSQL's percentile_cont: p (0..1) of values, linearly
// interpolated between the two values around position p·(n−1) in sorted
// order. It sorts values in place; NaN for no values.
func Percentile(values []float64, p float64) float64 {
	if len(values) == 0 {
		return math.NaN()
	}
	slices.Sort(values)
	pos := p * float64(len(values)-1)
	lo := int(math.Floor(pos))
	if lo+1 >= len(values) {
		return values[len(values)-1]
	}
	return values[lo] + (pos-float64(lo))*(values[lo+1]-values[lo])
}

// Run is a maximal run of consecutive reports of one worker for which a
// predicate holds.
type Run struct {
	// Reports are the run's reports, in order; never empty.
	Reports []*domain.Report
	// End is the first report of the worker after the run, for which the
	// predicate does not hold; nil when the run is still going on (no such
	// report among those given).
	End *domain.Report
}

// Runs finds, for each worker, the maximal runs of consecutive reports
// satisfying in. reports must be ordered per worker (by report time, then
// source instance and sequence id); workers may be interleaved. Runs are
// returned in the order they ended, ongoing ones last, in the order they
// started.
func Runs(reports []*domain.Report, in func(*domain.Report) bool) []Run {
	var out []Run
	open := map[string][]*domain.Report{}
	var order []string // workers whose open run started, in start order
	for _, r := range reports {
		w := r.Worker.Addr
		if in(r) {
			if open[w] == nil {
				order = append(order, w)
			}
			open[w] = append(open[w], r)
			continue
		}
		if run := open[w]; run != nil {
			out = append(out, Run{Reports: run, End: r})
			delete(open, w)
		}
	}
	for _, w := range order {
		if run := open[w]; run != nil {
			out = append(out, Run{Reports: run})
			delete(open, w)
		}
	}
	return out
}

// Unhealthy says r counts toward an outage: any status but HEALTHY.
func Unhealthy(r *domain.Report) bool { return r.Status != domain.StatusHealthy }

// Episode returns the span the run covers: from its first report to the
// report that ended it, or, while it goes on, to its last report.
func (r Run) Episode() Episode {
	first, last := r.Reports[0], r.Reports[len(r.Reports)-1]
	e := Episode{
		Span:     Span{WorkerAddr: first.Worker.Addr, Start: first.ReportTime},
		LastSeen: last.ReportTime,
		Reports:  int64(len(r.Reports)),
	}
	if r.End != nil {
		e.End = r.End.ReportTime
		e.Duration = e.End.Sub(e.Start)
	} else {
		e.Ongoing = true
		e.Duration = e.LastSeen.Sub(e.Start)
	}
	return e
}
