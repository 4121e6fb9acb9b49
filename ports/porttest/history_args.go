package porttest

import (
	"context"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/loadreporter/loadreporter/domain"
	"github.com/loadreporter/loadreporter/domain/audit"
)

// testEmptyWindow: a window with nothing in it is a valid question, and
// every query answers it with nothing.
func testEmptyWindow(t *testing.T, s Store) {
	ctx := ctxFor(t)
	w := audit.Window{Since: t0.Add(-48 * time.Hour), Until: t0.Add(-47 * time.Hour)}
	page, err := s.Reports(ctx, audit.ReportsQuery{Window: w})
	if err != nil || len(page.Reports) != 0 || page.NextCursor != "" {
		t.Errorf("Reports(empty window) = %d reports, cursor %q, %v", len(page.Reports), page.NextCursor, err)
	}
	o, err := s.Outages(ctx, audit.OutagesQuery{Window: w})
	if err != nil || len(o.Outages) != 0 {
		t.Errorf("Outages(empty window) = %v, %v", o, err)
	}
	st, err := s.RankStats(ctx, audit.RankStatsQuery{Window: w})
	if err != nil || len(st.Stats) != 0 {
		t.Errorf("RankStats(empty window) = %v, %v", st, err)
	}
	g, err := s.Gaps(ctx, audit.GapsQuery{Window: w, Interval: time.Second})
	if err != nil || len(g.Gaps) != 0 || len(g.Restarts) != 0 {
		t.Errorf("Gaps(empty window) = %v, %v", g, err)
	}
	im, err := s.Imbalance(ctx, audit.ImbalanceQuery{Window: w})
	if err != nil || len(im.Spans) != 0 {
		t.Errorf("Imbalance(empty window) = %v, %v", im, err)
	}
}

// argCase is one call that must fail with CodeInvalidArgument and a
// message naming arg.
type argCase struct {
	name string
	arg  string
	call func() error
}

func testArgumentErrors(t *testing.T, s Store) {
	ctx := ctxFor(t)
	cases := slices.Concat(windowAndLimitCases(ctx, s), filterCases(ctx, s), parameterCases(ctx, s))
	for _, c := range cases {
		wantInvalid(t, c.name, c.call(), c.arg)
	}
}

// windowAndLimitCases are windows without an end, backwards or empty, and
// limits out of range.
func windowAndLimitCases(ctx context.Context, s Store) []argCase {
	backwards := audit.Window{Since: t0, Until: t0.Add(-time.Second)}
	return []argCase{
		{"no since", "since", func() error {
			_, err := s.Reports(ctx, audit.ReportsQuery{Window: audit.Window{Until: t0}})
			return err
		}},
		{"no until", "until", func() error {
			_, err := s.Outages(ctx, audit.OutagesQuery{Window: audit.Window{Since: t0}})
			return err
		}},
		{"until before since", "until", func() error {
			_, err := s.Reports(ctx, audit.ReportsQuery{Window: backwards})
			return err
		}},
		{"empty window", "until", func() error {
			_, err := s.Gaps(ctx, audit.GapsQuery{Window: audit.Window{Since: t0, Until: t0}, Interval: time.Second})
			return err
		}},
		{"negative limit", "limit", func() error {
			_, err := s.Reports(ctx, audit.ReportsQuery{Window: full, Limit: -1})
			return err
		}},
		{"huge page", "limit", func() error {
			_, err := s.Reports(ctx, audit.ReportsQuery{Window: full, Limit: audit.MaxLimit + 1})
			return err
		}},
		{"huge outage limit", "limit", func() error {
			_, err := s.Outages(ctx, audit.OutagesQuery{Window: full, Limit: 1 << 30})
			return err
		}},
	}
}

// filterCases are report filters that name nothing a store keeps, and a
// cursor no store made.
func filterCases(ctx context.Context, s Store) []argCase {
	return []argCase{
		{"unknown status", "statuses", func() error {
			_, err := s.Reports(ctx, audit.ReportsQuery{Window: full, Statuses: []domain.Status{7}})
			return err
		}},
		{"unspecified status", "statuses", func() error {
			_, err := s.Reports(ctx, audit.ReportsQuery{Window: full, Statuses: []domain.Status{domain.StatusUnspecified}})
			return err
		}},
		{"negative rank", "ranks", func() error {
			_, err := s.Reports(ctx, audit.ReportsQuery{Window: full, Ranks: []int64{-1}})
			return err
		}},
		{"rank beyond int32", "ranks", func() error {
			_, err := s.RankStats(ctx, audit.RankStatsQuery{Window: full, Ranks: []int64{1 << 40}})
			return err
		}},
		{"blank worker", "workers", func() error {
			_, err := s.Imbalance(ctx, audit.ImbalanceQuery{Window: full, Workers: []string{" "}})
			return err
		}},
		{"worker with a NUL byte", "workers", func() error {
			_, err := s.Outages(ctx, audit.OutagesQuery{Window: full, Workers: []string{"10.0.0.7:30000\x00"}})
			return err
		}},
		{"worker of invalid UTF-8", "workers", func() error {
			_, err := s.Reports(ctx, audit.ReportsQuery{Window: full, Workers: []string{"w\xff"}})
			return err
		}},
		{"cursor carrying a NUL byte", "cursor", func() error {
			c := audit.ReportKey{Time: t0, WorkerAddr: "w\x00", SourceInstanceID: "s", SequenceID: 1}.Cursor(false)
			_, err := s.Reports(ctx, audit.ReportsQuery{Window: full, Cursor: c})
			return err
		}},
		{"garbage cursor", "cursor", func() error {
			_, err := s.Reports(ctx, audit.ReportsQuery{Window: full, Cursor: "not-a-cursor!"})
			return err
		}},
	}
}

// parameterCases are the gap interval, the imbalance threshold and the
// limit of DeleteBefore out of range.
func parameterCases(ctx context.Context, s Store) []argCase {
	return []argCase{
		{"zero interval", "interval", func() error {
			_, err := s.Gaps(ctx, audit.GapsQuery{Window: full})
			return err
		}},
		{"huge interval", "interval", func() error {
			_, err := s.Gaps(ctx, audit.GapsQuery{Window: full, Interval: 25 * time.Hour})
			return err
		}},
		{"negative threshold", "threshold", func() error {
			_, err := s.Imbalance(ctx, audit.ImbalanceQuery{Window: full, Threshold: -0.1})
			return err
		}},
		{"NaN threshold", "threshold", func() error {
			_, err := s.Imbalance(ctx, audit.ImbalanceQuery{Window: full, Threshold: math.NaN()})
			return err
		}},
		{"threshold above 1", "threshold", func() error {
			_, err := s.Imbalance(ctx, audit.ImbalanceQuery{Window: full, Threshold: 1.5})
			return err
		}},
		{"retention limit", "limit", func() error {
			_, err := s.DeleteBefore(ctx, t0, 0)
			return err
		}},
	}
}
