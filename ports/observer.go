package ports

import (
	"time"

	"github.com/loadreporter/loadreporter/domain"
)

// PullOutcome classifies one fire's pull.
type PullOutcome string

// Pull outcomes.
const (
	PullOK        PullOutcome = "ok"
	PullError     PullOutcome = "error"
	PullTimeout   PullOutcome = "timeout"
	PullInvalid   PullOutcome = "invalid"
	PullRankSet   PullOutcome = "rank_set_changed"
	PullCancelled PullOutcome = "cancelled"
)

// FireResult is what one fire did.
type FireResult struct {
	Report  *domain.Report
	Outcome PullOutcome
	// Attempts is 1, or 2 when the rank set changed and the pull was retried.
	Attempts int
	// Lateness is how long after the earliest due deadline the pull
	// started: timer slack, a busy loop, a starved process.
	Lateness     time.Duration
	PullDuration time.Duration
	// Delivered and Dropped count sessions per kind name ("monitor", …);
	// Dropped counts those whose unread report was replaced (latest wins).
	Delivered map[string]int
	Dropped   map[string]int
}

// FireObserver receives the fire loop's observations (metrics, logs,
// tests). Calls come from the fire loop itself: return quickly.
type FireObserver interface {
	Fired(FireResult)
	// SessionsChanged reports the live session count per kind name.
	SessionsChanged(counts map[string]int)
}

// PullOutcomes lists every outcome, for metrics that start each at 0.
func PullOutcomes() []PullOutcome {
	return []PullOutcome{PullOK, PullError, PullTimeout, PullInvalid, PullRankSet, PullCancelled}
}
