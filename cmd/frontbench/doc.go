// Command frontbench measures the front mode against the engine direct and
// against nginx, the reverse proxy an operator would otherwise put at the
// worker's address, in one run and with one client (the front mode's
// targets in docs/performance.md).
//
// The bench process serves a stand-in engine on 127.0.0.1 (a non-streaming
// POST /generate, a 256-event SSE /generate, a long-lived SSE stream, an
// SGLang-like /metrics that counts its hits, and SGLang's /v1/loads for the
// reporter's sglang-http source) and its gRPC server (grpc-go answering any
// method with protobuf's BytesValue: a unary echo, and a server stream of
// as many small messages as an SSE stream has events), and starts three
// children in front of it: the built loadreporter in front mode, a second
// one whose front passes to the gRPC server (--front-engine-url grpc://…),
// and Debian's nginx configured as a streaming reverse proxy (a config of
// its own in a temporary folder). It then measures, side by side, with
// rounds interleaved so that whatever else the machine does hits every
// target alike:
//   - latency p50 and p99 of the non-streaming POST and of the SSE stream
//     (whole response, and time to the first event) at a fixed
//     concurrency, what each proxy adds over the engine direct, and each
//     proxy's CPU per request (utime+stime from /proc over its own rounds,
//     nginx's master and workers summed);
//   - the same for gRPC through the gRPC front, with a stock grpc-go
//     client (one channel per target, the same clients and counts): a
//     unary call and a server stream, against the engine's gRPC server
//     direct (no nginx and no target there);
//   - 1 000 concurrent long-lived SSE streams held through each proxy: its
//     resident memory as they open and after they are held, per stream, and
//     whether it stays flat;
//   - the front's cached /metrics under 20 scrapers every 50 ms: scrapes
//     served against the engine's own count of scrapes.
//
// It prints one table with the date, the load average and the goal of
// the front mode's goal (the front adds no more p99 latency and no more CPU per request
// than nginx, and the engine sees one scrape per window), met or not
// beside each figure; the gRPC rows are figures only. Other work on the
// machine moves every figure: read the load average, and repeat a run
// before trusting a difference.
//
// It is a measuring tool: nothing in the service imports it.
package main
