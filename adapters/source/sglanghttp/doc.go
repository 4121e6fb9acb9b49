// Package sglanghttp is the snapshot source for an SGLang engine's HTTP
// endpoint GET <engine>/v1/loads?include=core (docs/sources.md, source
// "sglang-http").
//
// It turns one response into a domain.Snapshot and reports, in one line,
// what made a pull fail: the transport error, the HTTP status with a snippet
// of the body, a body over the size bound, malformed JSON, or a value that
// cannot be carried faithfully (a fractional float or an out-of-range number
// where the engine's field is an integer, naming rank and field).
//
// Both envelopes SGLang has served are accepted: the current one
// ({timestamp, version, accelerator, num_accelerators, loads}) and the older
// one that adds dp_rank_count and aggregate. Only dp_rank, the twelve core
// per-rank keys and the optional per-rank timestamp are read; every other key
// and nested section (memory, speculative, lora, disaggregation, queues, …)
// is ignored, and a core key that is absent or null reads as 0, because older
// engines lack num_waiting_uncached_tokens and num_total_tokens.
//
// The request itself (checking --engine-url, the bearer key, the kept-alive
// client, status, size bound, timeout and their messages) is
// internal/httpfetch's, shared with the vllm source; this package knows the
// endpoint and the JSON.
//
// It must not know about the fire loop, the pull budget (that arrives as the
// context's deadline or cancellation), the expected rank set, sessions or
// transports to routers. Whether a well-formed snapshot is consistent
// (negative counters, used > max, duplicate or missing ranks) is judged by
// domain.ValidateSnapshot, not here.
//
// Name, Options and New are its row in serve's source registry
// (cmd/loadreporter/app/sources.go; docs/adding-a-source.md); it has no
// flags beyond the engine settings every source shares.
package sglanghttp
