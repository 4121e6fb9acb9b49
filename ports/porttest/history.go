package porttest

import (
	"testing"

	"github.com/loadreporter/loadreporter/ports"
)

// Store is what the history contract exercises: a store that answers the
// audit queries and charts over what was appended to it.
type Store interface {
	ports.HistoryStore
	ports.HistoryQuery
	ports.HistoryChart
}

// HistoryStore runs the history contract. newStore must return a fresh,
// empty store on every call (each subtest makes its own, and subtests run in
// parallel) and release it through t.Cleanup.
func HistoryStore(t *testing.T, newStore func(t *testing.T) Store) {
	t.Run("AppendAndRoundTrip", func(t *testing.T) { t.Parallel(); testRoundTrip(t, newStore(t)) })
	t.Run("IdempotentAppend", func(t *testing.T) { t.Parallel(); testIdempotent(t, newStore(t)) })
	t.Run("AppendRejectsBadReports", func(t *testing.T) { t.Parallel(); testAppendErrors(t, newStore(t)) })
	t.Run("ConcurrentAppend", func(t *testing.T) { t.Parallel(); testConcurrentAppend(t, newStore(t)) })
	t.Run("ReportsFilters", func(t *testing.T) { t.Parallel(); testReportsFilters(t, loaded(t, newStore)) })
	t.Run("ReportsPaging", func(t *testing.T) { t.Parallel(); testPaging(t, loaded(t, newStore)) })
	t.Run("Outages", func(t *testing.T) { t.Parallel(); testOutages(t, loaded(t, newStore)) })
	t.Run("RankStats", func(t *testing.T) { t.Parallel(); testRankStats(t, loaded(t, newStore)) })
	t.Run("RankStatsSlowUsage", func(t *testing.T) { t.Parallel(); testRankStatsSlowUsage(t, newStore(t)) })
	t.Run("Gaps", func(t *testing.T) { t.Parallel(); testGaps(t, loaded(t, newStore)) })
	t.Run("Imbalance", func(t *testing.T) { t.Parallel(); testImbalance(t, loaded(t, newStore)) })
	t.Run("Chart", func(t *testing.T) { t.Parallel(); testChart(t, loaded(t, newStore)) })
	t.Run("EmptyWindow", func(t *testing.T) { t.Parallel(); testEmptyWindow(t, loaded(t, newStore)) })
	t.Run("ArgumentErrors", func(t *testing.T) { t.Parallel(); testArgumentErrors(t, newStore(t)) })
	t.Run("Retention", func(t *testing.T) { t.Parallel(); testRetention(t, newStore(t)) })
	t.Run("LongHistoryAgreesWithReference", func(t *testing.T) { t.Parallel(); testAgainstReference(t, newStore(t)) })
}
