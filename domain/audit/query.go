package audit

import (
	"math"
	"strings"
	"time"

	"github.com/loadreporter/loadreporter/domain"
)

// Limits on query arguments.
const (
	// DefaultPageSize is the Reports page size when ReportsQuery.Limit is 0.
	DefaultPageSize = 100
	// DefaultResultLimit bounds the rows of the other queries when their
	// Limit is 0.
	DefaultResultLimit = 1000
	// MaxLimit is the largest Limit any query accepts.
	MaxLimit = 10000
	// MaxFilterValues bounds each filter list (workers, statuses, ranks).
	MaxFilterValues = 1000
	// MaxGapInterval is the largest history interval Gaps accepts.
	MaxGapInterval = 24 * time.Hour
)

// Window is the half-open time span [Since, Until). Both ends are required.
type Window struct {
	Since time.Time
	Until time.Time
}

// A window's bounds must lie in years 0001 to 9999 UTC, which every store
// holds exactly. time.Time reaches much further, but PostgreSQL's
// timestamptz ends in year 294276 and pgx converts a time through Unix
// microseconds in an int64, which wraps after year 294247: such a bound
// selected nothing, or was refused as out of range, where the in-memory
// store answered. Reports lie in years 1970..9999 (ValidateReports), so
// no window needs more. The range starts at the zero time.Time, which
// reads as a bound not given: a caller that means that very instant passes
// the microsecond after it, which selects the same reports (stored times
// are whole microseconds, and none is that old).
var (
	minWindowTime = time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC)
	maxWindowTime = time.Date(9999, 12, 31, 23, 59, 59, 999_999_999, time.UTC)
)

// Validate checks that both ends are set, lie in years 0001..9999 UTC, and
// Until is after Since.
func (w Window) Validate() error {
	switch {
	case w.Since.IsZero():
		return domain.Errorf(domain.CodeInvalidArgument, "since is required")
	case w.Until.IsZero():
		return domain.Errorf(domain.CodeInvalidArgument, "until is required")
	}
	if err := checkWindowTime("since", w.Since); err != nil {
		return err
	}
	if err := checkWindowTime("until", w.Until); err != nil {
		return err
	}
	if !w.Until.After(w.Since) {
		return domain.Errorf(domain.CodeInvalidArgument, "until (%s) must be after since (%s)",
			w.Until.UTC().Format(time.RFC3339Nano), w.Since.UTC().Format(time.RFC3339Nano))
	}
	return nil
}

func checkWindowTime(field string, t time.Time) error {
	if t.Before(minWindowTime) || t.After(maxWindowTime) {
		return domain.Errorf(domain.CodeInvalidArgument, "%s %s is outside [%s, %s]: history stores hold years 0001 to 9999 UTC",
			field, t.UTC().Format(time.RFC3339Nano), minWindowTime.Format(time.RFC3339Nano), maxWindowTime.Format(time.RFC3339Nano))
	}
	return nil
}

// Contains reports whether t lies in [Since, Until).
func (w Window) Contains(t time.Time) bool { return !t.Before(w.Since) && t.Before(w.Until) }

// ReportsQuery selects a page of reports.
type ReportsQuery struct {
	Window
	// Workers keeps reports of these worker addresses; empty keeps all.
	Workers []string
	// Statuses keeps reports with one of these statuses; empty keeps all.
	Statuses []domain.Status
	// Ranks keeps, in each report, only the ranks with these dp_ranks;
	// empty keeps all. It never removes a report: an UNREACHABLE report
	// (no ranks) is still returned, since it says when the ranks were not
	// seen.
	Ranks []int64
	// Limit is the page size: 0 means DefaultPageSize, at most MaxLimit.
	Limit int
	// Cursor continues after the last report of a previous page: pass its
	// NextCursor unchanged, with the same Descending. Empty starts at the
	// beginning.
	Cursor string
	// Descending returns the newest reports first.
	Descending bool
}

// Validate checks every argument of q.
func (q ReportsQuery) Validate() error {
	if err := q.Window.Validate(); err != nil {
		return err
	}
	if err := CheckFilters(q.Workers, q.Statuses, q.Ranks); err != nil {
		return err
	}
	if err := CheckLimit(q.Limit, DefaultPageSize); err != nil {
		return err
	}
	_, _, err := q.After()
	return err
}

// PageSize is the effective Limit.
func (q ReportsQuery) PageSize() int { return effectiveLimit(q.Limit, DefaultPageSize) }

// After decodes Cursor: ok is false when the query starts at the beginning.
func (q ReportsQuery) After() (key ReportKey, ok bool, err error) {
	if q.Cursor == "" {
		return ReportKey{}, false, nil
	}
	key, desc, err := decodeCursor(q.Cursor)
	if err != nil {
		return ReportKey{}, false, err
	}
	if desc != q.Descending {
		return ReportKey{}, false, domain.Errorf(domain.CodeInvalidArgument,
			"cursor: was made for the other order (descending=%t); start again without it", desc)
	}
	return key, true, nil
}

// OutagesQuery selects outages.
type OutagesQuery struct {
	Window
	// Workers keeps outages of these worker addresses; empty keeps all.
	Workers []string
	// Limit bounds the outages returned: 0 means DefaultResultLimit, at
	// most MaxLimit.
	Limit int
}

// Validate checks every argument of q.
func (q OutagesQuery) Validate() error {
	if err := q.Window.Validate(); err != nil {
		return err
	}
	if err := CheckFilters(q.Workers, nil, nil); err != nil {
		return err
	}
	return CheckLimit(q.Limit, DefaultResultLimit)
}

// MaxResults is the effective Limit.
func (q OutagesQuery) MaxResults() int { return effectiveLimit(q.Limit, DefaultResultLimit) }

