package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// clockTicks is Linux's USER_HZ, the unit of utime and stime in /proc.
const clockTicks = 100

// procStat is what /proc/PID/stat says of a process that the bench reads.
type procStat struct {
	ppid         int
	utime, stime int64 // clock ticks
}

// parseStat reads /proc/PID/stat. The command name is in parentheses and
// may itself hold spaces and parentheses, so the fields are counted from
// the last ')'.
func parseStat(s string) (procStat, error) {
	end := strings.LastIndexByte(s, ')')
	if end < 0 {
		return procStat{}, errors.New("/proc stat: no ')' after the command name")
	}
	// After "(comm) ": state(3) ppid(4) … utime(14) stime(15), numbered
	// as proc(5) numbers them.
	f := strings.Fields(s[end+1:])
	if len(f) < 13 {
		return procStat{}, fmt.Errorf("/proc stat: %d fields after the command name, want at least 13", len(f))
	}
	var st procStat
	var err error
	if st.ppid, err = strconv.Atoi(f[1]); err != nil {
		return procStat{}, fmt.Errorf("/proc stat: ppid %q: %w", f[1], err)
	}
	if st.utime, err = strconv.ParseInt(f[11], 10, 64); err != nil {
		return procStat{}, fmt.Errorf("/proc stat: utime %q: %w", f[11], err)
	}
	if st.stime, err = strconv.ParseInt(f[12], 10, 64); err != nil {
		return procStat{}, fmt.Errorf("/proc stat: stime %q: %w", f[12], err)
	}
	return st, nil
}

// cpu is the process's user and system time.
func (s procStat) cpu() time.Duration {
	return time.Duration(s.utime+s.stime) * time.Second / clockTicks
}

// parseRSS reads VmRSS from /proc/PID/status, in bytes.
func parseRSS(status string) (int64, error) {
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

// tree is root and its descendants among procs (pid → ppid): nginx's
// master and its workers.
func tree(root int, ppids map[int]int) []int {
	out := []int{root}
	for i := 0; i < len(out); i++ {
		for pid, ppid := range ppids {
			if ppid == out[i] && pid != root {
				out = append(out, pid)
			}
		}
	}
	return out
}

// allPPIDs maps every process of the machine to its parent.
func allPPIDs() map[int]int {
	out := map[int]int{}
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		pid, err := strconv.Atoi(filepath.Base(d))
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join(d, "stat"))
		if err != nil {
			continue // gone meanwhile
		}
		if st, err := parseStat(string(b)); err == nil {
			out[pid] = st.ppid
		}
	}
	return out
}

// usage is CPU time and resident memory summed over processes.
type usage struct {
	cpu time.Duration
	rss int64
}

// readUsage sums the CPU time and resident memory of pids; a process gone
// meanwhile counts nothing.
func readUsage(pids []int) usage {
	var u usage
	for _, pid := range pids {
		if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil {
			if st, err := parseStat(string(b)); err == nil {
				u.cpu += st.cpu()
			}
		}
		if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid)); err == nil {
			if r, err := parseRSS(string(b)); err == nil {
				u.rss += r
			}
		}
	}
	return u
}
