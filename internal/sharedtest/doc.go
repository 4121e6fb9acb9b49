// Package sharedtest is the test plumbing that packages all over the tree
// share: a log buffer a test reads while the code under test writes it, a
// loopback server speaking unencrypted HTTP/2 until the test ends, a
// bounded wait for a condition nothing signals, the start of a
// composition that is closed when the test ends, a run of free ports for
// an engine whose ranks listen side by side, a port held where nothing
// listens (a dead engine, an absent worker), and the imports of a
// package's production files, for a test that holds it to what it may
// import.
//
// Only tests and other test support (cmd/loadreporter/internal/workertest)
// import it; tests/architecture_test.go refuses it to the production code
// of domain, ports, adapters, web and client. It
// imports the standard library only and must not know any of the
// service's packages: callers bring their own handlers and services.
package sharedtest
