//go:build !linux

package machine

import "time"

// ProcessCPU is the CPU time pid has run, from /proc's ticks where there
// is no process CPU clock to read.
func ProcessCPU(pid int) (time.Duration, error) {
	st, err := ReadStat(pid)
	if err != nil {
		return 0, err
	}
	return st.CPU(), nil
}
