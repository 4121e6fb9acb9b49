package main

import (
	"math"
	"testing"
)

func TestPercentileNearestRank(t *testing.T) {
	t.Parallel()
	hundred := make([]float64, 100)
	for i := range hundred {
		hundred[i] = float64(100 - i) // unsorted on purpose
	}
	for _, tc := range []struct {
		xs   []float64
		p    float64
		want float64
	}{
		{hundred, 50, 50}, {hundred, 99, 99}, {hundred, 100, 100}, {hundred, 1, 1}, {hundred, 0.5, 1},
		{[]float64{3}, 99, 3},
		{[]float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, 90, 9}, {[]float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, 91, 10},
		{[]float64{1, math.Inf(1)}, 50, 1}, {[]float64{1, math.Inf(1)}, 99, math.Inf(1)},
	} {
		if got := percentile(append([]float64(nil), tc.xs...), tc.p); got != tc.want {
			t.Errorf("p%g of %d values: %g, want %g", tc.p, len(tc.xs), got, tc.want)
		}
	}
	if !math.IsNaN(percentile(nil, 50)) {
		t.Error("the percentile of nothing should be NaN")
	}
}

func TestJain(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		xs   []int
		want float64
	}{
		{[]int{5, 5, 5, 5}, 1}, {[]int{8, 0, 0, 0}, 0.25}, {[]int{1, 2, 3}, 36.0 / 42}, {[]int{0, 0}, 1}, {[]int{2, 0}, 0.5},
	} {
		if got := jain(tc.xs); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("jain(%v) = %g, want %g", tc.xs, got, tc.want)
		}
	}
}
