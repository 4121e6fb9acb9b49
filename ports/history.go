package ports

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"math"
	"strings"
	"time"

	"github.com/loadreporter/loadreporter/domain"
)

// HistoryStore is where the history recorder writes reports (SPEC §5).
//
// Times are kept to the microsecond and returned in UTC by every store.
type HistoryStore interface {
	// Append stores reports, each with its ranks, all or nothing. A report is
	// identified by (SourceInstanceID, SequenceID): appending a report that
	// is already stored is a no-op, so a batch retried after an ambiguous
	// failure never duplicates anything. Append returns CodeInvalidArgument
	// for a report that cannot be stored (see ValidateReports) and
	// CodeUnavailable when the store cannot be reached; callers retry the
	// latter.
	Append(ctx context.Context, reports []*domain.Report) error

	// DeleteBefore enforces retention: it removes reports (with their ranks)
	// recorded before t and returns how many it removed. Stores that keep
	// time partitions drop every partition lying wholly before t, whatever
	// its size, and may keep the reports of the partition that contains t
	// (so history is kept up to one partition longer than asked); rows they
	// must delete one by one are deleted at most limit per call. Reports at
	// or after t are never removed. Callers repeat the call until it returns
	// 0. limit must be > 0 (CodeInvalidArgument).
	DeleteBefore(ctx context.Context, t time.Time, limit int) (int64, error)
}

// HistoryQuery answers the audit queries (SPEC §5) over what a HistoryStore
// holds. Every method validates its query first (the query types' Validate
// method) and returns CodeInvalidArgument, naming the argument, when it is
// wrong; CodeUnavailable when the store cannot be reached.
//
// Reports are ordered per worker by (ReportTime, SourceInstanceID,
// SequenceID); runs (outages, imbalance) and gaps are computed per worker
// over the reports inside the window only: nothing before Since or at or
// after Until is looked at.
type HistoryQuery interface {
	// Reports returns one page of reports in the window, oldest first (or
	// newest first), filtered by worker, status and rank.
	Reports(ctx context.Context, q ReportsQuery) (ReportsPage, error)
	// Outages returns the maximal runs of non-HEALTHY reports per worker,
	// ordered by (Start, WorkerAddr).
	Outages(ctx context.Context, q OutagesQuery) (OutagesResult, error)
	// RankStats returns token usage, waiting and throughput statistics per
	// (worker, rank), ordered by (WorkerAddr, DPRank).
	RankStats(ctx context.Context, q RankStatsQuery) (RankStatsResult, error)
	// Gaps returns the spans with nothing recorded for longer than twice the
	// history interval, and each change of source instance (a restart).
	Gaps(ctx context.Context, q GapsQuery) (GapsResult, error)
	// Imbalance returns the maximal runs of reports whose token_usage spread
	// across ranks (max − min) exceeds a threshold.
	Imbalance(ctx context.Context, q ImbalanceQuery) (ImbalanceResult, error)
}

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

