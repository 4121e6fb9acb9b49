// Package porttest holds the contract suites of the ports and their fakes:
// a manually advanced Clock (clock.go), and one suite per
// port, run against every adapter that implements it (the in-memory and
// PostgreSQL history stores run HistoryStore, every source runs
// SnapshotSource), so adapters cannot drift apart.
//
// The history contract is HistoryStore (history.go) over one fixture
// (history_fixture.go), in a file per part: appending (history_append.go),
// reports and paging, outages, rank statistics, gaps, imbalance, empty
// windows and argument errors (history_args.go), and retention; and over a
// longer generated history (history_reference.go), appended out of order,
// whose every query must agree with a brute-force reference, so that
// stores that summarise time (by minute) are checked where minutes are
// whole, cut by the window, or uniform.
//
// The source contract is SnapshotSource (source.go): what every snapshot
// source keeps whatever its engine, run over every row of serve's source
// registry against stand-in engines that are healthy, dead, answering
// garbage or hung.
//
// It is test support: only _test.go files may import it. It must not know
// any adapter.
package porttest
