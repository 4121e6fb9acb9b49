package machine

import (
	"fmt"
	"time"
)

// ProcessCPU is the CPU time pid's threads have run, live and exited, to
// the nanosecond where the system has a process CPU clock to read (Linux:
// the scheduler's own sum). /proc's utime and stime count the same time
// in 10 ms ticks, which at a hundred routers over 10 s is one microsecond
// a report; they are the answer only where the clock is refused.
func ProcessCPU(pid int) (time.Duration, error) {
	d, err := processClock(pid)
	if err == nil {
		return d, nil
	}
	st, statErr := ReadStat(pid)
	if statErr != nil {
		return 0, fmt.Errorf("CPU time of process %d: %w; /proc: %w", pid, err, statErr)
	}
	return st.CPU(), nil
}
