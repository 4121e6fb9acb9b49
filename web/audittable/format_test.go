package audittable

import (
	"testing"
	"time"
)

// Times as CSV and JSON hold them (to the millisecond, whichever way they
// were asked) and as a text table shows them (zone named).
func TestFormatting(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ got, want string }{
		{isoTime(time.Date(2026, 11, 29, 8, 1, 2, 500, time.FixedZone("x", 3600))), "2026-11-29T07:01:02Z"},
		{isoTime(time.Date(2026, 11, 29, 8, 1, 2, 123999999, time.UTC)), "2026-11-29T08:01:02.123Z"},
		{textTime("2026-11-29T08:01:02.12Z", "x"), "2026-11-29 08:01:02.120 UTC"},
		{textTime("", "—"), "—"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
}
