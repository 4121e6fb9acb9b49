// Package client is the router's side of loadreporter: it keeps a Monitor
// stream (sglang.router.loadmonitor.v1.LoadMonitorService/Monitor) open to
// each engine worker, checks every report the way SGLang's router does, and
// tells a router which views it may route on and which worker to pick.
//
// # Workers
//
// Dial opens one Worker: it registers under Options.RouterID, sends a
// keep-alive every renew_after_ms of the worker's answer (the first at a
// random point of the second half of that period, so routers that
// registered together do not renew together), and on Close sends stop.
// What the answer says is bounded, so that no worker can make a router
// flood it or overflow: the granted lease is taken up to 24h (a lease of
// 0 or less as the one asked), and the keep-alive period is renew_after_ms
// kept within [max(100ms, lease/10), lease/2], the floor winning for a
// lease under 200ms. When a stream ends for any reason but a refused configuration
// (LEASE_EXPIRED, SHUTTING_DOWN, REPLACED, a transport error, nothing
// received for a lease and two report intervals) it reconnects after a jittered exponential Backoff
// and registers again under the same router_id, so the worker replaces the
// abandoned session. INVALID_ARGUMENT stops the Worker: Done is closed and
// Err says why. INVALID_FIRST_FRAME does not: the client always sends
// register first, so it means the register came too late.
//
// # Reports
//
// A report is accepted only if it passes ValidateReport and, when it comes
// from the same source_instance_id as the last accepted report, its
// sequence_id is higher; a report of another source_instance_id (the
// worker restarted) replaces the view and starts a new sequence, as
// SGLang's router does: only the latest instance is remembered, so two
// instances behind one address take turns. A rejected report changes nothing; Worker.Rejected
// and the metrics count it by RejectReason. A report of more than MaxRanks
// ranks, or a source_instance_id longer than MaxInstanceIDBytes, is
// rejected; a last_error longer than MaxLastErrorBytes, and a worker_addr,
// model or zone longer than MaxMetadataBytes, is cut, and the report kept.
// A stream error's message is cut as last_error is.
//
// # Freshness
//
// Each Worker publishes an immutable View (read with Worker.View, lock-free;
// or follow changes with Worker.Subscribe, latest wins). Its State is judged
// on receipt, on the client's clock:
//
//   - Disconnected: no registered stream;
//   - Unreachable: the latest report is UNREACHABLE;
//   - Stale: no report yet, none for more than StaleAfterIntervals report
//     intervals (default 3), the worker marked it STALE, or its oldest rank
//     was older than MaxSnapshotAge on arrival (default 10s; the only rule
//     that compares the worker's clock with ours);
//   - Fresh: otherwise.
//
// View.StateAt(now) turns a Fresh view Stale once its StaleAt has passed,
// even before the Worker republishes it, so a router never routes on a view
// that stopped arriving.
//
// View.Granted is what the worker granted: the report interval, the lease
// and renew_after_ms of its registered acknowledgement, replaced at each
// registration and kept current by UpdateConfig (whose lease the worker
// does not acknowledge: Grant.LeaseUnconfirmed).
//
// # Picking
//
// A Fleet watches many workers (Add and Remove at run time).
// Fleet.PickFor(req, n) (Pick(n) for a request of unknown size) chooses
// up to n workers by the best of d (Options.Choices, default 2: two
// workers drawn at random, the less loaded wins; 1 compares them all)
// over their scores, among the Fresh views only; when no view is Fresh it
// picks from the best state present and says Degraded.
//
// A worker's score (ScorePending) is in prompt tokens: the prefill a new
// request would find ahead of it. Per rank, with the router's pending
// requests R and their prompt tokens P spread evenly over the worker's N
// ranks,
//
//	num_waiting_uncached_tokens + P/N
//	  + RequestWeight × (num_running_reqs + num_waiting_reqs + R/N)
//
// with RequestWeight 1, and a worker scores the mean over its ranks;
// lower wins. An engine prefills before it decodes, one queued prompt
// after another, so what makes a request's time to first token is the
// prompts queued ahead of it: 8 192 tokens queued are some 0.8 s of an
// A100's prefill in front of whatever comes next, where a running request
// adds a fraction of a millisecond to each decode step. The request term
// orders workers whose queues are alike and still counts a pending
// request of unknown size. Tokens are compared as they are, so the score
// compares workers of one kind (one model on one accelerator).
//
// # Accounting
//
// A report is old by the time the next request comes, and between two
// reports every request a router sends would see the same one: with the
// least loaded over all, all of them go to one worker (Mitzenmacher, "How
// useful is old information?", 2000). So the Fleet also counts what its
// router sent (Options.Accounting, on by default). Each pick is a
// Dispatch on the first worker picked (PickResult.Dispatch; Fleet.Dispatch
// counts one sent elsewhere), pending until the router calls Done or the
// worker's reports count it, and added to the score as if the engine
// already held it (Request.PromptTokens, or Request.Tokens when the
// prompt is not given). The rules are Ledger's, one per worker, fed every
// report the Worker accepts: a rank the engine stamps counts what was
// sent before its stamp; a rank the reporter stamps with its pull
// (SGLang's /v1/loads stamps none) counts nothing new while its numbers
// stand still, since the engine republishes only after a prefill step or
// every 15 decode steps, and numbers that moved count what was sent
// before the last pull that showed the old ones. Worker.Pending reads a
// worker's counts; a worker removed from the fleet drops them. The
// comparison of an engine's stamp with a dispatch puts the worker's clock
// beside ours, as MaxSnapshotAge does.
//
// # What the accounting buys
//
// In the project's routing benchmark (make bench-route; its figures and
// how they were measured are in docs/performance.md), 8 simulated engines
// and 4 routers, push every 100 ms and best of two: the accounting lowers
// p99 time to first token by about a quarter at every load, to within
// ×1.09–1.20 of an oracle that sees the engines' true state (lognormal
// request sizes). What is left is what the other routers sent since the
// engine last published, which no router counts.
//
// # Metrics
//
// With Options.Registerer set, the client exports, per worker:
// loadreporter_client_worker_state{worker,state} (one-hot),
// loadreporter_client_report_age_seconds{worker},
// loadreporter_client_reconnects_total{worker,reason},
// loadreporter_client_rejected_reports_total{worker,reason} and, for the
// workers of a Fleet with accounting on,
// loadreporter_client_pending_requests{worker} and
// loadreporter_client_pending_tokens{worker}. Give each address to one
// Worker per Registerer.
//
// # What it must not know
//
// This package is what a router imports. It knows the wire contract (the
// generated types in gen/) and nothing of the worker's insides: it imports
// no domain/, ports/, adapters/, web/ or cmd/ package, only the standard
// library, gen/, connect, protobuf and the Prometheus client. It routes no
// request and keeps no history: it says which worker, the router sends.
package client
