package web

import (
	"strings"
	"testing"
	"time"

	"github.com/loadreporter/loadreporter/domain"
	"github.com/loadreporter/loadreporter/domain/audit"
)

func TestFormatting(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ got, want string }{
		{ago(-time.Second), "just now"},
		{ago(999 * time.Millisecond), "just now"},
		{ago(3 * time.Second), "3 s ago"},
		{ago(59*time.Second + 999*time.Millisecond), "59 s ago"},
		{ago(5 * time.Minute), "5 min ago"},
		{ago(2 * time.Hour), "2 h ago"},
		{ago(47 * time.Hour), "47 h ago"},
		{ago(72 * time.Hour), "3 d ago"},
		{clock(time.Date(2026, 11, 29, 8, 1, 2, 500, time.FixedZone("x", 3600))), "2026-11-29 07:01:02 UTC"},
		{clock(time.Time{}), "—"},
		{plural(1, "row"), "1 row"},
		{plural(2048, "row"), "2,048 rows"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
}

func TestParseTimeAndSpan(t *testing.T) {
	t.Parallel()
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
	// Well formed but past what a duration holds: said so, not "not a
	// positive duration".
	for _, s := range []string{"3000000h", "9999999999999h", "200000d", "1e9d"} {
		if _, err := parseSpan("last", s); err == nil || !strings.Contains(err.Error(), "is too long; at most 100000d") {
			t.Errorf("parseSpan(%q) = %v, want too long", s, err)
		}
	}
	for _, s := range []string{"soon", "-1h", "0"} {
		if _, err := parseSpan("last", s); err == nil || !strings.Contains(err.Error(), "not a positive duration") {
			t.Errorf("parseSpan(%q) = %v, want not a positive duration", s, err)
		}
	}
}

func TestFieldOfNamesTheArgument(t *testing.T) {
	t.Parallel()
	// Every argument error the query port can return lands on a field.
	cases := map[string]error{
		"since":     audit.Window{}.Validate(),
		"until":     audit.Window{Since: t0, Until: t0}.Validate(),
		"worker":    audit.OutagesQuery{Window: audit.Window{Since: t0, Until: fixNow}, Workers: []string{" "}}.Validate(),
		"rank":      audit.RankStatsQuery{Window: audit.Window{Since: t0, Until: fixNow}, Ranks: []int64{-1}}.Validate(),
		"limit":     audit.OutagesQuery{Window: audit.Window{Since: t0, Until: fixNow}, Limit: -1}.Validate(),
		"interval":  audit.GapsQuery{Window: audit.Window{Since: t0, Until: fixNow}}.Validate(),
		"threshold": audit.ImbalanceQuery{Window: audit.Window{Since: t0, Until: fixNow}, Threshold: 2}.Validate(),
		"cursor":    audit.ReportsQuery{Window: audit.Window{Since: t0, Until: fixNow}, Cursor: "x"}.Validate(),
		"status": func() error {
			_, err := audit.ParseStatus("sleepy")
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
