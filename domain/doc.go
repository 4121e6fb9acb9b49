// Package domain is the pure core of loadreporter: per-rank load, snapshot
// validation, the report builder with its HEALTHY / STALE / UNREACHABLE rules,
// the worker identity and the one error model every layer shares.
//
// It must not know about transports, databases, engines or wall-clock time:
// no I/O, no goroutines, no time.Now(). Time comes in as an argument.
package domain
