package audittable

import (
	"testing"
	"time"
)

// The cases of web's TestFormatting: an audit table reads like the rest
// of the dashboard.
func TestFormatting(t *testing.T) {
	for _, tc := range []struct{ got, want string }{
		{isoTime(time.Date(2026, 11, 29, 8, 1, 2, 500, time.FixedZone("x", 3600))), "2026-11-29T07:01:02.0000005Z"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
}
