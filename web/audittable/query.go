package audittable

import (
	"cmp"
	"context"
	"iter"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/loadreporter/loadreporter/domain/audit"
	"github.com/loadreporter/loadreporter/web/humanize"

	"github.com/loadreporter/loadreporter/domain"
	"github.com/loadreporter/loadreporter/ports"
)

// The audit queries, by the names forms, the CLI and file names use.
const (
	Reports   = "reports"
	Outages   = "outages"
	RankStats = "rank-stats"
	Gaps      = "gaps"
	Imbalance = "imbalance"
)

// Names returns the names of the audit queries.
func Names() []string { return []string{Reports, Outages, RankStats, Gaps, Imbalance} }

const (
	// DefaultThreshold is the imbalance threshold callers offer when none
	// is given: one rank's KV cache 20 points fuller than another's.
	DefaultThreshold = 0.2
	// DefaultHistoryInterval is serve's default --history-interval: the
	// gaps interval callers offer when none is given and no reporter can
	// say its own (a query straight to the database).
	DefaultHistoryInterval = time.Second
	// MaxReports bounds a reports query with AllPages (about 28 h of
	// history at one report a second), so one request cannot read a
	// whole database.
	MaxReports = 100_000
)

// Query is one audit query with its arguments. Each query reads the
// arguments it has a use for and ignores the others.
type Query struct {
	// Name is one of Names.
	Name    string
	Window  audit.Window
	Workers []string
	// Statuses filter reports.
	Statuses []domain.Status
	// Ranks filter reports and rank-stats.
	Ranks []int64
	// Threshold is the token_usage spread imbalance looks for.
	Threshold float64
	// Interval is the history interval gaps measures against.
	Interval time.Duration
	// Limit is the page size of reports and the most rows of the others;
	// 0 is the port's default.
	Limit int
	// Cursor continues reports after a previous page (Table.NextCursor).
	Cursor string
	// AllPages makes reports follow the cursor to the end of the window,
	// up to MaxReports reports, instead of answering one page.
	AllPages bool
	// MaxRows bounds the rows of one page of reports (one per rank), for
	// a writer that holds the page whole: a page of many-rank reports
	// ends early, its cursor after the last report shown. 0: no bound.
	MaxRows int
}

func (q Query) reports() audit.ReportsQuery {
	return audit.ReportsQuery{Window: q.Window, Workers: q.Workers, Statuses: q.Statuses, Ranks: q.Ranks, Limit: q.Limit, Cursor: q.Cursor}
}

func (q Query) outages() audit.OutagesQuery {
	return audit.OutagesQuery{Window: q.Window, Workers: q.Workers, Limit: q.Limit}
}

func (q Query) rankStats() audit.RankStatsQuery {
	return audit.RankStatsQuery{Window: q.Window, Workers: q.Workers, Ranks: q.Ranks, Limit: q.Limit}
}

func (q Query) gaps() audit.GapsQuery {
	return audit.GapsQuery{Window: q.Window, Workers: q.Workers, Interval: q.Interval, Limit: q.Limit}
}

func (q Query) imbalance() audit.ImbalanceQuery {
	return audit.ImbalanceQuery{Window: q.Window, Workers: q.Workers, Threshold: q.Threshold, Limit: q.Limit}
}

// Validate checks the name and, with the port query type's Validate, the
// arguments the query reads; errors are CodeInvalidArgument and name the
// argument ("query: …", "since: …", "threshold …").
func (q Query) Validate() error {
	switch q.Name {
	case Reports:
		return q.reports().Validate()
	case Outages:
		return q.outages().Validate()
	case RankStats:
		return q.rankStats().Validate()
	case Gaps:
		return q.gaps().Validate()
	case Imbalance:
		return q.imbalance().Validate()
	}
	return unknown(q.Name)
}

