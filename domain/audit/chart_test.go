package audit_test

import (
	"math/big"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/loadreporter/loadreporter/domain"
	"github.com/loadreporter/loadreporter/domain/audit"
)

func TestChartBoundsCutTheWindowEvenly(t *testing.T) {
	t.Parallel()
	since := time.Date(2026, 11, 30, 7, 12, 34, 500_000_000, time.UTC)
	q := audit.ChartQuery{Window: audit.Window{Since: since, Until: since.Add(time.Hour + 7)}, Buckets: 240}
	b := q.Bounds()
	if q.ByMinute() || len(b) != 241 || !b[0].Equal(q.Since) || !b[240].Equal(q.Until) {
		t.Fatalf("ByMinute %t, %d bounds from %s to %s", q.ByMinute(), len(b), b[0], b[len(b)-1])
	}
	for i := 1; i < 240; i++ {
		if want := since.Add(time.Duration(i) * 15 * time.Second); !b[i].Equal(want) {
			t.Fatalf("bound %d = %s, want %s: the step of a window under 4 h is (Until − Since) / Buckets", i, b[i], want)
		}
	}
}

// From a minute a bucket on, the bounds between buckets are whole minutes,
// so a store counts every minute from its summary.
func TestChartBoundsOfLongWindowsAreWholeMinutes(t *testing.T) {
	t.Parallel()
	since := time.Date(2026, 11, 30, 7, 12, 34, 500_000_000, time.UTC)
	for _, span := range []time.Duration{4*time.Hour + time.Second, 14 * time.Hour, 7 * 24 * time.Hour} {
		q := audit.ChartQuery{Window: audit.Window{Since: since, Until: since.Add(span)}, Buckets: 240}
		b := q.Bounds()
		if !q.ByMinute() || !b[0].Equal(q.Since) || !b[240].Equal(q.Until) {
			t.Fatalf("%s: ByMinute %t, bounds from %s to %s", span, q.ByMinute(), b[0], b[240])
		}
		step := span / 240
		for i := 1; i < 240; i++ {
			nominal := since.Add(time.Duration(i) * step)
			if b[i].Truncate(time.Minute) != b[i] || b[i].After(nominal) || nominal.Sub(b[i]) >= time.Minute || !b[i].After(b[i-1]) {
				t.Fatalf("%s: bound %d = %s; want the whole minute at or before %s, after bound %d", span, i, b[i], nominal, i-1)
			}
		}
	}
}

// A window may span years 0001 to 9999, past what a time.Duration holds
// (292 years): the step is still the window's 240th part.
func TestChartBoundsOfTheWidestWindow(t *testing.T) {
	t.Parallel()
	w := audit.Window{Since: time.Date(1, 1, 1, 0, 0, 0, 1000, time.UTC), Until: time.Date(9999, 12, 31, 23, 59, 59, 999_999_999, time.UTC)}
	b := audit.ChartQuery{Window: w, Buckets: 240}.Bounds()
	nanos := func(t time.Time) *big.Int {
		n := big.NewInt(t.Unix())
		n.Mul(n, big.NewInt(1e9))
		return n.Add(n, big.NewInt(int64(t.Nanosecond())))
	}
	step := new(big.Int).Sub(nanos(w.Until), nanos(w.Since))
	step.Div(step, big.NewInt(240))
	for i := 1; i < 240; i++ {
		want := new(big.Int).Mul(step, big.NewInt(int64(i)))
		want.Add(want, nanos(w.Since))
		got := nanos(b[i])
		if d := new(big.Int).Sub(want, got); d.Sign() < 0 || d.Cmp(big.NewInt(int64(time.Minute))) >= 0 || !b[i].After(b[i-1]) {
			t.Fatalf("bound %d = %s, %s ns before Since + %d steps", i, b[i], d, i)
		}
	}
}

// Fewer than 35 buckets over the widest window would each span more than
// a time.Duration holds (their bounds wrapped before Since): refused.
func TestChartBucketsBeyondADurationAreRefused(t *testing.T) {
	t.Parallel()
	w := audit.Window{Since: time.Date(1, 1, 1, 0, 0, 0, 1000, time.UTC), Until: time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)}
	for _, n := range []int{1, 10, 34} {
		if err := (audit.ChartQuery{Window: w, Buckets: n}).Validate(); domain.ErrorCode(err) != domain.CodeInvalidArgument ||
			!strings.Contains(err.Error(), "292 years") {
			t.Errorf("%d buckets over 10 000 years: %v, want INVALID_ARGUMENT saying why", n, err)
		}
	}
	if err := (audit.ChartQuery{Window: w, Buckets: 35}).Validate(); err != nil {
		t.Errorf("35 buckets over 10 000 years: %v", err)
	}
}