// Validate checks that both ends are set and Until is after Since.
func (w Window) Validate() error {
	switch {
	case w.Since.IsZero():
		return domain.Errorf(domain.CodeInvalidArgument, "since is required")
	case w.Until.IsZero():
		return domain.Errorf(domain.CodeInvalidArgument, "until is required")
	case !w.Until.After(w.Since):
		return domain.Errorf(domain.CodeInvalidArgument, "until (%s) must be after since (%s)",
			w.Until.UTC().Format(time.RFC3339Nano), w.Since.UTC().Format(time.RFC3339Nano))
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
	if err := validateFilters(q.Workers, q.Statuses, q.Ranks); err != nil {
		return err
	}
	if err := validateLimit(q.Limit, DefaultPageSize); err != nil {
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

// ReportsPage is one page of Reports.
type ReportsPage struct {
	Reports []*domain.Report
	// NextCursor continues after this page; empty when nothing follows.
	NextCursor string
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
	if err := validateFilters(q.Workers, nil, nil); err != nil {
		return err
	}
	return validateLimit(q.Limit, DefaultResultLimit)
}

// MaxResults is the effective Limit.
func (q OutagesQuery) MaxResults() int { return effectiveLimit(q.Limit, DefaultResultLimit) }

// Outage is a maximal run of consecutive non-HEALTHY reports of one worker.
type Outage struct {
	WorkerAddr string
	// Start is the time of the run's first non-HEALTHY report.
	Start time.Time
	// End is the time of the first HEALTHY report after the run; zero when
	// Ongoing (no HEALTHY report followed inside the window).
	End     time.Time
	Ongoing bool
	// LastSeen is the time of the run's last non-HEALTHY report.
	LastSeen time.Time
	// Duration is End − Start, or LastSeen − Start when Ongoing.
	Duration time.Duration
	// Statuses are the distinct statuses seen in the run, ascending.
	Statuses []domain.Status
	// LastError is the last non-empty last_error of the run.
	LastError string
	// Reports is the number of non-HEALTHY reports in the run.
	Reports int64
}

// OutagesResult is the answer to Outages.
type OutagesResult struct {
	Outages []Outage
	// Truncated says more outages exist than the Limit let through.
	Truncated bool
}

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
	if err := validateFilters(q.Workers, nil, q.Ranks); err != nil {
		return err
	}
	return validateLimit(q.Limit, DefaultResultLimit)
}

// MaxResults is the effective Limit.
func (q RankStatsQuery) MaxResults() int { return effectiveLimit(q.Limit, DefaultResultLimit) }

// RankStat summarises one rank of one worker over the window, from every
// stored rank row (those of HEALTHY and STALE reports; UNREACHABLE reports
// carry no ranks).
type RankStat struct {
	WorkerAddr string
	DPRank     int64
	// Reports is the number of rank rows summarised.
	Reports int64
	// Token usage is the fraction of the KV cache in use, 0..1.
	AvgTokenUsage float64
	MaxTokenUsage float64
	// P95TokenUsage is the continuous 95th percentile (linear interpolation
	// between the closest ranks, like PostgreSQL's percentile_cont).
	P95TokenUsage  float64
	MaxWaitingReqs int64
	// MeanGenThroughput is in generated tokens per second.
	MeanGenThroughput float64
}

// RankStatsResult is the answer to RankStats.
type RankStatsResult struct {
	Stats []RankStat
	// Truncated says more (worker, rank) rows exist than the Limit let
	// through.
	Truncated bool
}

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
	if err := validateFilters(q.Workers, nil, nil); err != nil {
		return err
	}
	if q.Interval <= 0 || q.Interval > MaxGapInterval {
		return domain.Errorf(domain.CodeInvalidArgument,
			"interval must be within (0, %s] (the history interval), got %s", MaxGapInterval, q.Interval)
	}
	return validateLimit(q.Limit, DefaultResultLimit)
}

// MaxResults is the effective Limit.
func (q GapsQuery) MaxResults() int { return effectiveLimit(q.Limit, DefaultResultLimit) }

// Gap is a span with nothing recorded for a worker: the reporter was down,
// history was off, or the recorder had to drop reports.
type Gap struct {
	WorkerAddr string
	// Start is the time of the last report before the gap, End the time of
	// the first report after it; Duration is End − Start.
	Start    time.Time
	End      time.Time
	Duration time.Duration
}

// Restart is a change of source instance: the reporter process of a worker
// was replaced.
type Restart struct {
	WorkerAddr       string
	SourceInstanceID string
	// FirstTime is the time of the new instance's first report.
	FirstTime                time.Time
	PreviousSourceInstanceID string
	// PreviousLastTime is the time of the previous instance's last report.
	PreviousLastTime time.Time
}

// GapsResult is the answer to Gaps.
type GapsResult struct {
	// Gaps are ordered by (Start, WorkerAddr).
	Gaps []Gap
	// Restarts are ordered by (FirstTime, WorkerAddr). The first instance
	// seen in the window is not a restart.
	Restarts []Restart
	// Truncated says more gaps or restarts exist than the Limit let through.
	Truncated bool
}

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
	if err := validateFilters(q.Workers, nil, nil); err != nil {
		return err
	}
	if math.IsNaN(q.Threshold) || q.Threshold < 0 || q.Threshold > 1 {
		return domain.Errorf(domain.CodeInvalidArgument,
			"threshold must be within [0, 1] (a token_usage spread), got %v", q.Threshold)
	}
	return validateLimit(q.Limit, DefaultResultLimit)
}

