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
// formats itself.
//
// The store needs only transactions from its database (DB): a
// *pgxpool.Pool fits, and Open makes one.
//
// It must not know about the fire loop, transports or the recorder that
// calls it, and it must not decide policy (retention period, history
// interval): callers pass those in.
package postgres
