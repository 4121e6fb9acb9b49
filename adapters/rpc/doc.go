// Package rpc is the Connect adapter: every RPC the reporter serves on its
// one port, each answering gRPC, gRPC-Web and Connect from one handler, and
// the one client it dials.
//
//   - Monitor serves sglang.router.loadmonitor.v1.LoadMonitorService/Monitor,
//     the published stream routers use (docs/routers.md): register, reports,
//     keep_alive, update_config, stop. Protocol errors travel as a final
//     StreamError frame and the stream ends with status OK. Its codecs
//     encode each report once per fire instead of once per router.
//   - Watch serves loadreporter.v1.WatchService: live reports for browsers,
//     as a session kind of its own.
//   - History serves loadreporter.v1.HistoryService: the unary history and
//     audit queries, over a ports.HistoryQuery.
//   - Admin serves loadreporter.v1.AdminService: the simulated engine's
//     failure modes and the expected rank set. It logs every call (who,
//     what, how it ended) and, given an admin token, refuses every other
//     token, so the tokens routers hold cannot change the reporter.
//   - HistoryClient is ports.HistoryQuery over a remote HistoryService, so
//     the audit command asks a running reporter what its dashboard asks.
//
// NewNativeServer is the same services on grpc-go's own transport, for
// the port's native gRPC connections: every call is handed to the port's
// HTTP handler as an HTTP/2 request (so its checks and bounds are the
// same), and Monitor, finding the call in the request's context, serves
// the grpc-go stream itself: one Monitor, two ways in. It does so once
// the port's handler returned, so that every open stream waits a few
// frames down its goroutine's stack, not under every handler of the
// chain: the chain admits the stream, and a handler of it that works
// after its handler returned does that through afterResponse (as
// WithTransportInfo and BoundWritesAtShutdown do), else before the
// stream ends; the stream keeps the values the chain put in its
// context, not the chain's end of it. Its writer holds
// one frame in flight per stream there too (grpc-go says when it is done
// with a buffer), and a pump of a few goroutines does those sends.
// PooledReads makes the connections it is served on, handed over with
// bytes to replay, read as grpc-go reads a bare TCP connection: into
// pooled buffers taken only once bytes are there, so an idle connection
// holds none.
//
// Alongside them: the mapping between domain reports and wire messages; the
// one table between domain error codes and Connect codes, which servers
// and HistoryClient both read; the codecs every handler uses, which refuse
// enum values the API does not define (unknown fields stay tolerated); and
// WithTransportInfo, the HTTP middleware that hands the handlers what
// connect does not (the stream's read and write deadlines, the TLS
// state), with BoundWritesAtShutdown, which bounds every other stream's
// last writes at shutdown as Monitor bounds its own, and Stalls, which ends
// a stream whose write stays blocked (Watch and ORCA hold no lease; a
// router's lease lives on when only its reports are lost).
//
// A registered Monitor stream holds one goroutine, its handler's, which
// reads the router's frames, on both ways in; its reports are written by a
// goroutine that runs only while the session's outbox holds something,
// and the handler's read is woken when that goroutine ended the stream:
// on net/http by a read deadline in the past, on grpc-go's server by
// ending the stream with the status the handler returns (a failed read
// there would end it with its own, and the last frame must be followed by
// OK).
//
// A Monitor stream costs the reporter a bounded amount whatever the router
// does (MonitorOptions): it must register within FirstFrameTimeout, it may
// send only so many frames (a token bucket per stream, spent by the
// goroutine that reads them), and once its session ended, its handler
// stops, or (through BoundWritesAtShutdown) the reporter shuts down, no
// send waits longer than FinalWriteTimeout for a router that does not
// read: a router that stops reading holds its stream only while its lease
// lives, and no send waits longer than the Stalls bound.
//
// The package reaches the core only through the small interfaces it
// declares (Registrar and its RouterSession, made of the writer's Outbox
// and the reader's Controls; Subscriber, Topology, SimControl)
// and ports.HistoryQuery. It must not know how snapshots are pulled,
// scheduled or validated, the rules of sessions and leases (the core
// enforces them; handlers relay the core's codes), which store holds the
// history, nor how the server is assembled: routing, TLS and the bearer
// token every RPC needs belong to cmd/loadreporter, in front of these
// handlers (only AdminService's own, stricter token is checked here).
package rpc
