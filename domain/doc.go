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
// Package domain itself must not know about transports, databases, engines
// or wall-clock time: no I/O, no goroutines, no time.Now(); time comes in as
// an argument, and it imports only the standard library. Of the
// subpackages, session and audit are pure too; fireloop and recorder run
// goroutines once started, and reach the outside only through ports (time
// through ports.Clock).
package domain
