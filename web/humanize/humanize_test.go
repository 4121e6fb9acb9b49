package humanize

import (
	"math"
	"testing"
	"time"
)

func TestHumanize(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ got, want string }{
		{Percent(0.4213), "42.1 %"},
		{Percent(0), "0.0 %"},
		{Percent(1), "100.0 %"},
		{Percent(math.NaN()), "—"},
		{BarLength(0.4213), "42.1"},
		{BarLength(1.7), "100.0"},
		{BarLength(-0.2), "0"},
		{BarLength(math.NaN()), "0"},
		{UsageLevel(0.69), "low"},
		{UsageLevel(0.7), "mid"},
		{UsageLevel(0.9), "high"},
		{UsageLevel(math.NaN()), "low"},
		{Thousands(0), "0"},
		{Thousands(999), "999"},
		{Thousands(1000), "1,000"},
		{Thousands(262144), "262,144"},
		{Thousands(-1234567), "-1,234,567"},
		{Thousands(math.MinInt64), "-9,223,372,036,854,775,808"},
		{Decimal(1234.56), "1,234.6"},
		{Decimal(0.04), "0.0"},
		{Decimal(-0.04), "-0.0"},
		{Decimal(-1234.5), "-1,234.5"},
		{Decimal(math.Inf(1)), "—"},
		{Duration(0), "0.000 s"},
		{Duration(450 * time.Millisecond), "0.450 s"},
		{Duration(999*time.Millisecond + 999*time.Microsecond), "0.999 s"},
		{Duration(time.Second), "1.000 s"},
		{Duration(12300 * time.Millisecond), "12.300 s"},
		{Duration(59999 * time.Millisecond), "59.999 s"},
		{Duration(-500 * time.Millisecond), "-0.500 s"},
		{Duration(time.Minute), "1 min"},
		{Duration(5*time.Minute + 3*time.Second), "5 min 3 s"},
		{Duration(2*time.Hour + 5*time.Minute + 10*time.Second), "2 h 5 min"},
		{Duration(76 * time.Hour), "3 d 4 h"},
		{Duration(-90 * time.Second), "-1 min 30 s"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
}

// TestSpanPastWhatADurationHolds: a window of centuries (the pages take
// years 0001–9999) reads its real length, where Sub saturates at 106 751 d.
func TestSpanPastWhatADurationHolds(t *testing.T) {
	t.Parallel()
	day := func(y int, m time.Month, d int) time.Time { return time.Date(y, m, d, 0, 0, 0, 0, time.UTC) }
	for _, tc := range []struct {
		from, to time.Time
		want     string
	}{
		{day(2026, 11, 30), day(2026, 12, 1).Add(90 * time.Minute), "1 d 1 h"},
		{day(1700, 1, 1), day(2026, 12, 1), "119,403 d"},
		{day(1, 1, 1), day(9999, 12, 31).Add(5 * time.Hour), "3,652,058 d 5 h"},
		{day(9999, 12, 31), day(1, 1, 1), "-3,652,058 d"},
	} {
		if got := Span(tc.from, tc.to); got != tc.want {
			t.Errorf("Span(%s, %s) = %q, want %q", tc.from.Format(time.DateOnly), tc.to.Format(time.DateOnly), got, tc.want)
		}
	}
}

func TestFractionAndOrDash(t *testing.T) {
	t.Parallel()
	for in, want := range map[float64]float64{-1: 0, 0.25: 0.25, 3: 1, math.NaN(): 0} {
		if got := Fraction(in); got != want {
			t.Errorf("Fraction(%v) = %v, want %v", in, got, want)
		}
	}
	if OrDash("") != "—" || OrDash("x") != "x" {
		t.Errorf("OrDash: %q %q", OrDash(""), OrDash("x"))
	}
}

func TestEllipsize(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		s    string
		n    int
		want string
	}{{"abcdef", 4, "abc…"}, {"abc", 3, "abc"}, {"ünïcödé", 5, "ünïc…"}, {"abc", 1, "abc"}} {
		if got := Ellipsize(c.s, c.n); got != c.want {
			t.Errorf("Ellipsize(%q, %d) = %q, want %q", c.s, c.n, got, c.want)
		}
	}
}
