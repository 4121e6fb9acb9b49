package loglimit

import (
	"sync"
	"time"
)

// Limiter is safe for concurrent use; its zero value lets every line
// through.
type Limiter struct {
	// Every is the shortest time between two lines let through.
	Every time.Duration

	mu         sync.Mutex
	last       time.Time
	suppressed int
}

// Allow reports whether a line may be written at now and, if so, how many
// were held back since the last one.
func (l *Limiter) Allow(now time.Time) (ok bool, suppressed int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.last.IsZero() && now.Sub(l.last) < l.Every {
		l.suppressed++
		return false, 0
	}
	l.last, suppressed, l.suppressed = now, l.suppressed, 0
	return true, suppressed
}
