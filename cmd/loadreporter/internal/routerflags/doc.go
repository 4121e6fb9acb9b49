// Package routerflags is what the commands that dial workers as a router
// (watch, fleet) are told the same way: the interval and lease to ask for,
// the router_id, the bearer token, TLS, and a list of targets.
//
// It must not know what a command does with the workers it dials.
package routerflags