func unknown(name string) error {
	return domain.Errorf(domain.CodeInvalidArgument, "query: unknown query %q; pick one of %s", name, strings.Join(Names(), ", "))
}

// Run answers query from q as one Table: with AllPages, the rows of
// every page of a reports query. Errors are the port's (or
// CodeInvalidArgument for an unknown name).
func Run(ctx context.Context, q ports.HistoryQuery, query Query) (Table, error) {
	var all Table
	for t, err := range Pages(ctx, q, query) {
		if err != nil {
			return Table{}, err
		}
		if all.Columns == nil {
			all = t
			continue
		}
		all.Rows = append(all.Rows, t.Rows...)
		all.ReportCount += t.ReportCount
		all.Note, all.Truncated, all.NextCursor = t.Note, t.Truncated, t.NextCursor
	}
	return all, nil
}

// Pages answers query from q a table at a time, for writers that stream:
// one table for every query but reports with AllPages, which yields one
// table per page read, each with the same columns. An error ends the
// sequence.
func Pages(ctx context.Context, q ports.HistoryQuery, query Query) iter.Seq2[Table, error] {
	return func(yield func(Table, error) bool) {
		if query.Name != Reports {
			yield(answer(ctx, q, query))
			return
		}
		read := 0
		for {
			page, err := q.Reports(ctx, query.reports())
			if err != nil {
				yield(Table{}, err)
				return
			}
			cutByRows := false
			if n := fitRows(page.Reports, query.MaxRows); n < len(page.Reports) {
				page.Reports, cutByRows = page.Reports[:n], true
				page.NextCursor = audit.KeyOf(page.Reports[n-1]).Cursor(false)
			}
			t := reportsTable(page.Reports)
			t.NextCursor = page.NextCursor
			read += len(page.Reports)
			// An empty page with a cursor would loop for ever; no store
			// should answer one, but a remote one might.
			follow := query.AllPages && page.NextCursor != "" && len(page.Reports) > 0 && read < MaxReports
			if page.NextCursor != "" && !follow {
				if query.AllPages {
					t.Truncated = true
					t.Note = "stopped after " + humanize.Thousands(int64(read)) + " reports: narrow the window to see the rest"
				} else if cutByRows {
					t.Note = "this page ends after " + humanize.Thousands(int64(len(page.Reports))) + " reports, at " +
						humanize.Thousands(int64(query.MaxRows)) + " rank rows at most; more reports follow it"
				} else {
					t.Note = "more reports follow this page"
				}
			}
			if !yield(t, nil) || !follow {
				return
			}
			query.Cursor = page.NextCursor
		}
	}
}

// fitRows is how many of reports, at least one, fit in maxRows rows (a
// row per rank, one for a report without ranks); maxRows 0 fits all.
func fitRows(reports []*domain.Report, maxRows int) int {
	if maxRows <= 0 {
		return len(reports)
	}
	rows := 0
	for i, r := range reports {
		if rows += max(1, len(r.Ranks)); rows > maxRows {
			return max(1, i)
		}
	}
	return len(reports)
}

// truncatedNote is the Note of a result its Limit cut.
const truncatedNote = "the limit cut this result: narrow the window or raise the limit"

func cut(t Table, truncated bool) Table {
	if truncated {
		t.Truncated, t.Note = true, truncatedNote
	}
	return t
}

