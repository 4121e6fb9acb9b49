// Package hostcheck is the Host-header guard the commands put in front of
// their HTTP servers when no token guards the port (serve without
// --auth-token, and fleet, which has none). It must not know what it
// guards.
package hostcheck
