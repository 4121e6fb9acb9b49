// Command routebench measures what fresh load buys a router
// (docs/performance.md): K simulated engines (package enginesim/model, 8 by default),
// R routers (4) sharing one seeded Poisson arrival stream at a
// utilisation ρ of the fleet's capacity, and one row per way of choosing
// a worker, every row on the same arrivals:
//
//   - oracle: the engines' true state at the instant of dispatch
//     (model.Engine.Live), best of two (the reference of every ratio: the
//     push rows' rule with nothing stale) and least loaded;
//   - push: the reports a loadreporter pushes every 100 ms or 1 s, best of
//     two, with and without the router's own accounting of what it sent
//     since a report (client.Options.Accounting); the reporter is the
//     engine's front (serve --front-listen: every request passes through
//     it, and it counts into its reports what it passed on that the
//     engine has not published yet, domain/forwarded); one row has the
//     fronts also push between the deadlines when they pass a request on
//     (--front-push-on-forward 10ms), and one runs the reporter beside the
//     engine instead, the routers sending to the engine;
//   - poll: the reporter's GET /v1/loads every 1 s or 10 s (SMG's default),
//     least loaded and best of two;
//   - router-local: each router's own count of its requests in flight
//     (least), with no reporter; round robin; random.
//
// Every way scores a worker with client.Score / client.ScorePending and
// draws its best of d as client.Fleet does (choose mirrors Fleet's draws),
// so a change of the score moves the oracle with the rows it measures.
//
// # Two modes
//
// The end-to-end mode runs the real stack in one process tree on the
// machine's clock: engine-sim HTTP servers (package enginesim) on
// 127.0.0.1, a loadreporter child in front of each (`serve --source
// sglang-http --engine-url … --front-listen …` and every other flag at its
// default; beside it, without --front-listen, in the beside row), and
// the routers as goroutines — client.Fleet for the push rows, HTTP pollers
// of the reporters' /v1/loads for the poll rows. Requests are chat
// completions (max_tokens the output length, the prompt written as text
// of four characters a token). Engines and reporters are started afresh
// for each row. By default only three rows run (oracle, push 100 ms with
// and without accounting: about a minute each); --e2e-rows all runs every
// one.
//
// The model mode runs the same model engines in virtual time (a
// discrete-event loop: thousands of requests a second of wall time) with a
// reporter per engine scheduled as loadreporter schedules its pulls: an
// aligned grid of the report interval from an epoch of its own, a history
// pull every second whatever else is connected, a poll answered with the
// latest report when younger than a second (--poll-max-age) and with a
// pull otherwise; each rank of a report carries its engine's snapshot
// time, as SGLang's /v1/loads and the simulated engine stamp their ranks
// (an idle rank's is current: its scheduler republishes while idle), and
// each front counts what it passed on with domain/forwarded, the rules the
// front runs. Its routers count
// their dispatches with client.Ledger, the pure rules client.Fleet runs
// on the machine's clock, fed every report a reporter pushes as a
// Fleet's workers feed theirs; the end-to-end mode uses client.Fleet
// itself, and the agreement check below compares the two. The model mode
// sweeps ρ over 0.5–0.95 and a 10 s burst at 1.5× capacity for every row
// and both workloads, and the report interval over 0–1 s (written as an
// SVG chart).
//
// # What is measured
//
// Requests arriving in a warm-up are routed but not measured; the measured
// arrivals come after it, then arrivals stop and the measured requests may
// run a drain longer (one that does not finish counts as +Inf). Columns:
// TTFT p50 and p99 (arrival at the engine to the end of the step that
// makes the first token), queue wait p99 (arrival to admission), e2e p99,
// requests served, Jain's fairness index of the measured requests per
// engine, queue imbalance (max − min over the engines of running plus
// waiting requests, sampled every 100 ms of the measured window and
// averaged), and engine load reads per second per engine (reporter pulls,
// read from the reporters' loadreporter_pulls_total end to end; the
// oracle's reads of the true state); each beside its ratio to the
// oracle's. Percentiles are nearest-rank. In the end-to-end mode TTFT and
// queue wait are the engines' own timings (Config.RequestDone) and e2e the
// router's; --e2e-stream streams the answers so that the routers time the
// first token themselves, at about three times the CPU.
//
// Capacity is measured, not assumed: one model engine is kept saturated
// (twice its running slots always queued) for 600 s of virtual time after
// 120 s, per workload, and its completions per second times K is the
// fleet's capacity; ρ is a share of it.
//
// Workloads: lognormal (prompt median 512 tokens σ 1.0 clipped to
// 16..16384, output median 256 σ 0.8 clipped to 16..2048) and fixed512
// (every request 512/512, inference-sim's H29).
//
// # Checks and the goal
//
// Printed with the tables: the supermarket model (a plain M/M/1 FIFO
// queue per server with exponential service, 1000 servers, λ = 0.9, fresh
// queue lengths, the same best-of-d code) against its closed form — mean
// time in system 10.0, 2.61 and 2.03 service times for random, best of two
// and best of three, within 3 %; and the end-to-end mode against the model
// mode on p99 TTFT for push 100 ms with accounting (same fleet, arrivals
// and window), within 10 %. The goal — push 100 ms with accounting
// within 1.10× the oracle's p99 TTFT at every ρ up to 0.95 and through the
// burst — is printed met or not met per workload, with the rows without
// accounting and the pollers beside it, the accounting on against off
// over five more arrival streams, and three what-ifs of the push 100 ms
// row with accounting that say where a gap to the oracle comes from: the
// engine does not stamp its ranks (so the front counts nothing and the
// accounting goes by the pulls), the engine publishes its load every step
// (so the numbers are never older than a step), and one router takes
// every request (so nothing is sent that the accounting does not count).
// Nothing is
// asserted in a timed test; the tests cover the pure parts.
//
// It is a measuring tool: nothing imports it.
package main
