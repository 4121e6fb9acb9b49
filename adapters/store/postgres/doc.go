// Package postgres keeps report history in PostgreSQL through pgx and
// answers the audit queries (docs/history.md). It implements ports.HistoryStore
// and ports.HistoryQuery and applies the embedded migrations of package
// migrations with goose (Migrate).
//
// A report is one row of history_reports, its ranks packed in it (a
// bytea of fixed-width records, see pack.go; binary COPY passes a bytea
// through where an array costs the server a call per element).
// Beside the reports the store keeps rollups, written in the same
// transaction as the reports they summarise: history_minutes (per worker
// and UTC minute: counts, first and last report, statuses, largest step,
// spread range), history_minute_entries (per report of such a minute, the
// few columns runs and gaps need), history_minute_ranks (per worker and
// minute, each rank's sums and token_usage bounds, packed: a long window's
// rank statistics read one narrow row a minute) and
// history_rank_minute_usage (per worker, minute and rank, the minute's
// token_usage values in order, read only for the minutes whose bounds
// cannot settle the 95th percentile). Every table is range-partitioned
// into UTC days; the store creates the partitions a batch needs before
// writing it, and retention drops a day of reports and rollups together.
//
// Append writes the reports with one COPY (when a retried batch holds
// reports already stored, the COPY fails on the primary key and the
// missing reports are written instead), takes a lock per worker of what it
// wrote (so one transaction at a time merges a worker's minutes), then
// reads the rollup rows of those minutes, merges the new reports into them
// in Go and writes them back. Reports pages read history_reports; the
// other audit queries read the rollups: minutes that lie inside the window
// and are uniform for the question are used whole (and those that cannot
// change the answer are left out), the others (and those the window cuts)
// report by report; the minutes the window cuts are read from
// history_reports for rank statistics and for the dashboard's charts
// (Chart, see audit.ChartQuery), which count the minutes wholly inside
// the window from history_minutes and history_minute_ranks. Every value from a query is a
// bind parameter; the only text the store builds into SQL is partition
// names and bounds, made from a date it formats itself, and the names of
// its own tables.
//
// A session whose client vanished unseen (a partition) must not hold a
// worker's lock for long: Open gives every session TCP keepalives at both
// ends and an idle_in_transaction_session_timeout, so the server ends such
// a session and frees its locks, and Append bounds its transaction's lock
// waits (lock_timeout) and statements (statement_timeout), so a write
// stuck behind another session fails with that cause and is retried.
//
// The store needs only transactions from its database (DB): a
// *pgxpool.Pool fits, and Open makes one. Migrate hands goose a
// database/sql view of a *pgxpool.Pool or *pgx.Conn.
//
// Files follow the paths through the package: store.go (Open, New,
// Ping), append.go and copy.go (the write path), pack.go (packed
// columns), rollup.go and rollup_sql.go (the rollups, computed and
// stored), partition.go (daily partitions), retention.go (DeleteBefore),
// query.go and timeline.go (what the audit queries share), percentile.go
// (the exact percentile from minute bounds), one query_*.go per audit
// query (query_chart.go: the charts), migrate.go (goose) and startup.go
// (Startup: bringing the database up at a service's start without waiting
// on it, migrating in the background with backoff while it does not
// answer).
//
// It must not know about the fire loop, transports, flags or the recorder
// that calls it, and it must not decide policy (retention period, history
// interval, how long a service waits at start): callers pass those in,
// Startup's waits having defaults.
package postgres
