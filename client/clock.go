package client

import (
	"math/rand/v2"
	"time"
)

// clock is where a Worker and a Fleet read time and arm timers; tests
// inject a manual one, so staleness, keep-alives and backoff are
// deterministic.
type clock interface {
	Now() time.Time
	NewTimer(d time.Duration) timer
}

// timer fires once on C unless stopped first.
type timer interface {
	C() <-chan time.Time
	Stop()
}

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) NewTimer(d time.Duration) timer { return realTimer{time.NewTimer(d)} }

type realTimer struct{ t *time.Timer }

func (t realTimer) C() <-chan time.Time { return t.t.C }
func (t realTimer) Stop()               { t.t.Stop() }

// deps are what a Worker takes from its surroundings besides Options;
// tests replace them, the public API never exposes them.
type deps struct {
	clock clock
	// rand is uniform in [0, 1); it jitters the backoff and the first
	// keep-alive after a registration.
	rand func() float64
	// renewAfter turns the granted renew_after into the keep-alive period
	// (tests stop renewing to make the lease expire).
	renewAfter func(time.Duration) time.Duration
	// metrics is shared by every worker of a Fleet; nil: from Options.
	metrics *metrics
	// countDispatches gives the Worker a count of its Fleet's dispatches
	// (Worker.Pending); only a Fleet with accounting on sets it.
	countDispatches bool
	// published, when set, hears of every view a Worker publishes (a
	// Fleet's subscription, which would otherwise need a goroutine per
	// worker).
	published func()
}

func (d deps) withDefaults() deps {
	if d.clock == nil {
		d.clock = realClock{}
	}
	if d.rand == nil {
		d.rand = rand.Float64
	}
	if d.renewAfter == nil {
		d.renewAfter = func(d time.Duration) time.Duration { return d }
	}
	return d
}

// stopTimer stops t when there is one.
func stopTimer(t timer) {
	if t != nil {
		t.Stop()
	}
}

// timerC is t's channel, or nil (never ready) when there is no timer.
func timerC(t timer) <-chan time.Time {
	if t == nil {
		return nil
	}
	return t.C()
}
