// Package fleet is `loadreporter fleet`: a router-side view of many
// workers. It watches each target through package client (one Monitor
// stream per worker, as a router holds) and serves, on its own port,
//
//   - GET /v1/fleet/loads: every worker's latest report in the /v1/loads
//     envelope (adapters/pollapi's types), with the client's State for it,
//     the report's age on our clock, and an aggregate over the Fresh
//     workers only;
//   - GET /: a live page, one row per worker with its state, report age
//     and per-rank KV-usage bars, linking to the worker's own dashboard.
//
// It judges nothing itself: State, Reason and staleness are the client's.
// It must not know a worker's insides (no domain/, ports/ or app): it sees
// workers only through the wire contract, as any router does.
package fleet
