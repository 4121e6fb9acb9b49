package machine

import (
	"os"
	"strconv"
	"strings"
	"testing"
)

// TestLoadAvgIsThreeFigures: where /proc says, three numbers; elsewhere
// "?".
func TestLoadAvgIsThreeFigures(t *testing.T) {
	got := LoadAvg()
	if _, err := os.Stat("/proc/loadavg"); err != nil {
		if got != "?" {
			t.Fatalf("without /proc/loadavg: %q, want ?", got)
		}
		return
	}
	f := strings.Fields(got)
	if len(f) != 3 {
		t.Fatalf("LoadAvg() = %q, want three figures", got)
	}
	for _, x := range f {
		if _, err := strconv.ParseFloat(x, 64); err != nil {
			t.Fatalf("LoadAvg() = %q: %q is not a number", got, x)
		}
	}
}

func TestPercentileIsNearestRank(t *testing.T) {
	t.Parallel()
	xs := []int{10, 1, 9, 2, 8, 3, 7, 4, 6, 5}
	for _, c := range []struct {
		p    float64
		want int
	}{{50, 5}, {90, 9}, {99, 10}, {100, 10}, {1, 1}} {
		if got, ok := Percentile(xs, c.p); !ok || got != c.want {
			t.Errorf("p%g of 1..10 = %d, %v; want %d", c.p, got, ok, c.want)
		}
	}
	if xs[0] != 10 {
		t.Error("Percentile sorted its argument")
	}
	if _, ok := Percentile([]float64(nil), 50); ok {
		t.Error("a percentile of nothing")
	}
}
