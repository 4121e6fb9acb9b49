// Package web is the operator's dashboard (docs/operations.md): the live page, the
// history page and the audit page, server-rendered with templ (package
// web/views), plus their embedded static assets.
//
// Routes (see Handler.Register):
//
//	GET /{$}        live view of the latest report; updates in the browser
//	                through loadreporter.v1.WatchService/Watch (static/live.js)
//	GET /history    window picker, token-usage, waiting (small multiples
//	                past four ranks) and imbalance charts (SVG) with the
//	                outages shaded, status timeline, paged table of reports
//	GET /audit      the audit queries as a GET form, results as a table
//	                (rank-stats also as bars per rank)
//	GET /audit.csv  the same query as CSV (attachment)
//	GET /static/…   style.css, live.js and fleet.js, embedded (Static; the
//	                fleet command serves them too, for its page)
//
// Handlers read the live state through LiveSource and the history through
// ports.HistoryQuery, turn what they get into view models of formatted
// strings, and render. History and audit pages work without JavaScript.
// The history page's charts ask the store for the window in buckets
// (ports.HistoryChart, audit.ChartQuery), so a page reads a bounded answer
// however long the window; the live page asks it for its rank cards'
// sparklines (the last five minutes in 30 buckets, bounded by a second).
//
// live.js and fleet.js (the fleet command's page, streaming
// loadreporter.v1.FleetService/WatchFleet) are built from web/live
// (TypeScript, the Connect web client generated from our protos by
// protoc-gen-es, bundled by esbuild) by `make generate`, and committed, so
// `go build` needs no Node. It calls Watch on
// the page's own origin and sends no credentials: with --auth-token the
// RPC is refused and the page stays as the server rendered it (it reloads
// itself only when JavaScript is off).
//
// The live page exposes these data-testid attributes to scripts, browser
// tests and probes: live, report-status (text HEALTHY, STALE, UNREACHABLE or
// NO REPORT; data-status healthy, stale, unreachable or none), live-indicator
// (data-state off, connecting, live or reconnecting), report-age
// (data-unix-ms), snapshot-age (the oldest rank's snapshot; data-lag-ms
// behind the report, class stale when it made the report STALE),
// report-sequence, report-time, report-error (hidden when empty;
// data-status as report-status), routers-connected, worker, worker-addr,
// worker-type, worker-model, worker-zone, report-source, rank-cards,
// rank-cards-empty, and one rank-card-<dp_rank> per rank (data-rank)
// holding rank-id, rank-age (data-lag-ms), rank-kv-usage, rank-kv-bar,
// rank-kv-tokens, rank-spark (data-points) with rank-spark-kv,
// rank-spark-waiting (SVG paths), rank-spark-span and rank-spark-peak,
// rank-running, rank-waiting, rank-waiting-tokens, rank-throughput,
// rank-cache-hit-rate and rank-utilization.
//
// The history page's charts are chart-token-usage, chart-waiting (its
// small multiples waiting-rank-<dp_rank>) and chart-imbalance (its line
// series-spread, its threshold chart-threshold), each with its outages
// as chart-outage bands; the audit page's bars are rank-bars, one
// rank-bar per row (data-rank, data-worker).
//
// The fleet command's page is a view of this package too (views.Fleet,
// its model made by cmd/loadreporter/fleet), in the same frame and
// stylesheet with its own header (Page.Brand, Page.Nav).
//
// web must not know adapters, transports or the wiring: it imports domain,
// ports, templ and its own packages only. It owns the LiveSource interface
// it consumes; whoever composes the process adapts the fire loop to it.
package web