// RankStatsQuery selects per-rank statistics.
type RankStatsQuery struct {
	Window
	// Workers keeps these worker addresses; empty keeps all.
	Workers []string
	// Ranks keeps these dp_ranks; empty keeps all.
	Ranks []int64
	// Limit bounds the (worker, rank) rows: 0 means DefaultResultLimit, at
	// most MaxLimit.
	Limit int
}

// Validate checks every argument of q.
func (q RankStatsQuery) Validate() error {
	if err := q.Window.Validate(); err != nil {
		return err
	}
	if err := CheckFilters(q.Workers, nil, q.Ranks); err != nil {
		return err
	}
	return CheckLimit(q.Limit, DefaultResultLimit)
}

// MaxResults is the effective Limit.
func (q RankStatsQuery) MaxResults() int { return effectiveLimit(q.Limit, DefaultResultLimit) }

// GapsQuery selects recording gaps and restarts.
type GapsQuery struct {
	Window
	// Workers keeps these worker addresses; empty keeps all.
	Workers []string
	// Interval is the history interval the reports were recorded at; a gap
	// is a span longer than 2 × Interval between two consecutive reports of
	// a worker. Required, at most MaxGapInterval.
	Interval time.Duration
	// Limit bounds the gaps and, separately, the restarts: 0 means
	// DefaultResultLimit, at most MaxLimit.
	Limit int
}

// Validate checks every argument of q.
func (q GapsQuery) Validate() error {
	if err := q.Window.Validate(); err != nil {
		return err
	}
	if err := CheckFilters(q.Workers, nil, nil); err != nil {
		return err
	}
	if err := CheckGapInterval(q.Interval); err != nil {
		return err
	}
	return CheckLimit(q.Limit, DefaultResultLimit)
}

// CheckGapInterval checks a history interval for Gaps: whole milliseconds,
// as the history service counts them, within [1ms, MaxGapInterval].
func CheckGapInterval(d time.Duration) error {
	if d < time.Millisecond || d > MaxGapInterval || d%time.Millisecond != 0 {
		return domain.Errorf(domain.CodeInvalidArgument,
			"interval must be within [1ms, %s] in whole milliseconds (the history interval), got %s", MaxGapInterval, d)
	}
	return nil
}

// MaxResults is the effective Limit.
func (q GapsQuery) MaxResults() int { return effectiveLimit(q.Limit, DefaultResultLimit) }

// ImbalanceQuery selects imbalance spans.
type ImbalanceQuery struct {
	Window
	// Workers keeps these worker addresses; empty keeps all.
	Workers []string
	// Threshold is the token_usage spread (max − min across the ranks of
	// one report) a report must exceed to count as imbalanced; within
	// [0, 1].
	Threshold float64
	// Limit bounds the spans returned: 0 means DefaultResultLimit, at most
	// MaxLimit.
	Limit int
}

// Validate checks every argument of q.
func (q ImbalanceQuery) Validate() error {
	if err := q.Window.Validate(); err != nil {
		return err
	}
	if err := CheckFilters(q.Workers, nil, nil); err != nil {
		return err
	}
	if math.IsNaN(q.Threshold) || q.Threshold < 0 || q.Threshold > 1 {
		return domain.Errorf(domain.CodeInvalidArgument,
			"threshold must be within [0, 1] (a token_usage spread), got %v", q.Threshold)
	}
	return CheckLimit(q.Limit, DefaultResultLimit)
}

// MaxResults is the effective Limit.
func (q ImbalanceQuery) MaxResults() int { return effectiveLimit(q.Limit, DefaultResultLimit) }

// CheckFilters checks a query's worker, status and rank filters; clients
// that carry ranks in fewer bits check them before sending.
func CheckFilters(workers []string, statuses []domain.Status, ranks []int64) error {
	if len(workers) > MaxFilterValues || len(statuses) > MaxFilterValues || len(ranks) > MaxFilterValues {
		return domain.Errorf(domain.CodeInvalidArgument, "workers, statuses and ranks take at most %d values each", MaxFilterValues)
	}
	for _, w := range workers {
		if err := checkText("workers", w); err != nil {
			return err
		}
		if strings.TrimSpace(w) == "" {
			return domain.Errorf(domain.CodeInvalidArgument, "workers: a worker address is empty")
		}
	}
	for _, s := range statuses {
		if s != domain.StatusHealthy && s != domain.StatusStale && s != domain.StatusUnreachable {
			return domain.Errorf(domain.CodeInvalidArgument, "statuses: unknown status %d; allowed HEALTHY, STALE, UNREACHABLE", s)
		}
	}
	for _, r := range ranks {
		if r < 0 || r > math.MaxInt32 {
			return domain.Errorf(domain.CodeInvalidArgument, "ranks: dp_rank %d outside [0, %d]", r, math.MaxInt32)
		}
	}
	return nil
}

// CheckLimit checks a query's limit, def being its default; clients that
// carry the limit in fewer bits check it before sending.
func CheckLimit(limit, def int) error {
	if limit < 0 || limit > MaxLimit {
		return domain.Errorf(domain.CodeInvalidArgument,
			"limit must be within [1, %d] (0 means the default %d), got %d", MaxLimit, def, limit)
	}
	return nil
}

func effectiveLimit(limit, def int) int {
	if limit == 0 {
		return def
	}
	return limit
}

// checkText refuses what no store can hold or compare: invalid UTF-8 and
// NUL bytes (PostgreSQL rejects both in text), so that they are argument
// errors on every surface instead of a store failure.
func checkText(field, v string) error {
	if problem := domain.TextProblem(v); problem != "" {
		return domain.Errorf(domain.CodeInvalidArgument, "%s: %q %s", field, domain.Shorten(v, 64), problem)
	}
	return nil
}
