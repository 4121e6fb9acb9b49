package ports

import "time"

// Clock is the only way the core learns the time, so schedule, lease and
// staleness rules can be tested on a fake clock.
type Clock interface {
	Now() time.Time
	// NewTimer returns a timer that fires once at or after at.
	NewTimer(at time.Time) Timer
}

// Timer is a one-shot timer made by a Clock.
type Timer interface {
	C() <-chan time.Time
	// Stop prevents the timer from firing; it does not drain C.
	Stop()
}
