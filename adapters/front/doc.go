// Package front is the reporter at the worker's own address. Polling
// routers send their load probe to the same URL as health checks, model
// discovery and inference, so the front passes every request to the
// engine unchanged (net/http/httputil's reverse proxy: bodies streamed
// both ways, server-sent events flushed per event, trailers, upgrades and
// cancellation carried through), except:
//   - the routes it is given to answer itself (the pollers' load
//     endpoints, answered from the shared pull), and
//   - the engine's /metrics, served from a cache refreshed at most once per
//     window, so that any number of scrapers costs the engine one scrape.
//
// Nothing on the proxied path waits for a pull, a history write or a
// router stream. With Options.Forwarded, each inference request is
// recorded in a domain/forwarded Ledger from the moment it is passed on to
// its answer (a short lock shared with the pulls' count, held for a walk
// of the requests in flight at most). An engine that does not answer gets a 502 naming it (a
// gRPC status UNAVAILABLE for gRPC callers).
//
// It must not know how loads are pulled, scheduled or shaped: the answered
// routes are handlers it is given.
package front
