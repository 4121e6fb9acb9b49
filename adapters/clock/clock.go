package clock

import (
	"time"

	"github.com/loadreporter/loadreporter/ports"
)

// System reads the machine's clock.
type System struct{}

var _ ports.Clock = System{}

// Now returns time.Now().
func (System) Now() time.Time { return time.Now() }

// NewTimer returns a timer that fires at at.
func (System) NewTimer(at time.Time) ports.Timer {
	return systemTimer{time.NewTimer(time.Until(at))}
}

type systemTimer struct{ t *time.Timer }

func (s systemTimer) C() <-chan time.Time { return s.t.C }
func (s systemTimer) Stop()               { s.t.Stop() }
