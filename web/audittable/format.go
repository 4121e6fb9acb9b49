package audittable

import (
	"time"
)

// How people read the cells. They match how the dashboard writes numbers
// on its other pages (package humanize), so an audit table reads like the
// rest of it.

// timeLayout is how people read a time: UTC, to the second.
const timeLayout = "2006-01-02 15:04:05"

// isoTime is a time as CSV and JSON hold it.
func isoTime(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }
