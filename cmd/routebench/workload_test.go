package main

import (
	"math"
	"slices"
	"testing"
	"time"
)

// TestArrivalsSeededAndReproducible: one seed gives the same stream every
// time, another seed a different one.
func TestArrivalsSeededAndReproducible(t *testing.T) {
	t.Parallel()
	for _, w := range workloads {
		p := profile{Rate: 50}
		a := arrivals(7, w, p, 60*time.Second, 4)
		b := arrivals(7, w, p, 60*time.Second, 4)
		c := arrivals(8, w, p, 60*time.Second, 4)
		if !slices.Equal(a, b) {
			t.Errorf("%s: seed 7 gave two different streams", w.Name)
		}
		if slices.Equal(a, c) {
			t.Errorf("%s: seeds 7 and 8 gave the same stream", w.Name)
		}
	}
}

// TestArrivalsArePoisson: the count over a long window is λT within four
// standard deviations, the gaps have mean 1/λ and coefficient of
// variation 1 (exponential), times increase, routers are used evenly, and
// a burst multiplies the rate inside its window only.
func TestArrivalsArePoisson(t *testing.T) {
	t.Parallel()
	const rate, span = 40.0, 1000 * time.Second
	a := arrivals(3, workloads[1], profile{Rate: rate}, span, 4)
	want := rate * span.Seconds()
	if d := math.Abs(float64(len(a)) - want); d > 4*math.Sqrt(want) {
		t.Errorf("%d arrivals in %v at %g/s, want %g ± %g", len(a), span, rate, want, 4*math.Sqrt(want))
	}
	var gaps []float64
	perRouter := make([]int, 4)
	for i, q := range a {
		perRouter[q.Router]++
		if i > 0 {
			if q.At <= a[i-1].At {
				t.Fatalf("arrival %d at %v after %v", i, q.At, a[i-1].At)
			}
			gaps = append(gaps, (q.At - a[i-1].At).Seconds())
		}
	}
	m := mean(gaps)
	var v float64
	for _, g := range gaps {
		v += (g - m) * (g - m)
	}
	cv := math.Sqrt(v/float64(len(gaps))) / m
	if math.Abs(m*rate-1) > 0.03 || math.Abs(cv-1) > 0.03 {
		t.Errorf("gaps: mean %.4f s (want %.4f), coefficient of variation %.3f (want 1)", m, 1/rate, cv)
	}
	for r, n := range perRouter {
		if math.Abs(float64(n)/float64(len(a))-0.25) > 0.02 {
			t.Errorf("router %d got %d of %d arrivals", r, n, len(a))
		}
	}

	b := arrivals(3, workloads[1], profile{Rate: rate, BurstAt: 100 * time.Second, BurstLen: 100 * time.Second, Factor: 3}, 300*time.Second, 4)
	count := func(lo, hi time.Duration) int {
		n := 0
		for _, q := range b {
			if q.At >= lo && q.At < hi {
				n++
			}
		}
		return n
	}
	before, in, after := count(0, 100*time.Second), count(100*time.Second, 200*time.Second), count(200*time.Second, 300*time.Second)
	if r := float64(in) / float64(before+after) * 2; math.Abs(r-3) > 0.3 {
		t.Errorf("burst of factor 3: %d arrivals in it, %d and %d in the windows of the same length around it (ratio %.2f)", in, before, after, r)
	}
}

// TestSizes: fixed512 is 512/512; lognormal stays in its clips with its
// medians.
func TestSizes(t *testing.T) {
	t.Parallel()
	for _, q := range arrivals(5, workloads[1], profile{Rate: 10}, 100*time.Second, 1) {
		if q.Prompt != 512 || q.Output != 512 {
			t.Fatalf("fixed512 drew %d/%d", q.Prompt, q.Output)
		}
	}
	a := arrivals(5, workloads[0], profile{Rate: 100}, 200*time.Second, 1)
	var prompts, outputs []float64
	for _, q := range a {
		if q.Prompt < minPrompt || q.Prompt > maxPrompt || q.Output < minOutput || q.Output > maxOutput {
			t.Fatalf("lognormal drew %d/%d, outside %d..%d / %d..%d", q.Prompt, q.Output, minPrompt, maxPrompt, minOutput, maxOutput)
		}
		prompts, outputs = append(prompts, float64(q.Prompt)), append(outputs, float64(q.Output))
	}
	if p, o := percentile(prompts, 50), percentile(outputs, 50); math.Abs(p/512-1) > 0.05 || math.Abs(o/256-1) > 0.05 {
		t.Errorf("lognormal medians %g and %g, want 512 and 256", p, o)
	}
	if p99 := percentile(prompts, 99); p99 < 4000 {
		t.Errorf("lognormal prompt p99 %g: want a heavy tail (e^(2.33σ) × 512 ≈ 5250)", p99)
	}
}
