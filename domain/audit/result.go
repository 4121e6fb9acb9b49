package audit

import (
	"time"

	"github.com/loadreporter/loadreporter/domain"
)

// ReportsPage is one page of Reports.
type ReportsPage struct {
	Reports []*domain.Report
	// NextCursor continues after this page; empty when nothing follows.
	NextCursor string
}

// Span is a stretch of one worker's history from Start to End: the shape
// every audit answer that covers time shares (gaps, outages, imbalance).
type Span struct {
	WorkerAddr string
	Start      time.Time
	// End is zero while the span is Ongoing (see Episode).
	End      time.Time
	Duration time.Duration
}

// Episode is a maximal run of consecutive reports of one worker that share
// a condition (non-HEALTHY for an outage, too large a spread for
// imbalance). Start is the time of its first report; End the time of the
// first report after it that no longer meets the condition, or zero when
// Ongoing (no such report inside the window). Duration is End − Start, or
// LastSeen − Start when Ongoing.
type Episode struct {
	Span
	Ongoing bool
	// LastSeen is the time of the episode's last report.
	LastSeen time.Time
	// Reports is the number of reports in the episode.
	Reports int64
}

// Outage is an episode of non-HEALTHY reports.
type Outage struct {
	Episode
	// Statuses are the distinct statuses seen in the run, ascending.
	Statuses []domain.Status
	// LastError is the last non-empty last_error of the run.
	LastError string
}

// OutagesResult is the answer to Outages.
type OutagesResult struct {
	Outages []Outage
	// Truncated says more outages exist than the Limit let through.
	Truncated bool
}

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

// Gap is a span with nothing recorded for a worker (the reporter was down,
// history was off, or the recorder had to drop reports): Start is the time
// of the last report before it, End the time of the first report after it.
type Gap struct {
	Span
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

// Imbalance is an episode of reports whose token_usage spread (max − min
// across the ranks of one report) exceeds the threshold. A report with
// fewer than two ranks (an UNREACHABLE one has none) has spread 0 and ends
// an episode.
type Imbalance struct {
	Episode
	// PeakSpread is the largest spread in the run, at PeakTime (the first
	// report with it).
	PeakSpread float64
	PeakTime   time.Time
}

// ImbalanceResult is the answer to Imbalance.
type ImbalanceResult struct {
	Spans []Imbalance
	// Truncated says more spans exist than the Limit let through.
	Truncated bool
}