// MaxResults is the effective Limit.
func (q ImbalanceQuery) MaxResults() int { return effectiveLimit(q.Limit, DefaultResultLimit) }

// Imbalance is a maximal run of consecutive reports of one worker whose
// token_usage spread exceeds the threshold. A report with fewer than two
// ranks (an UNREACHABLE one has none) has spread 0 and ends a run.
type Imbalance struct {
	WorkerAddr string
	// Start is the time of the run's first imbalanced report.
	Start time.Time
	// End is the time of the first report after the run that is not
	// imbalanced; zero when Ongoing.
	End     time.Time
	Ongoing bool
	// LastSeen is the time of the run's last imbalanced report.
	LastSeen time.Time
	// Duration is End − Start, or LastSeen − Start when Ongoing.
	Duration time.Duration
	// PeakSpread is the largest spread in the run, at PeakTime (the first
	// report with it).
	PeakSpread float64
	PeakTime   time.Time
	// Reports is the number of imbalanced reports in the run.
	Reports int64
}

// ImbalanceResult is the answer to Imbalance.
type ImbalanceResult struct {
	Spans []Imbalance
	// Truncated says more spans exist than the Limit let through.
	Truncated bool
}

// ParseStatus reads a status name as the wire and the CLI spell it
// ("HEALTHY", "stale", "REPORT_STATUS_UNREACHABLE", …).
func ParseStatus(s string) (domain.Status, error) {
	name := strings.TrimPrefix(strings.ToUpper(strings.TrimSpace(s)), "REPORT_STATUS_")
	for _, st := range queryableStatuses {
		if st.String() == name {
			return st, nil
		}
	}
	return 0, domain.Errorf(domain.CodeInvalidArgument, "status %q: want HEALTHY, STALE or UNREACHABLE", s)
}

var queryableStatuses = []domain.Status{domain.StatusHealthy, domain.StatusStale, domain.StatusUnreachable}

// ValidateReports checks what Append needs: no nil report, a source
// instance id and a worker address, a report time in years 1970..9999, a
// sequence id that fits
// a signed 64-bit column, and dp_ranks that fit int32 and appear once per
// report.
func ValidateReports(reports []*domain.Report) error {
	for i, r := range reports {
		switch {
		case r == nil:
			return domain.Errorf(domain.CodeInvalidArgument, "reports[%d] is nil", i)
		case r.SourceInstanceID == "":
			return domain.Errorf(domain.CodeInvalidArgument, "reports[%d]: source_instance_id is empty", i)
		case r.Worker.Addr == "":
			return domain.Errorf(domain.CodeInvalidArgument, "reports[%d]: worker_addr is empty", i)
		case r.ReportTime.IsZero():
			return domain.Errorf(domain.CodeInvalidArgument, "reports[%d]: report_time is not set", i)
		case r.ReportTime.Year() < 1970 || r.ReportTime.Year() > 9999:
			return domain.Errorf(domain.CodeInvalidArgument, "reports[%d]: report_time %s outside years 1970..9999", i, r.ReportTime.UTC().Format(time.RFC3339))
		case r.SequenceID > math.MaxInt64:
			return domain.Errorf(domain.CodeInvalidArgument, "reports[%d]: sequence_id %d exceeds %d", i, r.SequenceID, int64(math.MaxInt64))
		}
		for j, rk := range r.Ranks {
			if rk.DPRank < 0 || rk.DPRank > math.MaxInt32 {
				return domain.Errorf(domain.CodeInvalidArgument, "reports[%d]: dp_rank %d outside [0, %d]", i, rk.DPRank, math.MaxInt32)
			}
			for _, prev := range r.Ranks[:j] {
				if prev.DPRank == rk.DPRank {
					return domain.Errorf(domain.CodeInvalidArgument, "reports[%d]: dp_rank %d appears twice", i, rk.DPRank)
				}
			}
		}
	}
	return nil
}

