// Package sim is the built-in simulated engine behind ports.SnapshotSource:
// N ranks with plausible, drifting, always-consistent load, and failure
// modes (stall, error, hang, garbage, a changed rank count) switchable at
// run time so every report status can be shown without an engine.
//
// It must not know about the fire loop, sessions or transports.
package sim
