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
