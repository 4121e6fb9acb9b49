package web

import (
	"strconv"
	"time"

	"github.com/loadreporter/loadreporter/web/humanize"
)

// Numbers and times as people read them. static/live.js (web/live/src)
// writes the live page's numbers the same way; keep both in step.

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
	return humanize.Thousands(int64(d/(24*time.Hour))) + " d ago"
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

// plural writes a count with its noun: "1 row", "2,048 rows".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return humanize.Thousands(int64(n)) + " " + noun + "s"
}