func TestChartBuilderCountsEachReportInItsBucket(t *testing.T) {
	t.Parallel()
	since := time.Date(2026, 11, 30, 7, 0, 0, 0, time.UTC)
	q := audit.ChartQuery{Window: audit.Window{Since: since, Until: since.Add(4 * time.Minute)}, Buckets: 4}
	b := audit.NewChartBuilder(q)
	rank := func(dp int64, usage float64, waiting int64) domain.RankLoad {
		return domain.RankLoad{DPRank: dp, TokenUsage: usage, NumWaitingReqs: waiting}
	}
	for _, r := range []struct {
		at    time.Duration
		ranks []domain.RankLoad
		in    bool
	}{
		{-time.Microsecond, []domain.RankLoad{rank(0, 1, 100)}, false},
		{0, []domain.RankLoad{rank(3, 0.5, 1), rank(0, 0.25, 2)}, true},
		{time.Minute - time.Microsecond, []domain.RankLoad{rank(0, 0.75, 7)}, true},
		{time.Minute, nil, true}, // UNREACHABLE: counted, no ranks
		{4*time.Minute - time.Microsecond, []domain.RankLoad{rank(1, 0.5, 0)}, true},
		{4 * time.Minute, []domain.RankLoad{rank(0, 1, 100)}, false},
	} {
		if in := b.Report(since.Add(r.at), r.ranks); in != r.in {
			t.Errorf("report at +%s counted %t, want %t", r.at, in, r.in)
		}
	}
	b.Minute(since.Add(2*time.Minute), 60, []audit.ChartRank{{DPRank: 0, Reports: 60, UsageSum: 30, MaxWaitingReqs: 9}})
	b.Minute(since.Add(5*time.Minute), 60, []audit.ChartRank{{DPRank: 0, Reports: 60, UsageSum: 30}}) // outside
	through := since.Add(time.Hour)
	res := b.Result(through)
	want := []audit.ChartBucket{
		{Reports: 2, Ranks: []audit.ChartRank{{DPRank: 0, Reports: 2, UsageSum: 1, MaxWaitingReqs: 7}, {DPRank: 3, Reports: 1, UsageSum: 0.5, MaxWaitingReqs: 1}}},
		{Reports: 1},
		{Reports: 60, Ranks: []audit.ChartRank{{DPRank: 0, Reports: 60, UsageSum: 30, MaxWaitingReqs: 9}}},
		{Reports: 1, Ranks: []audit.ChartRank{{DPRank: 1, Reports: 1, UsageSum: 0.5}}},
	}
	if !res.Through.Equal(through) || len(res.Buckets) != len(want) {
		t.Fatalf("result = %+v", res)
	}
	for i := range want {
		if got := res.Buckets[i]; got.Reports != want[i].Reports || !slices.Equal(got.Ranks, want[i].Ranks) {
			t.Errorf("bucket %d = %+v, want %+v", i, got, want[i])
		}
	}
}

// ChartThrough stops before the minute that takes the count past the
// budget: reports one by one, or (worker, minute) pairs.
func TestChartThroughStopsAtAWholeMinute(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 11, 30, 7, 0, 0, 0, time.UTC)
	var reports []*domain.Report
	for i := range 30 { // minute k holds reports of workers a and b
		for _, w := range []string{"a", "b"} {
			reports = append(reports, &domain.Report{Worker: domain.Worker{Addr: w}, ReportTime: t0.Add(time.Duration(i) * 20 * time.Second)})
		}
	}
	short := audit.ChartQuery{Window: audit.Window{Since: t0.Add(30 * time.Second), Until: t0.Add(time.Hour)}, Buckets: 240, Budget: 13}
	if got, want := audit.ChartThrough(short, reports), t0.Add(2*time.Minute); !got.Equal(want) {
		t.Errorf("13 reports of a window from %s: through %s, want %s (the minutes from the one holding Since count whole)", short.Since, got, want)
	}
	long := audit.ChartQuery{Window: audit.Window{Since: t0, Until: t0.Add(5 * time.Hour)}, Buckets: 240, Budget: 5}
	if got, want := audit.ChartThrough(long, reports), t0.Add(2*time.Minute); !got.Equal(want) {
		t.Errorf("5 worker-minutes: through %s, want %s", got, want)
	}
	long.Budget = 20
	if got := audit.ChartThrough(long, reports); !got.IsZero() {
		t.Errorf("20 worker-minutes for 20: through %s, want zero", got)
	}
}

func TestChartQueryArguments(t *testing.T) {
	t.Parallel()
	w := audit.Window{Since: time.Unix(0, 0), Until: time.Unix(3600, 0)}
	for _, tc := range []struct {
		q    audit.ChartQuery
		want string
	}{
		{audit.ChartQuery{Window: w}, "buckets must be within [1, 1000], got 0"},
		{audit.ChartQuery{Window: w, Buckets: 1001}, "buckets must be within [1, 1000], got 1001"},
		{audit.ChartQuery{Window: w, Buckets: 240, Budget: -1}, "budget must be within [1, 200000] (0 means 200000) for this window, got -1"},
		{audit.ChartQuery{Window: audit.Window{Since: w.Since, Until: w.Since.Add(5 * time.Hour)}, Buckets: 240, Budget: 100_001}, "budget must be within [1, 100000]"},
		{audit.ChartQuery{Window: w, Buckets: 240, Workers: []string{""}}, "workers: a worker address is empty"},
		{audit.ChartQuery{Window: audit.Window{Since: w.Since}, Buckets: 240}, "until is required"},
	} {
		if err := tc.q.Validate(); domain.ErrorCode(err) != domain.CodeInvalidArgument || !strings.HasPrefix(domain.ErrorMessage(err), tc.want) {
			t.Errorf("%+v: %v, want INVALID_ARGUMENT %q", tc.q, err, tc.want)
		}
	}
	if err := (audit.ChartQuery{Window: w, Buckets: 240, Budget: 200_000}).Validate(); err != nil {
		t.Errorf("valid query: %v", err)
	}
}
