package machine

import (
	"cmp"
	"math"
	"os"
	"slices"
	"strings"
)

// LoadAvg is the machine's 1, 5 and 15 minute load averages, "?" where
// /proc does not say.
func LoadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// Percentile is the nearest-rank p-th percentile (0 < p ≤ 100) of xs:
// the smallest value with at least p % of the values at or below it;
// false for no values. xs is left as it was.
func Percentile[T cmp.Ordered](xs []T, p float64) (T, bool) {
	if len(xs) == 0 {
		var zero T
		return zero, false
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	i := int(math.Ceil(p/100*float64(len(s)))) - 1
	return s[min(max(i, 0), len(s)-1)], true
}
