// Package model is the simulated engine's core: SGLang's scheduler
// reduced to its timing, with no goroutine, clock or I/O of its own. Time
// is an argument: Submit and Cancel happen at a given instant, NextEvent
// says when the next step ends, and Advance ends the steps due by a given
// instant. The HTTP server (package enginesim) drives it on the machine's
// clock; a benchmark drives the very same code in virtual time, as fast
// as it can.
//
// # What a rank does
//
// Each of DPSize ranks has its own queue, batch, KV cache and step clock;
// ranks never wait for each other. A rank runs steps back to back while it
// has work, and idles otherwise. A step is planned when it starts:
//
//   - a prefill step when any prompt can be prefilled: first the rest of a
//     partly prefilled prompt, then waiting requests in arrival order
//     while a running slot is free (MaxRunningRequests), the step's token
//     budget lasts (ChunkedPrefillSize; a longer prompt continues in the
//     next prefill step) and the KV cache can hold the request's whole
//     possible length (prompt + max_new_tokens) beside what the admitted
//     requests may still write (MaxTotalNumTokens). The first request that
//     does not fit stops admission: none overtakes another. The step that
//     ends a request's prefill also yields its first token;
//   - otherwise a decode step over every admitted request whose prompt is
//     prefilled: each gets one token.
//
// Prefill has priority, as in SGLang (whose mixed prefill-and-decode
// batches are off by default), so a stream of arrivals delays the tokens
// of the running requests.
//
// Step time grows with the batch:
//
//	prefill step = StepOverhead + PrefillPerToken × prompt tokens in the step
//	decode step  = StepOverhead + DecodePerSeq × sequences
//	             + DecodePer1kKVTokens × (KV tokens the sequences hold) / 1000
//
// A request finishes when it has MaxNewTokens tokens (there is no EOS) or
// is cancelled; either way it leaves the batch and its KV tokens are free
// for the next step's admissions. Every request's arrival, admission,
// first token and end are recorded (RequestStats: TTFT, queue wait,
// end-to-end).
//
// # What a rank publishes
//
// A rank keeps two snapshots of its load, refreshed at step ends as
// SGLang's scheduler refreshes them, so whoever reads them sees the
// engine's own staleness:
//
//   - the load snapshot (/v1/loads, GetLoads, the LoadStat socket): after
//     every prefill step, every LoadSnapshotPublishInterval-th decode
//     step, and when the rank goes idle (SGLang's
//     --load-snapshot-publish-interval, default 15 decode iterations,
//     "Prefill and idle always publish immediately": server_args.py in
//     sgl-project/sglang at 001067fffe33427bee0ed2f007fb7551a1d76b44);
//   - the metrics snapshot (/metrics): the same with DecodeLogInterval
//     (--decode-log-interval, default 40, same file).
//
// A snapshot is taken before the next step is planned: a request that
// arrived during a step shows as waiting. Live gives the load as it stands
// at the end of the last step, which no reader of a real engine gets
// except through the scheduler itself (SGLang's /get_load).
//
// # The defaults and where they come from
//
// DefaultParams is one Llama-3.1-8B-Instruct in bf16 per rank on one
// NVIDIA A100-SXM4-80GB, from the published figures of both and roofline
// arithmetic, not from a measurement:
//
//   - the model: 8.03 B parameters (16.06 GB in bf16); 32 layers, 8 KV
//     heads of 128, so one token's K and V take 2 × 32 × 8 × 128 × 2 B =
//     128 KiB; a 131 072-token context (ContextLength);
//   - the GPU: 2.039 TB/s of HBM bandwidth, 312 TFLOP/s of dense bf16;
//   - StepOverhead 9 ms: a decode step reads every weight once, 16.06 GB /
//     2.039 TB/s = 7.9 ms, plus about a millisecond of kernel launches,
//     sampling and scheduling;
//   - DecodePerSeq 0.1 ms: a sequence costs 2 FLOP per parameter per
//     token, 16 GFLOP, which at half of 312 TFLOP/s is 0.1 ms (linear in
//     the batch, this overstates small batches, where a step is bound by
//     memory rather than compute);
//   - DecodePer1kKVTokens 65 µs: attention reads 128 KiB per KV token, and
//     1 000 × 128 KiB / 2.039 TB/s = 64 µs;
//   - PrefillPerToken 0.1 ms: 16 GFLOP per prompt token at half of 312
//     TFLOP/s, about 10 000 prompt tokens a second;
//   - MaxTotalNumTokens 400 000: SGLang keeps a fraction (about 0.88) of
//     the 80 GB for weights and KV; after 16 GB of weights and a few GB of
//     activations and CUDA graphs about 52 GB hold 400 000 tokens of
//     128 KiB;
//   - MaxRunningRequests 256 (SGLang derives a larger bound from the KV
//     size unless --max-running-requests is given; 256 is a common
//     setting) and ChunkedPrefillSize 8192 (a common SGLang chunk on an
//     80 GB GPU).
//
// So one stream decodes at about 9.2 ms a token (~110 tokens/s), a batch
// of 64 sequences of 1 000 tokens at 9 + 6.4 + 4.2 ≈ 19.6 ms a step, and a
// 512-token prompt alone gets its first token after 60 ms.
//
// # What it leaves out
//
// No prefix cache (cache_hit_rate is 0 and every waiting token is
// uncached); no retraction (admission reserves the whole max_new_tokens,
// where SGLang admits on an estimate and retracts when the cache runs
// out); no EOS (every request runs to its max_new_tokens); no mixed
// prefill-and-decode batches, speculative decoding, CUDA-graph batch
// buckets or CPU-GPU overlap; nothing of the HTTP and tokenizer path's own
// latency.
//
// It must not know HTTP, ZMQ, gRPC, JSON, flags or the machine's clock.
package model
