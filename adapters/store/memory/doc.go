// Package memory keeps report history in memory, bounded, so history and
// audit queries work with no database (docs/history.md, the default). It implements
// ports.HistoryStore and ports.HistoryQuery with the same semantics as the
// PostgreSQL store (both pass porttest.HistoryStore), and, like it, answers
// the dashboard's charts (Chart, see audit.ChartQuery); when full it evicts
// the oldest reports first.
//
// It must not know about the fire loop, transports or the recorder that
// writes to it; it keeps nothing across restarts.
package memory
