// Command loadreporter serves an inference engine's per-rank load to
// routers, browsers and operators. Run `loadreporter help` for commands.
//
// main only dispatches: serve goes to package app (the composition root),
// watch, audit and migrate to package cli (the clients). It must not hold
// logic of its own.
package main