// answer runs every query but reports.
func answer(ctx context.Context, q ports.HistoryQuery, query Query) (Table, error) {
	switch query.Name {
	case Outages:
		res, err := q.Outages(ctx, query.outages())
		if err != nil {
			return Table{}, err
		}
		t := Table{Columns: append(runColumns(),
			Column{"statuses", "Statuses", KindStatus}, Column{"reports", "Reports", KindInt}, Column{"last_error", "Last error", KindText},
		)}
		for _, o := range res.Outages {
			t.Rows = append(t.Rows, append(runCells(o.WorkerAddr, o.Start, o.End, o.Ongoing, o.Duration),
				statusesCell(o.Statuses), intCell(o.Reports), textCell(o.LastError),
			))
		}
		return cut(t, res.Truncated), nil
	case RankStats:
		res, err := q.RankStats(ctx, query.rankStats())
		if err != nil {
			return Table{}, err
		}
		t := Table{Columns: []Column{
			{"worker_addr", "Worker", KindText}, {"dp_rank", "Rank", KindInt}, {"reports", "Reports", KindInt},
			{"avg_token_usage", "Avg KV usage", KindRatio}, {"p95_token_usage", "p95 KV usage", KindRatio},
			{"max_token_usage", "Max KV usage", KindRatio}, {"max_waiting_reqs", "Max waiting", KindInt},
			{"mean_gen_throughput", "Mean throughput (tok/s)", KindRate},
		}}
		for _, s := range res.Stats {
			t.Rows = append(t.Rows, []Cell{
				textCell(s.WorkerAddr), intCell(s.DPRank), intCell(s.Reports),
				ratioCell(s.AvgTokenUsage), ratioCell(s.P95TokenUsage), ratioCell(s.MaxTokenUsage),
				intCell(s.MaxWaitingReqs), rateCell(s.MeanGenThroughput),
			})
		}
		return cut(t, res.Truncated), nil
	case Gaps:
		res, err := q.Gaps(ctx, query.gaps())
		if err != nil {
			return Table{}, err
		}
		return cut(gapsTable(res), res.Truncated), nil
	case Imbalance:
		res, err := q.Imbalance(ctx, query.imbalance())
		if err != nil {
			return Table{}, err
		}
		t := Table{Columns: append(runColumns(),
			Column{"peak_spread", "Peak spread", KindRatio}, Column{"peak_time", "Peak at", KindTime}, Column{"reports", "Reports", KindInt},
		)}
		for _, s := range res.Spans {
			t.Rows = append(t.Rows, append(runCells(s.WorkerAddr, s.Start, s.End, s.Ongoing, s.Duration),
				ratioCell(s.PeakSpread), timeCell(s.PeakTime), intCell(s.Reports),
			))
		}
		return cut(t, res.Truncated), nil
	}
	return Table{}, unknown(query.Name)
}

// OngoingHelp says what the ongoing column of outages and imbalance means.
const OngoingHelp = `"at window end" (true in CSV and JSON): no report inside the window ended the run, ` +
	`so it was still going at the window's end (until, or now) and may have ended since; ` +
	`its End is then empty and its Duration runs to its last report in the window`

// OngoingText is what people read in the ongoing column for true.
const OngoingText = "at window end"

// runColumns begin the tables of runs (outages, imbalance): whose run,
// from when to when, for how long.
func runColumns() []Column {
	return []Column{
		{"worker_addr", "Worker", KindText}, {"start", "Start", KindTime}, {"end", "End", KindTime},
		{"ongoing", "Ongoing", KindBool}, {"duration_ms", "Duration", KindDuration},
	}
}

// runCells are the cells of runColumns; end is zero while the run is
// ongoing. An ongoing run is one the window's end cut, not necessarily
// one going on now: its cell says so.
func runCells(worker string, start, end time.Time, ongoing bool, d time.Duration) []Cell {
	on := boolCell(ongoing)
	if ongoing {
		on.Text = OngoingText
	}
	return []Cell{textCell(worker), timeCell(start), timeCell(end), on, durationCell(d)}
}

