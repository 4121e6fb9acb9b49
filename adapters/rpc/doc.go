// Package rpc is the Connect adapter: every RPC the reporter serves on its
// one port, each answering gRPC, gRPC-Web and Connect from one handler, and
// the one client it dials.
//
//   - Monitor serves sglang.router.loadmonitor.v1.LoadMonitorService/Monitor,
//     the published stream routers use (SPEC §1 and §2): register, reports,
//     keep_alive, update_config, stop. Protocol errors travel as a final
//     StreamError frame and the stream ends with status OK. Its codecs
//     encode each report once per fire instead of once per router.
//   - Watch serves loadreporter.v1.WatchService: live reports for browsers,
//     as a session kind of its own.
//   - History serves loadreporter.v1.HistoryService: the unary history and
//     audit queries, over a ports.HistoryQuery.
//   - Admin serves loadreporter.v1.AdminService: the simulated engine's
//     failure modes and the expected rank set.
//   - HistoryClient is ports.HistoryQuery over a remote HistoryService, so
//     the audit command asks a running reporter what its dashboard asks.
//
// Alongside them: the mapping between domain reports and wire messages, and
// the one table between domain error codes and Connect codes, which servers
// and HistoryClient both read.
//
// The package reaches the core only through the small interfaces it
// declares (Registrar and RouterSession, Subscriber, Topology, SimControl)
// and ports.HistoryQuery. It must not know how snapshots are pulled,
// scheduled or validated, the rules of sessions and leases (the core
// enforces them; handlers relay the core's codes), which store holds the
// history, nor how the server is assembled: routing, TLS and bearer-token
// checks belong to cmd/loadreporter, in front of these handlers.
package rpc
