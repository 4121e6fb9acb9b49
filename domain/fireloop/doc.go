// Package fireloop is the fire loop (docs/routers.md): the one timer of the process,
// exactly one bounded pull per fire, one report per pull handed to every due
// session, leases enforced, sessions registered and updated. Optionally
// (Options.Between, off unless asked for), a report between the deadlines
// when the source says its numbers changed without a pull (a front passed
// a request on): no pull, no deadline moved, only HEALTHY, never recorded
// nor served to pollers.
//
// With domain/recorder (the history writer) it is one of the two packages
// under domain that run goroutines, and only once started: Run runs the
// loop itself and, per fire, the pull it bounds with the budget (a source
// that ignores cancellation keeps one pull's goroutine, never more: fires
// report it unreachable until that pull returns). It depends
// only on domain, domain/session and ports; time comes from the injected
// ports.Clock. It must not know which transport, engine or store is on the
// other side.
package fireloop
