package machine

import (
	"strings"
	"testing"
)

func TestLoadAvgIsThreeFigures(t *testing.T) {
	if got := LoadAvg(); got != "?" && len(strings.Fields(got)) != 3 {
		t.Fatalf("LoadAvg() = %q", got)
	}
}
