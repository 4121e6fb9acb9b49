// Package domain is the pure core of loadreporter: per-rank load (load.go),
// snapshot validation (validate.go), the report-status rules — HEALTHY,
// STALE, UNREACHABLE — and the report builder (status.go), the worker
// identity and the report itself (report.go), and the one error model every
// layer shares (error.go, text.go).
//
// Its subpackages: fireloop (the one timer, one pull per fire, fan-out),
// session (the session table, leases, schedules, outboxes), recorder (the
// history writer), audit (the audit queries).
//
// It must not know about transports, databases, engines or wall-clock time:
// no I/O, no goroutines, no time.Now(). Time comes in as an argument.
package domain
