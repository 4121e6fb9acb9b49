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
// A Fleet watches many workers (Add and Remove at run time). Fleet.Pick(n)
// chooses up to n workers by the power of two choices over Score, among the
// Fresh views only; when no view is Fresh it picks from the best state
// present and says Degraded. Per rank,
//
//	(num_running_reqs + num_waiting_reqs) / max(1, max_running_requests)
//	  + num_waiting_uncached_tokens / max(1, max_total_num_tokens)
//
// and a worker scores the mean over its ranks (see Score); lower wins.
// Fleet.Subscribe signals every change (a new view of any worker, a worker
// added or removed), for whoever shows the whole fleet.
//
// # Metrics
//
// With Options.Registerer set, the client exports, per worker:
// loadreporter_client_worker_state{worker,state} (one-hot),
// loadreporter_client_report_age_seconds{worker},
// loadreporter_client_reconnects_total{worker,reason} and
// loadreporter_client_rejected_reports_total{worker,reason}. Give each
// address to one Worker per Registerer.
//
// # What it must not know
//
// This package is what a router imports. It knows the wire contract (the
// generated types in gen/) and nothing of the worker's insides: it imports
// no domain/, ports/, adapters/, web/ or cmd/ package, only the standard
// library, gen/, connect, protobuf and the Prometheus client. It routes no
// request and keeps no history: it says which worker, the router sends.
package client
