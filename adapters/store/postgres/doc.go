// Package postgres keeps report history in PostgreSQL through pgx and
// answers the audit queries in SQL (SPEC §5). It implements
// ports.HistoryStore and ports.HistoryQuery and applies the embedded
// migrations of package migrations with goose (Migrate), taking over a
// schema that the runner before goose migrated.
//
// Reports go to two tables range-partitioned by report_time into UTC days;
// the store creates the partitions a batch needs before writing it, and
// retention drops whole partitions. A batch is one statement in one
// transaction: INSERT … SELECT FROM unnest(arrays) ON CONFLICT DO NOTHING
// for the reports, and the ranks of the reports actually inserted, so a
// retried batch never duplicates anything. Audit queries are computed by
// the database (window functions for runs and gaps, percentile_cont), and
// every value from a query is a bind parameter; the only text the store
// builds into SQL is partition names and bounds, made from a date it
// formats itself, and the names of its own tables.
//
// The store needs only transactions from its database (DB): a
// *pgxpool.Pool fits, and Open makes one. Migrate hands goose a
// database/sql view of a *pgxpool.Pool or *pgx.Conn.
//
// Files follow the paths through the package: store.go (Open, New, Ping),
// append.go (the write path), partition.go (daily partitions),
// retention.go (DeleteBefore), query.go (what the audit queries share) and
// one query_*.go per audit query, migrate*.go (goose, and taking over
// from the runner before it).
//
// It must not know about the fire loop, transports or the recorder that
// calls it, and it must not decide policy (retention period, history
// interval): callers pass those in.
package postgres
