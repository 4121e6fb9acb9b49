// Command loadreporter serves an inference engine's per-rank load to
// routers, browsers and operators. Run `loadreporter help` for commands.
//
// main only dispatches: serve goes to package app (the composition root),
// watch, audit and migrate to package cli (the clients), fleet to package
// fleet (a router-side view of many workers), version to package
// buildinfo. It must not hold logic of its own.
package main
