package audittable

import (
	"math"
	"testing"
	"time"
)

// The cases of web's TestFormatting: an audit table reads like the rest
// of the dashboard.
func TestFormatting(t *testing.T) {
	for _, tc := range []struct{ got, want string }{
		{percent(0.4213), "42.1 %"},
		{percent(0), "0.0 %"},
		{percent(1), "100.0 %"},
		{percent(math.NaN()), "—"},
		{thousands(0), "0"},
		{thousands(999), "999"},
		{thousands(1000), "1,000"},
		{thousands(262144), "262,144"},
		{thousands(-1234567), "-1,234,567"},
		{thousands(math.MinInt64), "-9,223,372,036,854,775,808"},
		{decimal(1234.56), "1,234.6"},
		{decimal(0.04), "0.0"},
		{decimal(-0.04), "-0.0"},
		{decimal(-1234.5), "-1,234.5"},
		{decimal(math.Inf(1)), "—"},
		{span(450 * time.Millisecond), "450 ms"},
		{span(12300 * time.Millisecond), "12.3 s"},
		{span(time.Minute), "1 min"},
		{span(5*time.Minute + 3*time.Second), "5 min 3 s"},
		{span(2*time.Hour + 5*time.Minute + 10*time.Second), "2 h 5 min"},
		{span(76 * time.Hour), "3 d 4 h"},
		{span(-90 * time.Second), "-1 min 30 s"},
		{isoTime(time.Date(2026, 11, 29, 8, 1, 2, 500, time.FixedZone("x", 3600))), "2026-11-29T07:01:02.0000005Z"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
}
