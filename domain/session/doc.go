// Package session holds the pure rules of report sessions (docs/routers.md): limits
// and validation of router requests, leases, the two deadline schedules, the
// session table with replacement by router_id (indexed by deadline, so
// that a fire costs what is due, not what the table holds), and the
// capacity-1 latest-wins outbox each session reads its reports from.
//
// It must not know about transports, clocks or goroutines: every method takes
// the current time as an argument, and the table is not safe for concurrent
// use (its owner, the fire loop, serializes access).
package session
