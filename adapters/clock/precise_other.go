//go:build !linux

package clock

import (
	"time"

	"github.com/loadreporter/loadreporter/ports"
)

func newPreciseTimer(at time.Time) ports.Timer { return newGoTimer(at) }
