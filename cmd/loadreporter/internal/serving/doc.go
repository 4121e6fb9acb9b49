// Package serving is what the commands that serve a port (serve, fleet)
// put in front of their handlers, so that both bound their peers alike and
// under the same flags: the http.Server (HTTP/1.1 and HTTP/2, header and
// idle timeouts, HTTP/2's stream cap and ping timeouts, net/http's own
// errors logged at most once a second), and the handler layers around
// every request (a body sent in time, writes bounded once the command
// shuts down, the response controller the stream handlers bound their
// writes with). The bound of one request message and the default bound of
// page streams are here too, so the two commands cannot drift.
//
// It must not know which routes a command serves, nor how a stream is
// bounded while it lives (adapters/rpc's Stalls does that).
package serving