// ReportKey identifies a stored report and orders reports the way every
// store returns them: by ReportTime, then WorkerAddr, SourceInstanceID,
// SequenceID.
type ReportKey struct {
	Time             time.Time
	WorkerAddr       string
	SourceInstanceID string
	SequenceID       uint64
}

// KeyOf returns the key of r.
func KeyOf(r *domain.Report) ReportKey {
	return ReportKey{Time: r.ReportTime, WorkerAddr: r.Worker.Addr, SourceInstanceID: r.SourceInstanceID, SequenceID: r.SequenceID}
}

// Compare returns -1, 0 or +1 as k sorts before, with or after o.
func (k ReportKey) Compare(o ReportKey) int {
	if c := k.Time.Compare(o.Time); c != 0 {
		return c
	}
	if c := strings.Compare(k.WorkerAddr, o.WorkerAddr); c != 0 {
		return c
	}
	if c := strings.Compare(k.SourceInstanceID, o.SourceInstanceID); c != 0 {
		return c
	}
	switch {
	case k.SequenceID < o.SequenceID:
		return -1
	case k.SequenceID > o.SequenceID:
		return 1
	}
	return 0
}

// Cursor returns the opaque cursor that continues after k in the given
// order; stores put it in ReportsPage.NextCursor.
func (k ReportKey) Cursor(descending bool) string {
	b, _ := json.Marshal(cursor{
		V: 1, T: k.Time.UnixMicro(), W: k.WorkerAddr, S: k.SourceInstanceID, Q: k.SequenceID, D: descending,
	})
	return base64.RawURLEncoding.EncodeToString(b)
}

type cursor struct {
	V int    `json:"v"`
	T int64  `json:"t"`
	W string `json:"w"`
	S string `json:"s"`
	Q uint64 `json:"q"`
	D bool   `json:"d"`
}

func decodeCursor(s string) (ReportKey, bool, error) {
	bad := domain.Errorf(domain.CodeInvalidArgument, "cursor: not a cursor returned by a previous page")
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(b) > 4096 {
		return ReportKey{}, false, bad
	}
	var c cursor
	if err := json.Unmarshal(b, &c); err != nil || c.V != 1 || c.W == "" || c.S == "" {
		return ReportKey{}, false, bad
	}
	return ReportKey{Time: time.UnixMicro(c.T).UTC(), WorkerAddr: c.W, SourceInstanceID: c.S, SequenceID: c.Q}, c.D, nil
}

func validateFilters(workers []string, statuses []domain.Status, ranks []int64) error {
	if len(workers) > MaxFilterValues || len(statuses) > MaxFilterValues || len(ranks) > MaxFilterValues {
		return domain.Errorf(domain.CodeInvalidArgument, "workers, statuses and ranks take at most %d values each", MaxFilterValues)
	}
	for _, w := range workers {
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

func validateLimit(limit, def int) error {
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

// RecorderObserver learns what the history recorder does (metrics, logs,
// tests). Calls come from the recorder's writer goroutine, except Dropped,
// which may also come from whoever calls Record (the fire loop): return
// quickly and never call back into the recorder.
type RecorderObserver interface {
	// Written says the store accepted a batch of n reports; lag is the age
	// of its oldest report (time from Record to stored).
	Written(n int, lag time.Duration)
	// WriteFailed says an Append attempt failed. retryIn is the backoff
	// before the same batch is tried again; 0 when it will not be (the store
	// rejected it as invalid, or the recorder is giving up at Close).
	WriteFailed(err error, retryIn time.Duration)
	// Dropped says n reports were lost, and why.
	Dropped(n int, reason DropReason)
}

// DropReason says why the recorder lost reports.
type DropReason string

// Drop reasons.
const (
	// DropBufferFull: the buffer was full (the store was slow or down), so
	// the oldest report made room for a new one.
	DropBufferFull DropReason = "buffer_full"
	// DropRejected: the report (or its batch) was invalid for the store.
	DropRejected DropReason = "rejected"
	// DropClosed: the report came after Close, or was still unwritten when
	// Close's deadline ended.
	DropClosed DropReason = "closed"
)
