package machine

import (
	"os"
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
