package rpc

import (
	"net"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// sharedBudgets are frame budgets shared by every Monitor stream of one
// key (a connection, or a peer host): a flooder that reconnects after each
// cut, or spreads its flood over many streams each within its own budget,
// still spends from one bucket. A key's bucket lives while a stream of
// that key does, so the table holds no more than the open streams' keys.
type sharedBudgets struct {
	limit rate.Limit
	burst int

	mu    sync.Mutex
	byKey map[string]*sharedBudget
}

type sharedBudget struct {
	lim  *rate.Limiter
	refs int
}

func newSharedBudgets(perSecond float64) *sharedBudgets {
	return &sharedBudgets{limit: rate.Limit(perSecond), burst: max(1, int(perSecond)), byKey: map[string]*sharedBudget{}}
}

// acquire returns key's bucket, counting one more stream on it; release
// gives it back.
func (b *sharedBudgets) acquire(key string, now time.Time) *rate.Limiter {
	b.mu.Lock()
	defer b.mu.Unlock()
	e := b.byKey[key]
	if e == nil {
		e = &sharedBudget{lim: rate.NewLimiter(b.limit, b.burst)}
		e.lim.AllowN(now, 0) // starts full at now, whatever clock drives it
		b.byKey[key] = e
	}
	e.refs++
	return e.lim
}

func (b *sharedBudgets) release(key string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if e := b.byKey[key]; e != nil {
		if e.refs--; e.refs <= 0 {
			delete(b.byKey, key)
		}
	}
}

// keys returns how many buckets are held (tests).
func (b *sharedBudgets) keys() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.byKey)
}

// peerHost is the host of a peer address ("10.0.0.7:41000" → "10.0.0.7"),
// or the address itself when it has no port.
func peerHost(addr string) string {
	if h, _, err := net.SplitHostPort(addr); err == nil {
		return h
	}
	return addr
}
