// Command loadreporter serves an inference engine's per-rank load to
// routers, browsers and operators. Run `loadreporter help` for commands.
//
// main only parses the command line and hands over to package app, which
// holds the wiring; it must not hold logic of its own.
package main
