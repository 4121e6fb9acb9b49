package clock

import (
	"time"

	"github.com/loadreporter/loadreporter/ports"
)

// System reads the machine's clock; its timers are Go's, which run up to a
// millisecond late in an idle process (Go's netpoller sleeps in epoll_wait,
// whose timeout is in milliseconds). Right for deadlines and budgets.
type System struct{}

var _ ports.Clock = System{}

// Now returns time.Now().
func (System) Now() time.Time { return time.Now() }

// NewTimer returns Go's timer for at.
func (System) NewTimer(at time.Time) ports.Timer { return newGoTimer(at) }

// Precise is System with timers that fire within about a quarter of a
// millisecond of their time on Linux (precise.go; Go's timers elsewhere).
// It is for the timer whose lateness every router sees, the fire loop's:
// each of its timers holds a goroutine and a file descriptor for its last
// two milliseconds, or all of its time when that is under a quarter of a
// second, which is no way to run thousands of deadlines.
type Precise struct{ System }

var _ ports.Clock = Precise{}

// NewTimer returns a timer that fires at at.
func (Precise) NewTimer(at time.Time) ports.Timer { return newPreciseTimer(at) }

type goTimer struct{ t *time.Timer }

func newGoTimer(at time.Time) goTimer { return goTimer{time.NewTimer(time.Until(at))} }

func (g goTimer) C() <-chan time.Time { return g.t.C }
func (g goTimer) Stop()               { g.t.Stop() }
