package audit

import (
	"cmp"
	"math"
	"slices"
	"time"

	"github.com/loadreporter/loadreporter/domain"
)

// A chart is a window cut into time buckets, each summarising its
// reports: what the history page draws. Its answer is as small as its
// buckets whatever the window holds, and a store may build it from
// per-minute summaries, so drawing a long window costs the store a
// fraction of reading its reports.

// Limits of a chart.
const (
	// MaxChartBuckets bounds ChartQuery.Buckets.
	MaxChartBuckets = 1000
	// MaxChartReports bounds the reports a chart whose buckets are shorter
	// than a minute counts one by one (MaxCost): about 55 h of one worker
	// at one report a second.
	MaxChartReports = 200_000
	// MaxChartMinutes bounds the (worker, minute) summaries a chart whose
	// buckets are a minute or longer counts (MaxCost): 69 days of one
	// worker, a day of 69 workers.
	MaxChartMinutes = 100_000
)

// ChartQuery asks for the reports of a window summarised in buckets.
type ChartQuery struct {
	Window
	// Workers keeps these worker addresses; empty keeps all. Their ranks
	// are summarised together, by dp_rank.
	Workers []string
	// Buckets is how many buckets the window is cut into, within
	// [1, MaxChartBuckets].
	Buckets int
	// Budget bounds how much of the window the chart counts (MaxCost): 0
	// means the most, MaxChartReports or MaxChartMinutes (ByMinute).
	Budget int64
}

// Validate checks every argument of q.
func (q ChartQuery) Validate() error {
	if err := q.Window.Validate(); err != nil {
		return err
	}
	if err := CheckFilters(q.Workers, nil, nil); err != nil {
		return err
	}
	if q.Buckets < 1 || q.Buckets > MaxChartBuckets {
		return domain.Errorf(domain.CodeInvalidArgument, "buckets must be within [1, %d], got %d", MaxChartBuckets, q.Buckets)
	}
	// A bucket is a time.Duration: at most about 292 years.
	if secs := q.Until.Unix() - q.Since.Unix(); secs/int64(q.Buckets) >= math.MaxInt64/int64(time.Second) {
		return domain.Errorf(domain.CodeInvalidArgument,
			"buckets: %d over %s … %s would each span more than 292 years; ask for more", q.Buckets,
			q.Since.Format(time.RFC3339), q.Until.Format(time.RFC3339))
	}
	if most := q.mostCost(); q.Budget < 0 || q.Budget > most {
		return domain.Errorf(domain.CodeInvalidArgument, "budget must be within [1, %d] (0 means %[1]d) for this window, got %d", most, q.Budget)
	}
	return nil
}

// ByMinute says the buckets are a minute or longer. Their bounds are then
// whole minutes (Bounds), and the chart's budget is counted in minutes.
func (q ChartQuery) ByMinute() bool { return q.step() >= time.Minute }

// Bounds returns the Buckets+1 bounds of the buckets: bucket i holds the
// reports at or after bounds[i] and before bounds[i+1]; bounds[0] is Since
// and the last is Until. The window is cut into equal steps (the last
// bucket also takes the nanoseconds an equal cut leaves over), and when a
// step is a minute or longer the bounds between buckets are rounded down to
// the UTC minute, so that every minute of history lies in one bucket and a
// store may count it from its summary.
func (q ChartQuery) Bounds() []time.Time {
	step, byMinute := q.step(), q.ByMinute()
	b := make([]time.Time, q.Buckets+1)
	b[0], b[q.Buckets] = q.Since, q.Until
	t := q.Since
	for i := 1; i < q.Buckets; i++ {
		t = t.Add(step)
		b[i] = t
		if byMinute {
			b[i] = t.Truncate(time.Minute)
		}
	}
	return b
}

// Minutes is the whole minutes that hold the window: a chart's budget
// counts them whole (MaxCost), the first and the last too.
func (q ChartQuery) Minutes() Window {
	until := q.Until.Truncate(time.Minute)
	if until.Before(q.Until) {
		until = until.Add(time.Minute)
	}
	return Window{Since: q.Since.Truncate(time.Minute), Until: until}
}

// step is (Until − Since) / Buckets, rounded down to the nanosecond,
// computed without a time.Duration for the whole window, which ends at
// about 292 years where a window may span almost 10 000.
func (q ChartQuery) step() time.Duration {
	n := int64(max(q.Buckets, 1))
	secs := q.Until.Unix() - q.Since.Unix()
	nanos := int64(q.Until.Nanosecond() - q.Since.Nanosecond())
	if nanos < 0 {
		secs, nanos = secs-1, nanos+int64(time.Second)
	}
	return time.Duration(secs/n)*time.Second + time.Duration((secs%n*int64(time.Second)+nanos)/n)
}

