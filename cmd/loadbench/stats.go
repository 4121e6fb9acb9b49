package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/loadreporter/loadreporter/cmd/internal/machine"
)

// percentile is the nearest-rank p-th percentile of ds, or -1 (unknown)
// without a sample.
func percentile(ds []time.Duration, p int) time.Duration {
	v, ok := machine.Percentile(ds, float64(p))
	if !ok {
		return -1
	}
	return v
}

// cpuTime is the CPU time the process has run, to the nanosecond, or -1
// (unknown) when it cannot be read.
func cpuTime(pid int) time.Duration {
	d, err := machine.ProcessCPU(pid)
	if err != nil {
		return -1
	}
	return d
}

// rss is the process's resident set in bytes, or -1 (unknown).
func rss(pid int) int64 {
	n, err := machine.ReadRSS(pid)
	if err != nil {
		return -1
	}
	return n
}

// fetch is the body of a GET of url on 127.0.0.1.
func fetch(url string) ([]byte, error) {
	resp, err := http.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	return io.ReadAll(resp.Body)
}

// pulls is how many pulls the child's engine has answered, or -1
// (unknown).
func pulls(statsAddr string) int64 {
	b, err := fetch("http://" + statsAddr)
	if err != nil {
		return -1
	}
	n, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil {
		return -1
	}
	return n
}

// counters are what loadreporter's /metrics says of its Monitor reports
// replaced unread (latest wins: of the late reports, those that never
// arrived) and of its fires: how many, and how many started more than a
// millisecond after their deadline. Each is -1 for a server without it (a
// peer) or when /metrics fails.
type counters struct{ dropped, fires, firesLate int64 }

// serverCounters reads counters from loadreporter's /metrics (ours, and
// the peers that are loadreporter too). Another peer serves no /metrics;
// it is not asked, since an HTTP/1 request to a gRPC-only peer draws its
// HTTP/2 SETTINGS, which net/http's client logs as an unsolicited
// response.
func serverCounters(kind, addr string) counters {
	c := counters{-1, -1, -1}
	if kind != "ours" && kind != netHTTPRef && kind != beforeRef {
		return c
	}
	b, err := fetch("http://" + addr + "/metrics")
	if err != nil {
		return c
	}
	var withinMs int64 = -1
	series := []struct {
		prefix string
		to     *int64
	}{
		{`loadreporter_reports_dropped_total{kind="monitor"} `, &c.dropped},
		{`loadreporter_fire_lateness_seconds_count `, &c.fires},
		{`loadreporter_fire_lateness_seconds_bucket{le="0.001"} `, &withinMs},
	}
	for line := range strings.Lines(string(b)) {
		for _, s := range series {
			if v, ok := strings.CutPrefix(line, s.prefix); ok {
				if n, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil {
					*s.to = int64(n)
				}
			}
		}
	}
	if c.fires >= 0 && withinMs >= 0 {
		c.firesLate = c.fires - withinMs
	}
	return c
}

// memory is what a server holds after a collection, in bytes: the heap's
// live objects and the goroutines' stacks.
type memory struct{ heap, stacks int64 }

// liveMemory asks the child for its memory after a collection (the stats
// endpoint collects garbage first); ok is false when that fails.
func liveMemory(statsAddr string) (m memory, ok bool) {
	b, err := fetch("http://" + statsAddr + "/debug/memstats")
	if err != nil {
		return memory{}, false
	}
	return parseLiveMemory(string(b))
}

// parseLiveMemory reads heap_alloc and stack_inuse from the "after GC:"
// line of the child's /debug/memstats.
func parseLiveMemory(s string) (m memory, ok bool) {
	for line := range strings.Lines(s) {
		rest, found := strings.CutPrefix(line, "after GC:")
		if !found {
			continue
		}
		f := strings.Fields(rest)
		got := 0
		for i := 0; i+1 < len(f); i += 2 {
			n, err := strconv.ParseInt(f[i+1], 10, 64)
			if err != nil {
				return memory{}, false
			}
			switch f[i] {
			case "heap_alloc":
				m.heap, got = n, got+1
			case "stack_inuse":
				m.stacks, got = n, got+1
			}
		}
		return m, got == 2
	}
	return memory{}, false
}

// perStream is the growth from before to after, per router stream, or
// -1 (unknown) when either reading failed.
func perStream(before, after int64, ok bool, routers int) float64 {
	if !ok || routers == 0 {
		return -1
	}
	return float64(after-before) / float64(routers)
}

func saveProfile(statsAddr string, d time.Duration, path string) {
	b, err := fetch(fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", statsAddr, int(d.Seconds())))
	if err != nil {
		fmt.Fprintln(os.Stderr, "profile:", err)
		return
	}
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
		b, err := fetch("http://" + statsAddr + f.url)
		if err != nil {
			fmt.Fprintln(os.Stderr, "memory:", err)
			return
		}
		if err := os.WriteFile(path+f.suffix, b, 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "memory:", err)
		}
	}
}

// ms is d in milliseconds, keeping a negative d (unknown) as -1.
func ms(d time.Duration) float64 {
	if d < 0 {
		return -1
	}
	return float64(d.Microseconds()) / 1000
}
