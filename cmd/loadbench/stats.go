package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// clockTicks is Linux's USER_HZ, the unit of utime and stime in /proc.
const clockTicks = 100

func percentile(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	return ds[(len(ds)-1)*p/100]
}

// cpuTime is the process's user+system CPU time from /proc/PID/stat.
func cpuTime(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+2:]) // after "(comm) "
	utime, _ := strconv.ParseInt(fields[11], 10, 64)
	stime, _ := strconv.ParseInt(fields[12], 10, 64)
	return time.Duration(utime+stime) * time.Second / clockTicks
}

// rss is the process's resident set in bytes.
func rss(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb * 1024
		}
	}
	return 0
}

func pulls(statsAddr string) int64 {
	resp, err := http.Get("http://" + statsAddr)
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	n, _ := strconv.ParseInt(string(b), 10, 64)
	return n
}

// droppedReports reads loadreporter's count of Monitor reports replaced
// unread (latest wins): of the late reports, those that never arrived. It
// is -1 for a server without that counter (a peer) or when /metrics fails.
func droppedReports(addr string) int64 {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, `loadreporter_reports_dropped_total{kind="monitor"} `); ok {
			n, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				return -1
			}
			return int64(n)
		}
	}
	return -1
}

func saveProfile(statsAddr string, d time.Duration, path string) {
	resp, err := http.Get(fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", statsAddr, int(d.Seconds())))
	if err != nil {
		fmt.Fprintln(os.Stderr, "profile:", err)
		return
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "profile:", err)
	}
}

// saveMemory writes the server's heap profile to path+".heap" and its
// memory statistics (heap, stacks, goroutines; as found and after a
// collection) to path+".mem", to see what a stream's memory is made of.
func saveMemory(statsAddr, path string) {
	for _, f := range []struct{ url, suffix string }{
		{"/debug/memstats", ".mem"}, {"/debug/pprof/heap", ".heap"}, // the profile of the memstats' collection
	} {
		resp, err := http.Get("http://" + statsAddr + f.url)
		if err != nil {
			fmt.Fprintln(os.Stderr, "memory:", err)
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err := os.WriteFile(path+f.suffix, b, 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "memory:", err)
		}
	}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
