// Package audit defines, as pure functions over reports, the notions the
// audit queries are made of (SPEC §5): a maximal run of consecutive reports
// of one worker (outages, imbalance), the token_usage spread of a report,
// and the continuous percentile. The in-memory store computes its answers
// with them; the PostgreSQL store computes the same in SQL, and the shared
// contract suite (ports/porttest) holds both to one set of answers.
//
// Like the rest of domain it does no I/O, runs no goroutines and never
// reads the clock; it must not know about ports or stores.
package audit
