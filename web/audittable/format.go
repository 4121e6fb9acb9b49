package audittable

import (
	"time"
)

// How people read the cells. They match how the dashboard writes numbers
// on its other pages (package humanize), so an audit table reads like the
// rest of it.

// timeLayout is how people read a time on a page, whose headings and
// window say UTC: UTC, to the second.
const timeLayout = "2006-01-02 15:04:05"

// textTimeLayout is how people read a time in a text table (the CLI's),
// which has no page around it to say the zone: UTC, to the millisecond,
// zone named.
const textTimeLayout = "2006-01-02 15:04:05.000 UTC"

// isoTime is a time as CSV and JSON hold it: RFC 3339 in UTC, to the
// millisecond. The RPC carries milliseconds, so every way of asking (the
// dashboard's download, the CLI through a reporter or straight from the
// database) writes the same bytes; a fraction of a millisecond is dropped.
func isoTime(t time.Time) string {
	return t.UTC().Truncate(time.Millisecond).Format(time.RFC3339Nano)
}

// textTime is a raw (isoTime) time as a text table shows it; fallback when
// raw is no such time.
func textTime(raw, fallback string) string {
	t, err := time.Parse(time.RFC3339Nano, raw)
	if err != nil {
		return fallback
	}
	return t.UTC().Format(textTimeLayout)
}
