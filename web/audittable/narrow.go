package audittable

import (
	"slices"

	"github.com/loadreporter/loadreporter/web/humanize"
)

// NarrowWidth is what a Narrow table's text rows fit in, for a terminal.
const NarrowWidth = 120

// narrowColumns are the columns a Narrow reports table keeps: what an
// operator reads first; the rest stays in the wide table, CSV and JSON.
var narrowColumns = []string{"report_time", "worker_addr", "status", "dp_rank", "num_running_reqs", "num_waiting_reqs", "token_usage", "last_error"}

// narrowCell bounds a text cell of a Narrow table, in characters.
const narrowCell = 21

// Narrow is t for a terminal: a reports table keeps narrowColumns, and
// every text cell is cut to narrowCell characters, ending in "…", so that
// a row fits NarrowWidth columns.
func Narrow(t Table) Table {
	reports := slices.Equal(t.Columns, reportsColumns)
	keep := make([]int, 0, len(t.Columns))
	for i, c := range t.Columns {
		if !reports || slices.Contains(narrowColumns, c.Name) {
			keep = append(keep, i)
		}
	}
	out := t
	out.Columns = make([]Column, len(keep))
	for j, i := range keep {
		out.Columns[j] = t.Columns[i]
	}
	out.Rows = make([][]Cell, len(t.Rows))
	for r, row := range t.Rows {
		cut := make([]Cell, len(keep))
		for j, i := range keep {
			cut[j] = row[i]
			if t.Columns[i].Kind == KindText {
				cut[j].Text = humanize.Ellipsize(cut[j].Text, narrowCell)
			}
		}
		out.Rows[r] = cut
	}
	return out
}
