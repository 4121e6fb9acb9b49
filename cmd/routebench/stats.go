package main

import (
	"math"
	"slices"

	"github.com/loadreporter/loadreporter/cmd/internal/machine"
)

// percentile is the nearest-rank p-th percentile (0 < p ≤ 100) of xs;
// +Inf stands for a request that never got there (it was still waiting
// when the row ended), so a tail of those shows as +Inf. NaN for no
// values.
func percentile(xs []float64, p float64) float64 {
	v, ok := machine.Percentile(xs, p)
	if !ok {
		return math.NaN()
	}
	return v
}

// jain is Jain's fairness index of xs, (Σx)² / (n·Σx²): 1 when every
// worker got the same, 1/n when one got everything. 1 for nothing at all.
func jain(xs []int) float64 {
	var sum, sq float64
	for _, x := range xs {
		sum += float64(x)
		sq += float64(x) * float64(x)
	}
	if sq == 0 {
		return 1
	}
	return sum * sum / (float64(len(xs)) * sq)
}

// mean is the arithmetic mean; NaN for none.
func mean(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	var s float64
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}

// spread is max − min of xs (0 for none).
func spread(xs []int) int {
	if len(xs) == 0 {
		return 0
	}
	return slices.Max(xs) - slices.Min(xs)
}
