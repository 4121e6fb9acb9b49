// Package audittable turns the answers of the audit queries (docs/history.md:
// reports, outages, rank-stats, gaps, imbalance, asked through
// ports.HistoryQuery) into tables of typed cells, and writes those tables
// as CSV, JSON and aligned text.
//
// It is the one place that decides an audit result's columns, their
// machine-readable values (RFC 3339 times to the millisecond, plain
// numbers, durations in whole milliseconds) and how people read them, so
// that the dashboard's page and CSV download and the `loadreporter audit`
// command show the same columns and write the same CSV and JSON, byte for
// byte, whether the answer came from a store or over the RPC.
//
// It must not know HTTP, templ, flags or any adapter: it imports domain,
// ports and the standard library only. Callers parse their own input (a
// form, a command line) into a Query, and lay a Table out their own way;
// CSS classes, links and page summaries belong to package web.
package audittable