// MaxCost is how much of its window a chart counts: Budget, or by default
// MaxChartMinutes (worker, minute) pairs when ByMinute, else
// MaxChartReports reports. The minutes that hold reports of the workers
// asked for are counted in time order from the minute that holds Since,
// each whole (its reports outside the window too), and the chart stops
// before the first minute that takes the count past MaxCost
// (ChartResult.Through), so that every store stops at the same minute.
func (q ChartQuery) MaxCost() int64 {
	if q.Budget > 0 {
		return q.Budget
	}
	return q.mostCost()
}

func (q ChartQuery) mostCost() int64 {
	if q.ByMinute() {
		return MaxChartMinutes
	}
	return MaxChartReports
}

// ChartThrough returns where a chart of q stops counting (MaxCost), given
// the reports of the workers it asks for in time order, from the start of
// the minute that holds Since to Until; zero when it counts them all.
func ChartThrough(q ChartQuery, reports []*domain.Report) time.Time {
	var (
		spent, budget = int64(0), q.MaxCost()
		minute        time.Time
		workers       = map[string]bool{} // of minute
	)
	for _, r := range reports {
		if m := r.ReportTime.Truncate(time.Minute); !m.Equal(minute) {
			minute = m
			clear(workers)
		}
		switch {
		case !q.ByMinute():
			spent++
		case !workers[r.Worker.Addr]:
			workers[r.Worker.Addr] = true
			spent++
		}
		if spent > budget {
			return minute.UTC()
		}
	}
	return time.Time{}
}

// ChartResult is a chart's answer.
type ChartResult struct {
	// Buckets holds the Buckets summaries, in time order.
	Buckets []ChartBucket
	// Through is zero when every report of the window is counted. Else
	// the window holds more than the chart's budget, and only the reports
	// before Through, a minute's start, are counted.
	Through time.Time
}

// ChartBucket summarises the reports of one bucket.
type ChartBucket struct {
	// Reports counts them, with ranks or without.
	Reports int64
	// Ranks summarises each dp_rank they carry, in dp_rank order.
	Ranks []ChartRank
}

// ChartRank summarises one dp_rank over the reports of a bucket (of every
// worker asked for).
type ChartRank struct {
	DPRank int64
	// Reports counts the reports that carry the rank.
	Reports int64
	// UsageSum sums their token_usage; UsageSum / Reports is the mean.
	UsageSum float64
	// MaxWaitingReqs is their largest num_waiting_reqs.
	MaxWaitingReqs int64
}

// ChartBuilder sums reports, or whole minutes of them, into the buckets of
// a chart, so that every store buckets alike.
type ChartBuilder struct {
	bounds  []time.Time
	buckets []ChartBucket
}

// NewChartBuilder returns an empty chart of q, which must be valid.
func NewChartBuilder(q ChartQuery) *ChartBuilder {
	return &ChartBuilder{bounds: q.Bounds(), buckets: make([]ChartBucket, q.Buckets)}
}

// bucket returns the bucket that holds t, or nil outside the window.
func (b *ChartBuilder) bucket(t time.Time) *ChartBucket {
	if t.Before(b.bounds[0]) || !t.Before(b.bounds[len(b.bounds)-1]) {
		return nil
	}
	i, _ := slices.BinarySearchFunc(b.bounds[1:], t, func(bound, t time.Time) int {
		if bound.After(t) {
			return 1
		}
		return -1
	})
	return &b.buckets[i]
}

// Report counts a report at t with its ranks, and says whether it lies in
// the window (it is not counted otherwise).
func (b *ChartBuilder) Report(t time.Time, ranks []domain.RankLoad) bool {
	k := b.bucket(t)
	if k == nil {
		return false
	}
	k.Reports++
	for _, r := range ranks {
		k.add(ChartRank{DPRank: r.DPRank, Reports: 1, UsageSum: r.TokenUsage, MaxWaitingReqs: r.NumWaitingReqs})
	}
	return true
}

// Minute counts the reports of a worker's minute from its summary: how
// many there are, and each rank's sums. The minute must lie wholly in the
// window, and the query be ByMinute (its buckets hold whole minutes).
func (b *ChartBuilder) Minute(start time.Time, reports int64, ranks []ChartRank) {
	k := b.bucket(start)
	if k == nil {
		return
	}
	k.Reports += reports
	for _, r := range ranks {
		k.add(r)
	}
}

func (k *ChartBucket) add(r ChartRank) {
	i, found := slices.BinarySearchFunc(k.Ranks, r.DPRank, func(a ChartRank, dp int64) int { return cmp.Compare(a.DPRank, dp) })
	if !found {
		k.Ranks = slices.Insert(k.Ranks, i, ChartRank{DPRank: r.DPRank, MaxWaitingReqs: r.MaxWaitingReqs})
	}
	a := &k.Ranks[i]
	a.Reports += r.Reports
	a.UsageSum += r.UsageSum
	a.MaxWaitingReqs = max(a.MaxWaitingReqs, r.MaxWaitingReqs)
}

// Result returns the chart counted so far; through is where the store
// stopped counting (ChartThrough), zero when it counted the whole window.
func (b *ChartBuilder) Result(through time.Time) ChartResult {
	return ChartResult{Buckets: b.buckets, Through: through}
}
