package main

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

func ms(n int) time.Duration { return time.Duration(n) * time.Millisecond }

func TestPercentileIsNearestRank(t *testing.T) {
	t.Parallel()
	var ds []time.Duration
	for i := 100; i >= 1; i-- { // out of order on purpose
		ds = append(ds, ms(i))
	}
	orig := slices.Clone(ds)
	for _, c := range []struct {
		p    float64
		want time.Duration
	}{{50, ms(50)}, {99, ms(99)}, {99.9, ms(100)}, {100, ms(100)}, {1, ms(1)}, {0.1, ms(1)}} {
		if got := percentile(ds, c.p); got != c.want {
			t.Errorf("p%g of 1..100 ms = %v, want %v", c.p, got, c.want)
		}
	}
	if !slices.Equal(ds, orig) {
		t.Error("percentile reordered its input")
	}
	// With 10 samples the p99 is the largest: one slow request in ten
	// is the 99th percentile's business.
	ten := []time.Duration{ms(1), ms(1), ms(1), ms(1), ms(1), ms(1), ms(1), ms(1), ms(1), ms(40)}
	if got := percentile(ten, 99); got != ms(40) {
		t.Errorf("p99 of nine 1 ms and one 40 ms = %v, want 40ms", got)
	}
	if got := percentile(ten, 50); got != ms(1) {
		t.Errorf("p50 = %v, want 1ms", got)
	}
	if got := percentile(nil, 99); got != 0 {
		t.Errorf("p99 of nothing = %v, want 0", got)
	}
}

func TestFlatHold(t *testing.T) {
	t.Parallel()
	const mib = 1 << 20
	steps := func(rss int64) []holdStep { return []holdStep{{500, rss - 10*mib}, {1000, rss}} }
	for _, c := range []struct {
		name string
		h    holdResult
		flat bool
	}{
		{"no growth", holdResult{before: 10 * mib, steps: steps(40 * mib), held: 40 * mib}, true},
		{"a tenth of the streams' cost", holdResult{before: 10 * mib, steps: steps(40 * mib), held: 43 * mib}, true},
		{"more than a tenth", holdResult{before: 10 * mib, steps: steps(40 * mib), held: 43*mib + 1}, false},
		{"1 MiB of noise on a small cost", holdResult{before: 10 * mib, steps: steps(12 * mib), held: 13 * mib}, true},
		{"shrinking", holdResult{before: 10 * mib, steps: steps(40 * mib), held: 30 * mib}, true},
		{"nothing measured", holdResult{}, false},
	} {
		if got := flatHold(c.h); got != c.flat {
			t.Errorf("%s: flat %v, want %v", c.name, got, c.flat)
		}
	}
	if got := perStream(holdResult{before: 10 * mib, steps: steps(30 * mib)}); got != 20*mib/1000.0 {
		t.Errorf("per stream %v, want %v", got, 20*mib/1000.0)
	}
}

func TestScrapeBoundIsOnePerWindowTouched(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		span, window time.Duration
		want         int64
	}{
		{5 * time.Second, time.Second, 6},
		{5010 * time.Millisecond, time.Second, 7},
		{500 * time.Millisecond, time.Second, 2},
		{5 * time.Second, 0, 0},
	} {
		if got := scrapeBound(c.span, c.window); got != c.want {
			t.Errorf("scrapeBound(%v, %v) = %d, want %d", c.span, c.window, got, c.want)
		}
	}
}

func TestHoldStepsAreQuarters(t *testing.T) {
	t.Parallel()
	if got := holdSteps(1000); !slices.Equal(got, []int{250, 500, 750, 1000}) {
		t.Errorf("holdSteps(1000) = %v", got)
	}
	if got := holdSteps(2); !slices.Equal(got, []int{1, 2}) {
		t.Errorf("holdSteps(2) = %v", got)
	}
}

// sample is a run where the front does exactly as well as nginx.
func sample() results {
	o, _ := parse(nil)
	tl := func(total, first []time.Duration, cpu time.Duration) *tally {
		return &tally{total: total, first: first, requests: len(total), cpu: cpu, wall: time.Second}
	}
	lat := []time.Duration{ms(1), ms(2), ms(3)}
	h := holdResult{before: 10 << 20, steps: []holdStep{{250, 12 << 20}, {500, 14 << 20}, {750, 16 << 20}, {1000, 18 << 20}},
		held: 18 << 20, opened: 1000, alive: 1000}
	return results{
		o:      o,
		post:   map[string]*tally{direct: tl(lat, nil, 0), front: tl(lat, nil, 3*time.Millisecond), nginx: tl(lat, nil, 3*time.Millisecond)},
		sse:    map[string]*tally{direct: tl(lat, lat, 0), front: tl(lat, lat, 9*time.Millisecond), nginx: tl(lat, lat, 9*time.Millisecond)},
		unary:  map[string]*tally{direct: tl(lat, nil, 0), front: tl(lat, nil, 3*time.Millisecond)},
		stream: map[string]*tally{direct: tl(lat, lat, 0), front: tl(lat, lat, 9*time.Millisecond)},
		hold:   map[string]holdResult{front: h, nginx: h},
		scrape: scrapeResult{served: 2000, engineHits: 6, span: 5 * time.Second},
	}
}

func TestJudgeMetWhereTheFrontDoesAsWellAsNginx(t *testing.T) {
	t.Parallel()
	for _, v := range judge(sample()) {
		if !v.met {
			t.Errorf("%s: not met for a front equal to nginx", v.name)
		}
	}
}

