// Package orca serves xds.service.orca.v3.OpenRcaService/StreamCoreMetrics
// (ORCA, gRPC proposal A51) on the reporter's one port, so stock clients of
// out-of-band ORCA — gRPC's weighted_round_robin with enableOobLoadReport
// (grpc-go, grpc-java, grpc-c++), Envoy's client_side_weighted_round_robin
// where it supports enable_oob_load_report — weigh this worker by the load
// the fire loop already pulls.
//
// An ORCA stream is a session like any other (session.KindORCA, "orca" in
// metrics): it shares the fire loop's pulls and receives the very report
// every due Monitor and Watch session receives, it counts against
// max-sessions, and it holds no lease — the stream's life is the session's
// life. Its report_interval is clamped into the session limits, as grpc-go's
// ORCA service does with its minimum: absent or 0 s gets
// Options.DefaultInterval (1 s), anything shorter than
// --min-report-interval (negative too) is raised to it, anything longer
// than --max-report-interval is lowered to it, and only a malformed
// Duration is refused (INVALID_ARGUMENT). request_cost_names is ignored:
// the worker tracks no per-request costs.
//
// Each report is mapped (mapping.go) and encoded once per fire, whatever
// the number of streams (codec.go).
//
// The mapping, HEALTHY:
//
//   - application_utilization and cpu_utilization: the busiest rank's
//     token_usage (KV-cache usage), at least 0.01. KV cache is what an LLM
//     engine runs out of first; when a rank's cache is full the engine
//     queues or preempts, and a worker's data-parallel controller spreads
//     requests over all its ranks (round robin by default in SGLang), so
//     the busiest rank is where new requests start to wait. Every source
//     reports it (SGLang and vLLM alike). The
//     floor exists because ORCA clients read 0 as "no report" and would keep
//     the previous weight. cpu_utilization carries the same value for
//     clients that predate application_utilization; it is not the host's
//     CPU.
//   - rps_fractional: Options.NominalRPS (default 1), a constant, not a
//     measurement: the engine publishes no request rate (gen_throughput is
//     tokens/s) and WRR ignores a report without rps. With a constant rps,
//     WRR's weight rps/utilization becomes NominalRPS/utilization: workers
//     are weighed by how full their busiest rank is, and NominalRPS can
//     carry a worker's relative capacity (for example its rank count).
//   - eps: 0.
//   - utilization["kv_cache"]: the busiest rank's token_usage in [0, 1].
//   - named_metrics: status (1 HEALTHY, 2 STALE, 3 UNREACHABLE, the
//     ReportStatus numbers), ranks, snapshot_age_ms (age of the oldest rank
//     when the report was built), running, waiting and gen_throughput
//     (tokens/s) summed over ranks, and per rank N: rank.N.token_usage,
//     rank.N.running, rank.N.waiting, rank.N.gen_throughput,
//     rank.N.cache_hit_rate.
//
// STALE: the same named metrics and utilization map (the numbers as the
// engine last published them, marked by status 2), but
// application_utilization and cpu_utilization are 1: numbers that old
// cannot be trusted, so the worker weighs as a full one.
//
// UNREACHABLE: application_utilization and cpu_utilization 1, eps =
// rps_fractional (every request is expected to fail), named_metrics status
// 3 and ranks 0, no utilization map. WRR's weight rps/(utilization +
// eps/rps × errorUtilizationPenalty) is then NominalRPS/2 with the default
// penalty of 1: half that of a full HEALTHY worker. Sending nothing, or a
// zero utilization, would instead keep the worker's last weight for WRR's
// weight expiration period (3 min by default).
//
// The package reaches the core only through Core (New adapts
// *fireloop.Loop to it) and Stream (*fireloop.Subscription). It must not know how
// snapshots are pulled, validated or scheduled, the rules of sessions (the
// core enforces max-sessions and the interval limits; the handler relays
// its codes), nor how the server is assembled: routing, TLS, the bearer
// token, gRPC health and reflection belong to cmd/loadreporter.
package orca
