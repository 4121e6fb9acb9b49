// Package workertest is a stand-in worker for the tests of the commands
// that dial workers as a router (watch, fleet): a Monitor handler that
// grants a lease and sends a report every interval until the router
// stops, and a loopback h2c server for any Monitor handler.
//
// Only _test.go files import it. It must not know what a command does
// with the reports: tests choose the grant and build each report.
package workertest
