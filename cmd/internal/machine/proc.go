package machine

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// clockTicks is Linux's USER_HZ, the unit of utime and stime in /proc.
const clockTicks = 100

// Stat is what /proc/PID/stat says of a process that a bench reads.
type Stat struct {
	PPID         int
	UTime, STime int64 // clock ticks
}

// ParseStat reads /proc/PID/stat. The command name is in parentheses and
// may itself hold spaces and parentheses, so the fields are counted from
// the last ')'.
func ParseStat(s string) (Stat, error) {
	end := strings.LastIndexByte(s, ')')
	if end < 0 {
		return Stat{}, errors.New("/proc stat: no ')' after the command name")
	}
	// After "(comm) ": state(3) ppid(4) … utime(14) stime(15), numbered
	// as proc(5) numbers them.
	f := strings.Fields(s[end+1:])
	if len(f) < 13 {
		return Stat{}, fmt.Errorf("/proc stat: %d fields after the command name, want at least 13", len(f))
	}
	var st Stat
	var err error
	if st.PPID, err = strconv.Atoi(f[1]); err != nil {
		return Stat{}, fmt.Errorf("/proc stat: ppid %q: %w", f[1], err)
	}
	if st.UTime, err = strconv.ParseInt(f[11], 10, 64); err != nil {
		return Stat{}, fmt.Errorf("/proc stat: utime %q: %w", f[11], err)
	}
	if st.STime, err = strconv.ParseInt(f[12], 10, 64); err != nil {
		return Stat{}, fmt.Errorf("/proc stat: stime %q: %w", f[12], err)
	}
	return st, nil
}

// CPU is the process's user and system time.
func (s Stat) CPU() time.Duration {
	return time.Duration(s.UTime+s.STime) * time.Second / clockTicks
}

// ParseRSS reads VmRSS from /proc/PID/status, in bytes.
func ParseRSS(status string) (int64, error) {
	for line := range strings.Lines(status) {
		v, ok := strings.CutPrefix(line, "VmRSS:")
		if !ok {
			continue
		}
		num, unit, _ := strings.Cut(strings.TrimSpace(v), " ")
		if unit != "kB" {
			return 0, fmt.Errorf("/proc status: VmRSS in %q, want kB", unit)
		}
		kb, err := strconv.ParseInt(num, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc status: VmRSS %q: %w", num, err)
		}
		return kb * 1024, nil
	}
	return 0, errors.New("/proc status: no VmRSS line (a kernel thread, or a process gone)")
}

// ReadStat reads and parses /proc/PID/stat.
func ReadStat(pid int) (Stat, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return Stat{}, err
	}
	return ParseStat(string(b))
}

// ReadRSS reads the resident set of pid from /proc/PID/status, in bytes.
func ReadRSS(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	return ParseRSS(string(b))
}
