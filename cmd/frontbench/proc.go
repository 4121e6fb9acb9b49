package main

import (
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/loadreporter/loadreporter/cmd/internal/machine"
)

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
		if st, err := machine.ParseStat(string(b)); err == nil {
			out[pid] = st.PPID
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
		if d, err := machine.ProcessCPU(pid); err == nil {
			u.cpu += d
		}
		if r, err := machine.ReadRSS(pid); err == nil {
			u.rss += r
		}
	}
	return u
}
