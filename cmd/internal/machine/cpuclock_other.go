//go:build !linux

package machine

import (
	"errors"
	"time"
)

// processClock: no process CPU clock to read here.
func processClock(int) (time.Duration, error) {
	return 0, errors.New("no process CPU clock on this system")
}
