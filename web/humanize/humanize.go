package humanize

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Percent writes a 0..1 fraction with one decimal: 0.4213 → "42.1 %".
func Percent(f float64) string {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return "—"
	}
	return strconv.FormatFloat(f*100, 'f', 1, 64) + " %"
}

// BarLength is a 0..1 fraction as a bar's length in 0..100 (a CSS
// percentage): clamped, and NaN is "0".
func BarLength(f float64) string {
	if !(f > 0) {
		return "0"
	}
	return strconv.FormatFloat(Fraction(f)*100, 'f', 1, 64)
}

// Fraction is f held to [0, 1]; NaN is 0.
func Fraction(f float64) float64 {
	if !(f > 0) {
		return 0
	}
	return min(f, 1)
}

// OrDash is s, or a dash where s is empty: a cell that has nothing to say.
func OrDash(s string) string {
	if s == "" {
		return "—"
	}
	return s
}

// UsageLevel names how full a KV cache at usage f is, for a bar's colour:
// "low" is comfortable, "mid" filling, "high" close to full (new requests
// will wait or evict).
func UsageLevel(f float64) string {
	switch {
	case f >= 0.9:
		return "high"
	case f >= 0.7:
		return "mid"
	}
	return "low"
}

// Thousands writes n with comma separators: 262144 → "262,144".
func Thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	sign := ""
	if strings.HasPrefix(s, "-") {
		sign, s = "-", s[1:]
	}
	var b strings.Builder
	b.WriteString(sign)
	for i := range len(s) {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// Decimal writes f with one decimal and thousands separators:
// 1234.56 → "1,234.6".
func Decimal(f float64) string {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return "—"
	}
	s := strconv.FormatFloat(f, 'f', 1, 64)
	whole, frac, _ := strings.Cut(s, ".")
	n, err := strconv.ParseInt(whole, 10, 64)
	if err != nil {
		return s
	}
	if n == 0 && strings.HasPrefix(whole, "-") {
		return "-0." + frac
	}
	return Thousands(n) + "." + frac
}

// Duration writes a duration the one way pages and the CLI show it: below
// a minute, seconds to the millisecond ("0.450 s", "1.000 s", "12.300 s"),
// so that values on either side of a second read alike; from a minute on,
// its two largest units ("5 min 3 s", "2 h 5 min", "3 d 4 h"). A fraction
// of a millisecond is dropped, never rounded up.
func Duration(d time.Duration) string {
	if d < 0 {
		return "-" + Duration(-d)
	}
	if d < time.Minute {
		ms := d.Milliseconds()
		return fmt.Sprintf("%d.%03d s", ms/1000, ms%1000)
	}
	units := []struct {
		d    time.Duration
		name string
	}{{24 * time.Hour, "d"}, {time.Hour, "h"}, {time.Minute, "min"}, {time.Second, "s"}}
	i := 0
	for d < units[i].d {
		i++
	}
	s := Thousands(int64(d/units[i].d)) + " " + units[i].name
	if small := d % units[i].d / units[i+1].d; small > 0 {
		s += " " + strconv.FormatInt(int64(small), 10) + " " + units[i+1].name
	}
	return s
}

// Span is Duration(to − from) for windows longer than a time.Duration
// holds (about 292 years), where Sub saturates: the audit pages accept
// any window within years 0001–9999.
func Span(from, to time.Time) string {
	if d := to.Sub(from); d > math.MinInt64 && d < math.MaxInt64 {
		return Duration(d)
	}
	secs := to.Unix() - from.Unix()
	sign := ""
	if secs < 0 {
		sign, secs = "-", -secs
	}
	s := sign + Thousands(secs/86400) + " d"
	if h := secs % 86400 / 3600; h > 0 {
		s += " " + strconv.FormatInt(h, 10) + " h"
	}
	return s
}

// Ellipsize is s cut to n runes, an ellipsis marking the cut (s whole
// when it fits, or when n leaves no room for the mark).
func Ellipsize(s string, n int) string {
	if n < 2 || utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n-1]) + "…"
}
