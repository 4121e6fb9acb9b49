// Package fireloop is the fire loop (SPEC §3): the one timer of the process,
// exactly one bounded pull per fire, one report per pull handed to every due
// session, leases enforced, sessions registered and updated.
//
// It is the only package under domain that runs goroutines: the loop itself
// and, per fire, the pull it bounds with the budget. It depends only on
// domain, domain/session and ports; time comes from the injected
// ports.Clock. It must not know which transport, engine or store is on the
// other side.
package fireloop