func TestJudgeNotMet(t *testing.T) {
	t.Parallel()
	for name, c := range map[string]struct {
		mutate func(*results)
		part   string
	}{
		"POST p99":            {func(r *results) { r.post[front].total = []time.Duration{ms(1), ms(2), ms(4)} }, "POST: added p99"},
		"POST CPU":            {func(r *results) { r.post[front].cpu += time.Microsecond * 3 }, "POST: CPU"},
		"SSE p99":             {func(r *results) { r.sse[front].total = []time.Duration{ms(1), ms(2), ms(4)} }, "SSE: added p99, whole"},
		"SSE first event":     {func(r *results) { r.sse[front].first = []time.Duration{ms(1), ms(2), ms(4)} }, "SSE: added p99, first"},
		"SSE CPU":             {func(r *results) { r.sse[front].cpu *= 2 }, "SSE: CPU"},
		"a failed request":    {func(r *results) { r.sse[front].errors = 1 }, "every request"},
		"memory grew":         {func(r *results) { h := r.hold[front]; h.held += 2 << 20; r.hold[front] = h }, "memory flat"},
		"a stream died":       {func(r *results) { h := r.hold[front]; h.alive--; r.hold[front] = h }, "memory flat"},
		"scrapes over bound":  {func(r *results) { r.scrape.engineHits = 7 }, "one /metrics scrape"},
		"a scrape failed":     {func(r *results) { r.scrape.failed = 1 }, "one /metrics scrape"},
		"nothing was scraped": {func(r *results) { r.scrape.served = 0 }, "one /metrics scrape"},
	} {
		r := sample()
		c.mutate(&r)
		var unmet []string
		for _, v := range judge(r) {
			if !v.met {
				unmet = append(unmet, v.name)
			}
		}
		if len(unmet) != 1 || !strings.Contains(unmet[0], c.part) {
			t.Errorf("%s: not met %q, want only the part %q", name, unmet, c.part)
		}
	}
}

// The table says each judged figure's verdict beside it and sums them up
// under it.
func TestPrintTableMarksVerdicts(t *testing.T) {
	t.Parallel()
	r := sample()
	r.post[front].cpu *= 2
	var b bytes.Buffer
	printTable(&b, r, []string{"header line"})
	out := b.String()
	if !strings.HasPrefix(out, "header line\n") {
		t.Errorf("table does not start with its header:\n%s", out)
	}
	cpuLine := lineWith(out, "proxy CPU per request")
	if !strings.HasSuffix(cpuLine, "not met") {
		t.Errorf("POST CPU line %q, want it marked not met", cpuLine)
	}
	if l := lineWith(out, "engine /metrics hits"); !strings.HasSuffix(l, " met") || strings.HasSuffix(l, "not met") {
		t.Errorf("scrapes line %q, want it marked met", l)
	}
	if !strings.Contains(out, goal) || !strings.Contains(out, "met 7 of 8; not met: POST: CPU per request ≤ nginx's") {
		t.Errorf("summary missing or wrong:\n%s", out)
	}
}

// The gRPC rows are figures beside the engine direct: nothing judged, and
// no nginx figure, however the front did.
func TestPrintTableJudgesNoGRPCRow(t *testing.T) {
	t.Parallel()
	r := sample()
	r.unary[front].total = []time.Duration{ms(10), ms(20), ms(30)}
	r.stream[front].cpu *= 100
	r.stream[front].errors, r.stream[front].firstErr = 1, errors.New("stream cut")
	var b bytes.Buffer
	printTable(&b, r, nil)
	out := b.String()
	var section string
	for line := range strings.Lines(out) {
		if !strings.HasPrefix(line, " ") && strings.TrimSpace(line) != "" {
			section = line
		}
		if !strings.HasPrefix(section, "gRPC ") || !strings.HasPrefix(line, "  ") {
			continue
		}
		if strings.Contains(line, "met") {
			t.Errorf("gRPC row judged: %q", line)
		}
		if f := strings.Fields(line); !slices.Contains(f, "—") {
			t.Errorf("gRPC row %q has no empty nginx cell", line)
		}
	}
	if l := lineWith(out, "added over direct, p99"); l == "" {
		t.Fatal("no added p99 row")
	}
	if !strings.Contains(out, "met: all 8 parts") {
		t.Errorf("the gRPC figures moved the verdicts:\n%s", out)
	}
	if !strings.Contains(out, "first gRPC stream failure through front: stream cut") {
		t.Errorf("the gRPC stream's failure is not under the table:\n%s", out)
	}
	if l := lineWith(out, "front CPU per stream"); !strings.Contains(l, " 300000.0 ") {
		t.Errorf("gRPC CPU per stream line %q, want 300000.0 µs for the front (9 ms × 100 over 3 streams)", l)
	}
}

func lineWith(out, s string) string {
	for line := range strings.Lines(out) {
		if strings.Contains(line, s) {
			return strings.TrimRight(line, " \n")
		}
	}
	return ""
}

func TestParseRefusesWhatCannotBeMeasured(t *testing.T) {
	t.Parallel()
	if _, err := parse(nil); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	for _, args := range [][]string{
		{"--clients", "0"}, {"--hold", "0"}, {"--window", "0s"}, {"--scrape-every", "-1s"},
		{"--hold-for", "1s", "--hold-every", "1s"}, {"--rounds", "0"},
	} {
		if _, err := parse(args); err == nil {
			t.Errorf("parse(%q) took it", args)
		}
	}
}
