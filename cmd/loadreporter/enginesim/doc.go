// Package enginesim is `loadreporter engine-sim`: a simulated SGLang
// engine that serves requests, for tests, benchmarks and a user's own
// router where no GPU is at hand. Everything around it sees SGLang: the
// same routes, JSON shapes, SSE framing, Prometheus names and ZMQ load
// sockets; behind them the timing model of package model runs on the
// machine's clock (or an injected one).
//
// What it serves, on one HTTP port:
//
//   - POST /generate (SGLang's native API): one prompt as text or
//     input_ids, sampling_params.max_new_tokens, stream. Not streaming: one
//     JSON answer {text, output_ids, meta_info}. Streaming: one
//     "data: {…}" event per token, each with the text so far, flushed as
//     the engine produces it, then "data: [DONE]";
//   - POST /v1/chat/completions (OpenAI's, in SGLang's shapes): the answer
//     with usage, or chat.completion.chunk events (role first, one per
//     token, the finish reason, usage when stream_options.include_usage),
//     then "data: [DONE]";
//   - GET /health and /health_generate (a one-token probe, as SGLang's),
//     /v1/models, /server_info and /get_server_info, /get_model_info,
//     /version;
//   - GET /v1/loads (SGLang's envelope and include groups) and /get_load,
//     from the engine's published snapshots and its live state
//     respectively. Each rank of /v1/loads leads with its own timestamp,
//     the time its snapshot was published on the engine's clock, in
//     seconds since the epoch as SGLang 0.5.19 and 0.5.23 send it
//     (sglang/srt/managers/load_snapshot.py in their PyPI wheels; also the
//     sglang_timestamp gauge of ?format=prometheus);
//   - GET /metrics in SGLang's names (sglang:num_running_reqs,
//     sglang:num_queue_reqs, sglang:token_usage, …; with --vllm-metrics
//     also vLLM's vllm:num_requests_running, … per engine label);
//   - with --grpc-listen, on a port of its own, SGLang's gRPC scheduler
//     service sglang.grpc.scheduler.SglangScheduler as an engine in gRPC
//     mode serves it: Generate (a stream of token chunks and a
//     GenerateComplete), HealthCheck, Abort, GetModelInfo, GetServerInfo
//     and GetLoads (the same snapshots and include groups as /v1/loads,
//     without the per-rank timestamp: SGLang's SchedulerLoad message has
//     no such field, sglang_scheduler.proto in smg-grpc-proto 0.4.28, the
//     package through which SGLang 0.5.23 serves gRPC);
//   - with --load-publish-endpoint, LoadStat on one ZMQ PUB socket per
//     rank, framed [topic, 8-byte big-endian sequence, msgpack
//     ["LoadStat", running, waiting, num_tokens, max_total_num_tokens,
//     rank]], changed values at once and unchanged ones every second,
//     advertised in /server_info's kv_events block.
//
// A request's prompt length comes from input_ids, or from its text at four
// characters a token (chat adds what Llama 3's template would); its output
// length is its max_new_tokens / max_tokens, or --default-max-tokens when
// it sets none (it then ends with finish reason "stop", as if the model
// had stopped). The output is a fixed stream of words. A client that goes
// away takes its request out of the batch and frees its KV tokens.
//
// It borrows nothing from the reporter's own code (adapters, pollapi): a
// stand-in engine that shared the consumers' code would agree with them
// even where both are wrong. It must not know about reporters, routers,
// sessions or the fire loop.
package enginesim
