// Package sglanggrpc is the snapshot source for an SGLang engine's gRPC
// scheduler service (docs/sources.md, source "sglang-grpc"): one unary call of
// sglang.grpc.scheduler.SglangScheduler/GetLoads with include ["core"] per
// pull.
//
// The call is made with connect-go speaking the gRPC protocol over plaintext
// HTTP/2 (h2c), through one client that every pull reuses, so the engine sees
// one long-lived connection. The messages come from our own
// proto/sglang/grpc/scheduler/scheduler.proto, a subset of SGLang's with the
// engine's names and field numbers.
//
// SchedulerLoad carries int32 counters; they are widened to RankLoad's int64
// exactly, so a negative value stays negative and domain.ValidateSnapshot
// rejects it naming rank and field. The gRPC message publishes less than
// SGLang's HTTP /v1/loads:
//
//	RankLoad field               from SchedulerLoad
//	---------------------------  -----------------------------------------------------------
//	dp_rank                      1 dp_rank
//	num_running_reqs             2 num_running_reqs
//	num_waiting_reqs             3 num_waiting_reqs
//	num_used_tokens              5 num_used_tokens
//	max_total_num_tokens         6 max_total_num_tokens
//	token_usage                  7 token_usage
//	gen_throughput               8 gen_throughput
//	cache_hit_rate               9 cache_hit_rate
//	utilization                  10 utilization
//	max_running_requests         11 max_running_requests
//	num_waiting_uncached_tokens  17 num_waiting_uncached_tokens; engines that predate the field
//	                             do not send it, which reads as 0
//	num_total_tokens             not published: 0
//	snapshot time                not published: zero, so the report uses the pull-completion time
//	(none)                       4 num_total_reqs is read but has no RankLoad field
//
// The response's envelope timestamp (when the response was made, as an ISO
// 8601 string) is not a per-rank sampling time and is not read.
//
// A failed pull says in one line what went wrong: the gRPC status code and
// the engine's message ("GetLoads 127.0.0.1:30001: unimplemented: …"), the
// transport's cause ("… unavailable: connection refused"), a timeout, or an
// empty loads list.
//
// It must not know about the fire loop, the pull budget (that arrives as the
// context's deadline or cancellation), the expected rank set, sessions or
// transports to routers. Whether a snapshot is consistent (negative
// counters, used > max, non-finite ratios, duplicate or missing ranks) is
// judged by domain.ValidateSnapshot, not here.
//
// Name, Options and New are its row in serve's source registry
// (cmd/loadreporter/app/sources.go; docs/adding-a-source.md); it has no
// flags beyond the engine settings every source shares.
package sglanggrpc
