// Package cli holds loadreporter's client commands: watch (dial a worker
// as a router through package client and print its reports, or a table
// of several workers with --targets), audit (query the recorded history
// through a running loadreporter or PostgreSQL) and migrate (apply the
// history schema). Each has a Parse function for its flags and
// LOADREPORTER_* variables and a function that runs it.
//
// The clients talk to a server over its public RPCs or to the database;
// they must not know the composition root (package app), its Config or
// its wiring, and nothing imports this package but the binary and the
// end-to-end tests.
package cli
