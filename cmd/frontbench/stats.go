package main

import (
	"math"
	"time"

	"github.com/loadreporter/loadreporter/cmd/internal/machine"
)

// percentile is the nearest-rank p-th percentile (0 < p ≤ 100) of ds; 0
// for no samples.
func percentile(ds []time.Duration, p float64) time.Duration {
	v, _ := machine.Percentile(ds, p)
	return v
}

// flatHold reports whether a proxy's memory stayed flat while it held its
// streams: what it grew by over the hold is at most a tenth of what the
// streams cost it to open, or 1 MiB (the allocator's own noise), whichever
// is more.
func flatHold(h holdResult) bool {
	if len(h.steps) == 0 {
		return false
	}
	opened := h.steps[len(h.steps)-1].rss
	allowed := max(int64(1<<20), (opened-h.before)/10)
	return h.held-opened <= allowed
}

// perStream is what each of the held streams cost in resident memory, in
// bytes: from before the first to all of them open.
func perStream(h holdResult) float64 {
	if len(h.steps) == 0 {
		return 0
	}
	last := h.steps[len(h.steps)-1]
	if last.streams == 0 {
		return 0
	}
	return float64(last.rss-h.before) / float64(last.streams)
}

// scrapeBound is how many scrapes of its own the engine may see over span
// with a cache of window: one per window the span touches, plus one for a
// window that began just before the span and ends inside it.
func scrapeBound(span, window time.Duration) int64 {
	if window <= 0 {
		return 0
	}
	return int64(math.Ceil(span.Seconds()/window.Seconds())) + 1
}

// cpuPer is the CPU time per request, 0 without requests.
func cpuPer(t *tally) time.Duration {
	if t == nil || t.requests == 0 {
		return 0
	}
	return t.cpu / time.Duration(t.requests)
}
