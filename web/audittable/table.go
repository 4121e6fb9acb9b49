package audittable

import (
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/loadreporter/loadreporter/web/humanize"

	"github.com/loadreporter/loadreporter/domain"
)

// Kind is what a column holds; it decides how JSON types a cell.
type Kind int

const (
	// KindText is a string; JSON holds it as a string, empty or not.
	KindText Kind = iota
	// KindTime is an RFC 3339 time in UTC, to the millisecond; people
	// read "2006-01-02 15:04:05" on a page and "2006-01-02 15:04:05.000
	// UTC" in a text table. An empty cell (no such time) is null in JSON.
	KindTime
	// KindInt is a whole number; people read it with thousands
	// separators.
	KindInt
	// KindRatio is a fraction, 0..1; people read a percentage.
	KindRatio
	// KindRate is a rate (tokens per second); people read one decimal.
	KindRate
	// KindDuration is a span in whole milliseconds (the column's name ends
	// in _ms); people read seconds to the millisecond below a minute
	// ("0.999 s"), its two largest units above ("1 min 50 s").
	KindDuration
	// KindBool is true or false; people read yes or no, unless the
	// column says otherwise (ongoing).
	KindBool
	// KindStatus is a report status, or the statuses of an outage joined
	// by ", "; JSON holds it as a string.
	KindStatus
)

// Column is one column of a Table.
type Column struct {
	// Name is the column's name in the CSV header and the JSON keys.
	Name string
	// Label is the column's heading for people.
	Label string
	Kind  Kind
}

// columnHelp says, by column name, what values mean where the label
// cannot.
var columnHelp = map[string]string{"ongoing": OngoingHelp}

// Help says what the column's values mean where its label cannot; empty
// when the label says it all.
func (c Column) Help() string { return columnHelp[c.Name] }

// Cell is one value of a Table.
type Cell struct {
	// Raw is the value CSV and JSON hold: RFC 3339 times to the
	// millisecond, plain numbers, durations in whole milliseconds, true or
	// false. Empty when the value is
	// absent (a rank column of a report without ranks, the end of an
	// ongoing outage).
	Raw string
	// Text is the value for people; "—" when absent.
	Text string
	// Status is, in a KindStatus column, the status the cell stands for:
	// the report's, or for an outage the worst it saw (UNREACHABLE when it
	// saw one, else STALE). Pages colour the cell by it.
	Status domain.Status
}

// Table is the answer to a Query.
type Table struct {
	Columns []Column
	// Rows hold one Cell per column.
	Rows [][]Cell
	// Note tells people what the rows leave out; empty when nothing.
	Note string
	// Truncated says a limit cut the result: the query's Limit, or
	// MaxReports for a reports query with AllPages.
	Truncated bool
	// ReportCount is the number of reports a reports table holds (it has
	// one row per rank); 0 for the other queries.
	ReportCount int
	// NextCursor continues a reports query after the last report read;
	// empty when nothing follows.
	NextCursor string
}

// absent is an empty cell.
var absent = Cell{Text: "—"}

func textCell(s string) Cell {
	if s == "" {
		return absent
	}
	return Cell{Raw: s, Text: s}
}

func timeCell(t time.Time) Cell {
	if t.IsZero() {
		return absent
	}
	return Cell{Raw: isoTime(t), Text: t.UTC().Format(timeLayout)}
}

func intCell(n int64) Cell { return Cell{Raw: strconv.FormatInt(n, 10), Text: humanize.Thousands(n)} }

func floatRaw(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

func ratioCell(f float64) Cell { return Cell{Raw: floatRaw(f), Text: humanize.Percent(f)} }

func rateCell(f float64) Cell { return Cell{Raw: floatRaw(f), Text: humanize.Decimal(f)} }

// durationCell holds whole milliseconds, as the RPC carries them, so a
// duration reads the same whichever way it was asked.
func durationCell(d time.Duration) Cell {
	return Cell{Raw: strconv.FormatInt(d.Milliseconds(), 10), Text: humanize.Duration(d)}
}

func boolCell(b bool) Cell {
	if b {
		return Cell{Raw: "true", Text: "yes"}
	}
	return Cell{Raw: "false", Text: "no"}
}

func statusCell(s domain.Status) Cell { return Cell{Raw: s.String(), Text: s.String(), Status: s} }

// statusesCell is an outage's statuses, standing for the worst of them.
func statusesCell(ss []domain.Status) Cell {
	names := make([]string, len(ss))
	for i, s := range ss {
		names[i] = s.String()
	}
	worst := domain.StatusStale
	if slices.Contains(ss, domain.StatusUnreachable) {
		worst = domain.StatusUnreachable
	}
	s := strings.Join(names, ", ")
	return Cell{Raw: s, Text: s, Status: worst}
}
