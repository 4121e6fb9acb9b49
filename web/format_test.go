package web

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/loadreporter/loadreporter/domain"
	"github.com/loadreporter/loadreporter/ports"
)

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
		{ago(-time.Second), "just now"},
		{ago(999 * time.Millisecond), "just now"},
		{ago(3 * time.Second), "3 s ago"},
		{ago(59*time.Second + 999*time.Millisecond), "59 s ago"},
		{ago(5 * time.Minute), "5 min ago"},
		{ago(2 * time.Hour), "2 h ago"},
		{ago(47 * time.Hour), "47 h ago"},
		{ago(72 * time.Hour), "3 d ago"},
		{duration(450 * time.Millisecond), "450 ms"},
		{duration(12300 * time.Millisecond), "12.3 s"},
		{duration(time.Minute), "1 min"},
		{duration(5*time.Minute + 3*time.Second), "5 min 3 s"},
		{duration(2*time.Hour + 5*time.Minute + 10*time.Second), "2 h 5 min"},
		{duration(76 * time.Hour), "3 d 4 h"},
		{duration(-90 * time.Second), "-1 min 30 s"},
		{clock(time.Date(2026, 11, 29, 8, 1, 2, 500, time.FixedZone("x", 3600))), "2026-11-29 07:01:02 UTC"},
		{clock(time.Time{}), "—"},
		{plural(1, "row"), "1 row"},
		{plural(2048, "row"), "2,048 rows"},
		{barWidth(0.4213), "42.1"},
		{barWidth(1.7), "100.0"},
		{barWidth(math.NaN()), "0"},
		{usageLevel(0.69), "low"},
		{usageLevel(0.7), "mid"},
		{usageLevel(0.95), "high"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
}

func TestParseTimeAndSpan(t *testing.T) {
	want := time.Date(2026, 11, 29, 8, 30, 0, 0, time.UTC)
	for _, s := range []string{"2026-11-29 08:30:00", "2026-11-29T08:30", "2026-11-29 08:30", "2026-11-29T09:30:00+01:00", " 2026-11-29T08:30:00Z "} {
		got, err := parseTime("since", s)
		if err != nil || !got.Equal(want) {
			t.Errorf("parseTime(%q) = %v, %v", s, got, err)
		}
	}
	if _, err := parseTime("until", "tomorrow"); err == nil || !strings.HasPrefix(err.Error(), "until: ") {
		t.Errorf("parseTime(tomorrow) error = %v", err)
	}
	for s, want := range map[string]time.Duration{"90s": 90 * time.Second, "15m": 15 * time.Minute, "1h30m": 90 * time.Minute, "7d": 7 * 24 * time.Hour, "0.5d": 12 * time.Hour} {
		if got, err := parseSpan("last", s); err != nil || got != want {
			t.Errorf("parseSpan(%q) = %v, %v", s, got, err)
		}
	}
	for _, s := range []string{"", "0", "-1h", "soon", "1e9d"} {
		if _, err := parseSpan("last", s); err == nil {
			t.Errorf("parseSpan(%q) accepted", s)
		}
	}
}

func TestFieldOfNamesTheArgument(t *testing.T) {
	// Every argument error the query port can return lands on a field.
	cases := map[string]error{
		"since":     ports.Window{}.Validate(),
		"until":     ports.Window{Since: t0, Until: t0}.Validate(),
		"worker":    ports.OutagesQuery{Window: ports.Window{Since: t0, Until: fixNow}, Workers: []string{" "}}.Validate(),
		"rank":      ports.RankStatsQuery{Window: ports.Window{Since: t0, Until: fixNow}, Ranks: []int64{-1}}.Validate(),
		"limit":     ports.OutagesQuery{Window: ports.Window{Since: t0, Until: fixNow}, Limit: -1}.Validate(),
		"interval":  ports.GapsQuery{Window: ports.Window{Since: t0, Until: fixNow}}.Validate(),
		"threshold": ports.ImbalanceQuery{Window: ports.Window{Since: t0, Until: fixNow}, Threshold: 2}.Validate(),
		"cursor":    ports.ReportsQuery{Window: ports.Window{Since: t0, Until: fixNow}, Cursor: "x"}.Validate(),
		"status": func() error {
			_, err := ports.ParseStatus("sleepy")
			return err
		}(),
	}
	for field, err := range cases {
		if err == nil || domain.ErrorCode(err) != domain.CodeInvalidArgument {
			t.Fatalf("%s: no argument error (%v)", field, err)
		}
		if got := fieldOf(domain.ErrorMessage(err)); got != field {
			t.Errorf("fieldOf(%q) = %q, want %q", domain.ErrorMessage(err), got, field)
		}
	}
	if got := fieldOf("something else went wrong"); got != "" {
		t.Errorf("fieldOf(unrelated) = %q", got)
	}
}
