package session

import (
	"math"
	"sync/atomic"
	"time"
)

// lease is a session's lease. Keep-alives renew it without the table's
// lock (Session.Renew), so a router that renews often, or thousands that
// renew at once, never queue in front of the fire loop; everything else
// reads and writes it under the caller's lock like the rest of the table.
type lease struct {
	base   time.Time    // the table's epoch: expiries are offsets from it
	ttl    atomic.Int64 // the granted lease, in ns
	expiry atomic.Int64 // the expiry's offset from base, in ns, or swept
}

// swept marks a lease the table found expired: no renewal revives it.
const swept = math.MinInt64

func (l *lease) offset(t time.Time) int64 { return int64(t.Sub(l.base)) }

// set grants ttl from now.
func (l *lease) set(ttl time.Duration, now time.Time) {
	l.ttl.Store(int64(ttl))
	l.expiry.Store(l.offset(now) + int64(ttl))
}

// renew moves the expiry to now + ttl unless the lease was swept. It
// never moves it earlier: a renewal that lands after a later one (two
// goroutines, each with its own now) keeps the later expiry, so the
// table's lower bound on every expiry (Table.Sweep) holds whoever renews.
func (l *lease) renew(now time.Time) bool {
	next := l.offset(now) + l.ttl.Load()
	for {
		old := l.expiry.Load()
		if old == swept {
			return false
		}
		if old >= next {
			return true
		}
		if l.expiry.CompareAndSwap(old, next) {
			return true
		}
	}
}

// sweep marks the lease expired if it ran out at or before now. A renewal
// that lands first wins, exactly as if it had taken the table's lock
// before the sweep.
func (l *lease) sweep(now time.Time) bool {
	at := l.offset(now)
	for {
		old := l.expiry.Load()
		if old > at {
			return false
		}
		if l.expiry.CompareAndSwap(old, swept) {
			return true
		}
	}
}

// expires is the lease's expiry.
func (l *lease) expires() time.Time { return l.base.Add(time.Duration(l.expiry.Load())) }

// Renew renews s's lease to now + lease (docs/routers.md) and reports whether
// the session still lives; it never moves a report deadline and does
// nothing to a session without a lease. Unlike the Table's methods, it is
// safe to call concurrently with them: it is what a keep-alive costs, one
// atomic compare-and-swap, whatever the table holds. A renewal that races
// the session's end may report true; the end shows on the outbox.
func (s *Session) Renew(now time.Time) bool {
	if s.outbox.Ended() {
		return false
	}
	if !s.leased {
		return true
	}
	return s.lease.renew(now)
}
