// Package sim is the built-in simulated engine behind ports.SnapshotSource:
// N ranks with plausible, drifting, always-consistent load, and failure
// modes (stall, error, hang, garbage, a changed rank count) switchable at
// run time so every report status can be shown without an engine.
//
// It must not know about the fire loop, sessions or transports.
//
// Name, Options (with RegisterFlags declaring its own flags, --sim-mode
// and --sim-seed) and New are its row in serve's source registry
// (cmd/loadreporter/app/sources.go; docs/adding-a-source.md).
package sim
