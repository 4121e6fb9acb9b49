// Command loadbench measures the Monitor fan-out the way SPEC §8 states its
// targets: one client process opens N router streams back to back against a
// server in a child process, and the child's CPU time, memory and engine
// pulls are read from /proc. It runs the same scenario against loadreporter
// and against a baseline server (one timer, one pull and one encode per
// stream, as per-stream reporters do) and prints both side by side with
// their ratio.
//
// It is a measuring tool: nothing in the service imports it.
package main
