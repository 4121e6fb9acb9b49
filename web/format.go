package web

import (
	"math"
	"strconv"
	"strings"
	"time"
)

// Numbers and times as people read them. static/live.js (web/live/src)
// writes the live page's numbers the same way; keep both in step.

// percent writes a 0..1 fraction as a percentage with one decimal:
// 0.4213 → "42.1 %".
func percent(f float64) string {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return "—"
	}
	return strconv.FormatFloat(f*100, 'f', 1, 64) + " %"
}

// thousands writes n with comma thousands separators: 262144 → "262,144".
func thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	if neg {
		s = s[1:]
	}
	var b strings.Builder
	if neg {
		b.WriteByte('-')
	}
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// decimal writes f with one decimal and thousands separators:
// 1234.56 → "1,234.6".
func decimal(f float64) string {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return "—"
	}
	s := strconv.FormatFloat(f, 'f', 1, 64)
	whole, frac, _ := strings.Cut(s, ".")
	n, err := strconv.ParseInt(whole, 10, 64)
	if err != nil {
		return s
	}
	out := thousands(n)
	if n == 0 && strings.HasPrefix(whole, "-") {
		out = "-0"
	}
	return out + "." + frac
}

// ago writes how long ago something happened, coarsely: "just now",
// "3 s ago", "5 min ago", "2 h ago", "3 d ago". A time in the future
// (clock skew) reads "just now".
func ago(d time.Duration) string {
	switch {
	case d < time.Second:
		return "just now"
	case d < time.Minute:
		return strconv.FormatInt(int64(d/time.Second), 10) + " s ago"
	case d < time.Hour:
		return strconv.FormatInt(int64(d/time.Minute), 10) + " min ago"
	case d < 48*time.Hour:
		return strconv.FormatInt(int64(d/time.Hour), 10) + " h ago"
	}
	return thousands(int64(d/(24*time.Hour))) + " d ago"
}

// duration writes a span with its two largest units: "450 ms", "12.3 s",
// "5 min 3 s", "2 h 5 min", "3 d 4 h".
func duration(d time.Duration) string {
	if d < 0 {
		return "-" + duration(-d)
	}
	switch {
	case d < time.Second:
		return strconv.FormatInt(d.Milliseconds(), 10) + " ms"
	case d < time.Minute:
		return strconv.FormatFloat(d.Seconds(), 'f', 1, 64) + " s"
	}
	type unit struct {
		d    time.Duration
		name string
	}
	units := []unit{{24 * time.Hour, "d"}, {time.Hour, "h"}, {time.Minute, "min"}, {time.Second, "s"}}
	for i, u := range units[:3] {
		if d < u.d {
			continue
		}
		big, rest := d/u.d, d%u.d
		next := units[i+1]
		s := thousands(int64(big)) + " " + u.name
		if small := rest / next.d; small > 0 {
			s += " " + strconv.FormatInt(int64(small), 10) + " " + next.name
		}
		return s
	}
	return d.String()
}

// Time layouts: people read UTC with seconds; forms take the same.
const (
	timeLayout  = "2006-01-02 15:04:05"
	shortLayout = "15:04:05"
)

// clock writes t in UTC as "2006-01-02 15:04:05 UTC".
func clock(t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	return t.UTC().Format(timeLayout) + " UTC"
}

// orDash returns s, or an em dash when s is empty, so empty cells read as
// "not set" rather than as missing.
func orDash(s string) string {
	if s == "" {
		return "—"
	}
	return s
}

// plural writes a count with its noun: "1 row", "2,048 rows".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return thousands(int64(n)) + " " + noun + "s"
}
