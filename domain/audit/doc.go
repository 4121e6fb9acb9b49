// Package audit defines the audit queries over the recorded history
// (docs/history.md): their arguments and validation (query.go), their answers
// (result.go), the cursor that pages through reports (cursor.go), the status
// names they accept (status.go), the dashboard's chart of a window in
// buckets (chart.go), and, as pure functions over reports, the
// notions they are made of (runs.go): a maximal run of consecutive reports of
// one worker (outages, imbalance), the token_usage spread of a report and the
// continuous percentile.
//
// Every history store answers with these types: the in-memory store computes
// its answers with the functions here, the PostgreSQL store computes the same
// in SQL, and the shared contract suite (ports/porttest) holds both to one
// set of answers.
//
// Like the rest of domain it does no I/O, runs no goroutines and never reads
// the clock; it must not know about ports, stores or transports.
package audit
