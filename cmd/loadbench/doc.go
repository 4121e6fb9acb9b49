// Command loadbench measures the Monitor fan-out the way docs/performance.md states its
// targets: one client process opens N router streams back to back against a
// server in a child process, and the child's CPU time, memory and engine
// pulls are read from /proc. It runs the same scenario, with the same
// client, against loadreporter as shipped and against two references — a
// grpc-go server shaped like grpc-go's ORCA service (one goroutine, one
// ticker, one read of the load and one marshal per stream) and a bare
// grpc-go fan-out (one pull and one encode per fire: the transport's
// floor) — and prints them side by side with ours' ratio to each, the
// targets (ratios to the references) and whether each is met; a figure it
// could not read meets none. With --suite it fails when loadreporter as
// shipped misses one. Besides CPU, memory and
// pulls it measures each gap's distance from the interval, the age of a
// report at receipt (receipt − report_time_unix_ms, so up to 1 ms more than
// the truth: the field has millisecond resolution), and, about once a
// second during the measured window, one new router joining on the first
// connection: the time from its ack to its first report. Memory is the
// child's RSS growth over the streams, and what of it is live heap and
// goroutine stacks after a collection (from the child's own statistics).
//
// The client is grpc-go's with its defaults, which probe each connection's
// bandwidth with a PING after data arrives (grpcio's clients do too; tonic's
// do not by default): with one connection per router that is about one PING
// to answer per report. --client-bdp=false measures without it.
//
// --suite runs every scenario of docs/performance.md, and its single router, in
// one invocation; `make bench` runs it. Other work on the machine moves
// every figure: read the load average printed with each scenario, and
// repeat a run before trusting a difference.
//
// It is a measuring tool: nothing in the service imports it.
package main
