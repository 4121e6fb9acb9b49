package ports

import (
	"context"
	"time"

	"github.com/loadreporter/loadreporter/domain"
	"github.com/loadreporter/loadreporter/domain/audit"
)

// HistoryStore is where the history recorder writes reports (docs/history.md).
//
// Times are kept to the microsecond and returned in UTC by every store.
type HistoryStore interface {
	// Append stores reports, each with its ranks, all or nothing. A report is
	// identified by (SourceInstanceID, SequenceID): appending a report that
	// is already stored is a no-op, so a batch retried after an ambiguous
	// failure never duplicates anything. Append returns CodeInvalidArgument
	// for a report that cannot be stored (see audit.ValidateReports) and
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

// HistoryQuery answers the audit queries (docs/history.md) over what a HistoryStore
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
	Reports(ctx context.Context, q audit.ReportsQuery) (audit.ReportsPage, error)
	// Outages returns the maximal runs of non-HEALTHY reports per worker,
	// ordered by (Start, WorkerAddr).
	Outages(ctx context.Context, q audit.OutagesQuery) (audit.OutagesResult, error)
	// RankStats returns token usage, waiting and throughput statistics per
	// (worker, rank), ordered by (WorkerAddr, DPRank).
	RankStats(ctx context.Context, q audit.RankStatsQuery) (audit.RankStatsResult, error)
	// Gaps returns the spans with nothing recorded for longer than twice the
	// history interval, and each change of source instance (a restart).
	Gaps(ctx context.Context, q audit.GapsQuery) (audit.GapsResult, error)
	// Imbalance returns the maximal runs of reports whose token_usage spread
	// across ranks (max − min) exceeds a threshold.
	Imbalance(ctx context.Context, q audit.ImbalanceQuery) (audit.ImbalanceResult, error)
}

// HistoryChart summarises a window's reports in time buckets for the
// history page's charts, in the store, so a page reads a few hundred rows
// however long the window (reading the reports took 11.8 s for 14 h of a
// busy worker). Both stores implement it; the RPC client does not, as no
// RPC serves charts.
type HistoryChart interface {
	Chart(ctx context.Context, q audit.ChartQuery) (audit.ChartResult, error)
}

// RecorderObserver learns what the history recorder does (metrics, logs,
// tests). Calls come from the recorder's writer goroutine, except Dropped,
// which may also come from whoever calls Record (the fire loop): return
// quickly and never call back into the recorder.
type RecorderObserver interface {
	// Written says the store accepted a batch of n reports in took; lag is
	// the age of its oldest report (time from Record to stored).
	Written(n int, lag, took time.Duration)
	// WriteFailed says an Append attempt failed. retryIn is the backoff
	// before the same batch is tried again; 0 when it will not be (the store
	// rejected it as invalid, or the recorder is giving up at Close).
	WriteFailed(err error, retryIn time.Duration)
	// Split says a write of n reports timed out (it is also a
	// WriteFailed), so the recorder writes smaller batches from now on,
	// until writes succeed again.
	Split(n int)
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

// DropReasons lists every reason, for metrics that start each at 0.
func DropReasons() []DropReason { return []DropReason{DropBufferFull, DropRejected, DropClosed} }