// gapsTable has one row per gap and per restart, in time order; a
// restart spans from the previous instance's last report to the new
// one's first.
func gapsTable(res audit.GapsResult) Table {
	t := Table{Columns: []Column{
		{"kind", "Kind", KindText}, {"worker_addr", "Worker", KindText}, {"start", "Start", KindTime},
		{"end", "End", KindTime}, {"duration_ms", "Duration", KindDuration},
		{"source_instance_id", "Instance", KindText}, {"previous_source_instance_id", "Previous instance", KindText},
	}}
	type row struct {
		at    time.Time
		cells []Cell
	}
	var rows []row
	for _, g := range res.Gaps {
		rows = append(rows, row{g.Start, []Cell{
			textCell("gap"), textCell(g.WorkerAddr), timeCell(g.Start), timeCell(g.End), durationCell(g.Duration),
			absent, absent,
		}})
	}
	for _, rs := range res.Restarts {
		rows = append(rows, row{rs.PreviousLastTime, []Cell{
			textCell("restart"), textCell(rs.WorkerAddr), timeCell(rs.PreviousLastTime), timeCell(rs.FirstTime),
			durationCell(rs.FirstTime.Sub(rs.PreviousLastTime)),
			textCell(rs.SourceInstanceID), textCell(rs.PreviousSourceInstanceID),
		}})
	}
	slices.SortStableFunc(rows, func(x, y row) int { return cmp.Compare(x.at.UnixNano(), y.at.UnixNano()) })
	for _, r := range rows {
		t.Rows = append(t.Rows, r.cells)
	}
	return t
}

// reportsColumns are the columns of a reports table: the report's, then
// its rank's.
var reportsColumns = []Column{
	{"report_time", "Time (UTC)", KindTime}, {"worker_addr", "Worker", KindText},
	{"source_instance_id", "Instance", KindText}, {"sequence_id", "Seq", KindInt},
	{"status", "Status", KindStatus}, {"last_error", "Last error", KindText},
	{"dp_rank", "Rank", KindInt}, {"snapshot_time", "Snapshot (UTC)", KindTime},
	{"num_running_reqs", "Running", KindInt}, {"max_running_requests", "Max running", KindInt},
	{"num_waiting_reqs", "Waiting", KindInt}, {"num_waiting_uncached_tokens", "Waiting tokens", KindInt},
	{"num_used_tokens", "Used tokens", KindInt}, {"num_total_tokens", "Total tokens", KindInt},
	{"max_total_num_tokens", "Max tokens", KindInt},
	{"token_usage", "KV usage", KindRatio}, {"gen_throughput", "Throughput (tok/s)", KindRate},
	{"cache_hit_rate", "Cache hits", KindRatio}, {"utilization", "Utilization", KindRatio},
}

// reportsTable has one row per (report, rank); a report without ranks
// (UNREACHABLE) has one row with the rank columns empty.
func reportsTable(reports []*domain.Report) Table {
	t := Table{Columns: slices.Clone(reportsColumns), ReportCount: len(reports)}
	for _, rep := range reports {
		seq := strconv.FormatUint(rep.SequenceID, 10)
		head := []Cell{
			timeCell(rep.ReportTime), textCell(rep.Worker.Addr), textCell(rep.SourceInstanceID),
			{Raw: seq, Text: seq}, // an identifier: no thousands separators
			statusCell(rep.Status), textCell(rep.LastError),
		}
		if len(rep.Ranks) == 0 {
			row := slices.Clone(head)
			for range len(t.Columns) - len(head) {
				row = append(row, absent)
			}
			t.Rows = append(t.Rows, row)
			continue
		}
		for _, rk := range rep.Ranks {
			row := append(slices.Clone(head),
				intCell(rk.DPRank), timeCell(rk.SnapshotTime),
				intCell(rk.NumRunningReqs), intCell(rk.MaxRunningRequests),
				intCell(rk.NumWaitingReqs), intCell(rk.NumWaitingUncachedTokens),
				intCell(rk.NumUsedTokens), intCell(rk.NumTotalTokens), intCell(rk.MaxTotalNumTokens),
				ratioCell(rk.TokenUsage), rateCell(rk.GenThroughput), ratioCell(rk.CacheHitRate), ratioCell(rk.Utilization),
			)
			t.Rows = append(t.Rows, row)
		}
	}
	return t
}
