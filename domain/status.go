package domain

import (
	"cmp"
	"fmt"
	"math"
	"time"
)

// Status says how far a report can be trusted. Values match the wire enum.
type Status int8

// Report statuses.
const (
	StatusUnspecified Status = iota
	StatusHealthy
	StatusStale
	StatusUnreachable
)

func (s Status) String() string {
	switch s {
	case StatusHealthy:
		return "HEALTHY"
	case StatusStale:
		return "STALE"
	case StatusUnreachable:
		return "UNREACHABLE"
	default:
		return "UNSPECIFIED"
	}
}

// ReportBuilder turns one pull's outcome into a Report (docs/routers.md).
type ReportBuilder struct {
	SourceInstanceID string
	Worker           Worker
	// StaleAfter is the largest rank age that is still HEALTHY.
	StaleAfter time.Duration
}

// MaxLastErrorBytes bounds a report's last_error: it goes to every router,
// poller, page, history row and log line, so whatever a source or engine
// said is cut to one line of this many bytes.
const MaxLastErrorBytes = 512

// Judge is the verdict on one pull: its own error when it failed, else the
// first problem ValidateSnapshot finds against expected (empty: accept any
// rank set); nil when snap may be reported.
func Judge(snap Snapshot, pullErr error, expected RankSet) error {
	if pullErr != nil {
		return pullErr
	}
	return ValidateSnapshot(snap, expected)
}

// Verdict is Judge, and then, for a snapshot Judge accepts, whether a
// rank is stamped too far after the pull completed (fromTheFuture).
func (b ReportBuilder) Verdict(snap Snapshot, pullErr error, expected RankSet, completedAt time.Time) error {
	if err := Judge(snap, pullErr, expected); err != nil {
		return err
	}
	return fromTheFuture(snap, completedAt, b.StaleAfter)
}

// Build makes report seq from one pull attempt that completed at
// completedAt: Verdict, then Report.
func (b ReportBuilder) Build(seq uint64, completedAt time.Time, snap Snapshot, pullErr error, expected RankSet) *Report {
	return b.Report(seq, completedAt, snap, b.Verdict(snap, pullErr, expected, completedAt))
}

// Report makes report seq from a judged pull (docs/routers.md): UNREACHABLE, with
// no ranks and the verdict as last_error, when verdict is set; otherwise
// HEALTHY, or STALE when the oldest rank is older than StaleAfter (an age
// equal to it is still HEALTHY).
//
// The builder keeps nothing between calls: a report never carries ranks from
// an earlier pull.
func (b ReportBuilder) Report(seq uint64, completedAt time.Time, snap Snapshot, verdict error) *Report {
	r := &Report{
		SourceInstanceID: b.SourceInstanceID,
		SequenceID:       seq,
		ReportTime:       completedAt,
		Worker:           b.Worker,
	}
	if verdict != nil {
		r.Status = StatusUnreachable
		// "…" counts against the bound; an error that says nothing
		// still says the pull failed (UNREACHABLE always has a reason).
		r.LastError = cmp.Or(Shorten(errorText(verdict), MaxLastErrorBytes-len("…")), "load snapshot pull failed (the source gave no reason)")
		return r
	}
	r.Ranks = sortedRanks(snap.Ranks, completedAt)
	if age := r.OldestSnapshotAge(); age > b.StaleAfter {
		r.Status = StatusStale
		r.LastError = fmt.Sprintf("load snapshot stale by %d ms", age.Milliseconds())
		return r
	}
	r.Status = StatusHealthy
	return r
}

// fromTheFuture refuses a snapshot with a rank stamped later than the
// pull's completion by more than stale_after (at least a second): its age
// would never grow past that stamp, so a frozen engine whose clock runs
// ahead, or a garbage stamp, would look fresh for as long as the skew
// lasts. A skew within the bound is taken as it is.
func fromTheFuture(snap Snapshot, completedAt time.Time, staleAfter time.Duration) error {
	limit := max(staleAfter, time.Second)
	for _, rk := range snap.Ranks {
		if ahead := rk.SnapshotTime.Sub(completedAt); ahead > limit {
			// Sub saturates at about 292 years; past that, say the date.
			by := ahead.Round(time.Millisecond).String()
			if ahead == math.MaxInt64 {
				by = "centuries (" + rk.SnapshotTime.UTC().Format(time.RFC3339) + ")"
			}
			return Errorf(CodeInvalidSnapshot, "rank %d: its snapshot time is %s ahead of the reporter's clock (more than %s): the engine's clock is off",
				rk.DPRank, by, limit)
		}
	}
	return nil
}
