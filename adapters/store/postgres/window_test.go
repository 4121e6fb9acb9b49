package postgres_test

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/loadreporter/loadreporter/adapters/store/postgres"
	"github.com/loadreporter/loadreporter/domain"
	"github.com/loadreporter/loadreporter/domain/audit"
	"github.com/loadreporter/loadreporter/ports"
)

// windowFixture stores reports of one worker at a whole minute t0 and a
// microsecond either side of it: the first UNREACHABLE, the second with a
// token_usage spread of 0.65, then, 3 s later, a restart.
func windowFixture(t *testing.T) (*postgres.Store, time.Time) {
	t.Helper()
	s, _ := newStore(t)
	t0 := time.Date(2026, 11, 30, 7, 30, 0, 0, time.UTC)
	var reports []*domain.Report
	for i, d := range []time.Duration{-time.Microsecond, 0, time.Microsecond, 3 * time.Second} {
		r := &domain.Report{Worker: domain.Worker{Addr: "10.0.0.7:30000"}, SourceInstanceID: "a", SequenceID: uint64(i + 1),
			ReportTime: t0.Add(d), Status: domain.StatusHealthy,
			Ranks: []domain.RankLoad{{DPRank: 0, TokenUsage: 0.25 * float64(i)}, {DPRank: 1, TokenUsage: 0.9}}}
		if i == 0 {
			r.Status, r.LastError, r.Ranks = domain.StatusUnreachable, "load snapshot pull timed out", nil
		}
		if i == 3 {
			r.SourceInstanceID, r.SequenceID = "b", 1
		}
		reports = append(reports, r)
	}
	if err := s.Append(t.Context(), reports); err != nil {
		t.Fatal(err)
	}
	return s, t0
}

// everyAnswer runs every query over w and describes what it found.
func everyAnswer(t *testing.T, q ports.HistoryQuery, w audit.Window) (string, []error) {
	t.Helper()
	ctx := t.Context()
	var b strings.Builder
	add := func(format string, a ...any) { fmt.Fprintf(&b, format+"\n", a...) }
	page, err1 := q.Reports(ctx, audit.ReportsQuery{Window: w})
	for _, r := range page.Reports {
		add("report %s", r.ReportTime.Format(time.RFC3339Nano))
	}
	out, err2 := q.Outages(ctx, audit.OutagesQuery{Window: w})
	for _, o := range out.Outages {
		add("outage %s – %s", o.Start.Format(time.RFC3339Nano), o.End.Format(time.RFC3339Nano))
	}
	st, err3 := q.RankStats(ctx, audit.RankStatsQuery{Window: w})
	for _, s := range st.Stats {
		add("rank %d: %d reports", s.DPRank, s.Reports)
	}
	gaps, err4 := q.Gaps(ctx, audit.GapsQuery{Window: w, Interval: time.Second})
	for _, g := range gaps.Gaps {
		add("gap from %s", g.Start.Format(time.RFC3339Nano))
	}
	for _, r := range gaps.Restarts {
		add("restart at %s", r.FirstTime.Format(time.RFC3339Nano))
	}
	imb, err5 := q.Imbalance(ctx, audit.ImbalanceQuery{Window: w, Threshold: 0.5})
	for _, s := range imb.Spans {
		add("imbalance from %s", s.Start.Format(time.RFC3339Nano))
	}
	return b.String(), []error{err1, err2, err3, err4, err5}
}

// Bounds no store can represent exactly are refused, naming the bound, by
// every query: PostgreSQL answered them with nothing (pgx wraps past year
// 294247) or "timestamp out of range", where the in-memory store answered
// (domain/audit's tests hold every store to the same refusal).
func TestWindowsBeyondWhatStoresHoldAreRefused(t *testing.T) {
	t.Parallel()
	s, _ := windowFixture(t)
	ms := time.UnixMilli
	for _, tc := range []struct {
		w     audit.Window
		field string
	}{
		{audit.Window{Since: ms(1), Until: ms(math.MaxInt64)}, "until"},
		{audit.Window{Since: ms(1), Until: ms(1e17)}, "until"},
		{audit.Window{Since: ms(1), Until: ms(9.3e15)}, "until"},
		{audit.Window{Since: ms(-9.3e15), Until: ms(1.9e12)}, "since"},
	} {
		got, errs := everyAnswer(t, s, tc.w)
		for _, err := range errs {
			if domain.ErrorCode(err) != domain.CodeInvalidArgument || !strings.HasPrefix(domain.ErrorMessage(err), tc.field+" ") ||
				!strings.Contains(domain.ErrorMessage(err), "9999-12-31T23:59:59.999999999Z]") {
				t.Errorf("[%d ms, %d ms): %v; want INVALID_ARGUMENT naming %s and the range (answered %q)",
					tc.w.Since.UnixMilli(), tc.w.Until.UnixMilli(), err, tc.field, got)
			}
		}
	}
}

// The widest window finds every report, and a bound between two
// microseconds selects what it says (stored times are whole microseconds):
// pgx truncated such a bound, so PostgreSQL took in a report the bound
// excluded, or left out one it included, where the in-memory store did
// not.
func TestEdgeWindowsSelectWhatTheySay(t *testing.T) {
	t.Parallel()
	s, t0 := windowFixture(t)
	const (
		r1 = "report 2026-11-30T07:29:59.999999Z\n"
		r2 = "report 2026-11-30T07:30:00Z\n"
		r3 = "report 2026-11-30T07:30:00.000001Z\n"
		r4 = "report 2026-11-30T07:30:03Z\n"

		outage    = "outage 2026-11-30T07:29:59.999999Z – 2026-11-30T07:30:00Z\n"
		gap       = "gap from 2026-11-30T07:30:00.000001Z\n"
		restart   = "restart at 2026-11-30T07:30:03Z\n"
		imbalance = "imbalance from 2026-11-30T07:30:00Z\n"
	)
	ranks := func(n int) string { return fmt.Sprintf("rank 0: %d reports\nrank 1: %[1]d reports\n", n) }
	for _, tc := range []struct {
		w    audit.Window
		want string
	}{
		{audit.Window{Since: time.Date(1, 1, 1, 0, 0, 0, 1000, time.UTC), Until: time.Date(9999, 12, 31, 23, 59, 59, 999_999_999, time.UTC)},
			r1 + r2 + r3 + r4 + outage + ranks(3) + gap + restart + imbalance},
		{audit.Window{Since: t0.Add(500), Until: t0.Add(time.Hour)}, r3 + r4 + ranks(2) + gap + restart},
		{audit.Window{Since: t0.Add(-time.Hour), Until: t0.Add(500)}, r1 + r2 + outage + ranks(1) + imbalance},
		{audit.Window{Since: t0.Add(-1500), Until: t0.Add(1500)}, r1 + r2 + r3 + outage + ranks(2) + imbalance},
		{audit.Window{Since: t0.Add(-500), Until: t0.Add(3*time.Second + 1)}, r2 + r3 + r4 + ranks(3) + gap + restart + imbalance},
	} {
		got, errs := everyAnswer(t, s, tc.w)
		for _, err := range errs {
			if err != nil {
				t.Errorf("%v: %v", tc.w, err)
			}
		}
		if got != tc.want {
			t.Errorf("window [%s, %s):\n%s\nwant\n%s", tc.w.Since.Format(time.RFC3339Nano), tc.w.Until.Format(time.RFC3339Nano), got, tc.want)
		}
	}
}
