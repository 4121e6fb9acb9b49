// Package fleet is `loadreporter fleet`: a router-side view of many
// workers. It watches each target through package client (one Monitor
// stream per worker, as a router holds) and serves, on its own port,
//
//   - GET /v1/fleet/loads: every worker's latest report in the /v1/loads
//     envelope (adapters/pollapi's types), with the client's State for it,
//     the report's age on our clock, and an aggregate over the Fresh
//     workers only;
//   - GET /: the fleet's dashboard (web/views' Fleet, in the worker's
//     pages' stylesheet and frame): the aggregate, then one row per worker
//     with the figures a router picks on (state, age, running, waiting,
//     KV usage per rank, throughput, model, zone, engine address, the
//     client's pending dispatches), linking to the worker's own dashboard;
//     its script (web/static/fleet.js, served at /static/) follows the
//     stream below and updates each row in place, never polling, and sorts
//     and filters the rows; without it the table shows every worker;
//   - loadreporter.v1.FleetService/WatchFleet: a server stream (Connect
//     over HTTP/1.1 as the page uses it; gRPC over unencrypted HTTP/2)
//     that sends every worker's view, then each view again when the
//     fleet's subscription (client.Fleet.Subscribe) says it changed or its
//     pending dispatches did, with the aggregate in every message.
//
// The fleet command itself never picks, so the pending counts are zero
// unless a router embeds the view and picks through Main.Fleet.
//
// Its port is bounded as serve's is, by the same code and flags
// (cmd/loadreporter/internal/serving, adapters/rpc's Stalls): at most
// --max-watch-sessions live WatchFleet streams (one more is refused with
// RESOURCE_EXHAUSTED); a stream, page or answer whose reader stops reading
// is cut after --stalled-write-timeout; HTTP/2 streams per connection,
// pings, header and body timeouts and the 64 KiB request bound are
// serve's. Shutting down ends every stream at once and cuts a reader that
// does not read within --final-write-timeout, all within
// --shutdown-grace; that is a clean exit. Its log is serve's
// (--log-format, --log-level), and the lines about workers connecting and
// losing their streams are bounded however many flap (workerLog).
//
// It judges nothing itself: State, Reason and staleness are the client's.
// To serve each worker's report in the very /v1/loads shape the worker
// serves, it borrows that code rather than copying it, so the two cannot
// drift: adapters/rpc turns the wire report into a domain.Report,
// adapters/pollapi renders it as the envelope and aggregates the ranks,
// and package domain lends only the Report and RankLoad types they pass
// between them. It must still not know how a worker runs (no ports/, no
// domain subpackage, no app): it sees workers only through the wire
// contract, as any router does.
package fleet
