package web

import (
	"cmp"
	"context"
	"encoding/csv"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/loadreporter/loadreporter/domain"
	"github.com/loadreporter/loadreporter/ports"
	"github.com/loadreporter/loadreporter/web/views"
)

// The audit queries, by the names the form, the CLI and the CSV use.
const (
	queryReports   = "reports"
	queryOutages   = "outages"
	queryRankStats = "rank-stats"
	queryGaps      = "gaps"
	queryImbalance = "imbalance"
)

var auditQueries = []struct{ name, label string }{
	{queryOutages, "Outages (non-HEALTHY runs)"},
	{queryReports, "Reports"},
	{queryRankStats, "Per-rank statistics"},
	{queryGaps, "Recording gaps and restarts"},
	{queryImbalance, "Imbalance across ranks"},
}

// Defaults of the audit form.
const (
	defaultAuditWindow = time.Hour
	// defaultThreshold is the imbalance threshold when the field is blank:
	// one rank's KV cache 20 points fuller than another's.
	defaultThreshold = 0.2
	// maxCSVReports bounds a reports CSV, which follows every page of the
	// window (about 28 h at one report a second).
	maxCSVReports = 100_000
)

// auditArgs is a parsed audit form.
type auditArgs struct {
	query     string
	window    ports.Window
	workers   []string
	statuses  []domain.Status
	ranks     []int64
	threshold float64
	interval  time.Duration
	limit     int
	cursor    string
}

// parseAudit reads the form. ran is false when no query was asked for (a
// bare /audit); errs holds every problem under its field.
func (h *Handler) parseAudit(q url.Values) (form views.AuditForm, a auditArgs, ran bool, errs views.FieldErrors) {
	errs = views.FieldErrors{}
	ran = q.Has("query")
	a.query = q.Get("query")
	if !ran {
		a.query = queryOutages
	}
	form = views.AuditForm{
		Since: q.Get("since"), Until: q.Get("until"), Last: q.Get("last"),
		Rank: q.Get("rank"), Threshold: q.Get("threshold"), Interval: q.Get("interval"), Limit: q.Get("limit"),
		DefaultInterval: h.o.HistoryInterval.String(),
	}
	form.Worker, a.workers = h.workersParam(q)
	if !ran {
		form.Last = "1h"
	}
	known := false
	for _, aq := range auditQueries {
		form.Queries = append(form.Queries, views.Option{Value: aq.name, Label: aq.label, Selected: aq.name == a.query})
		known = known || aq.name == a.query
	}
	if !known {
		errs["query"] = fmt.Sprintf("query: unknown query %q; pick one of reports, outages, rank-stats, gaps, imbalance", a.query)
	}

	status := q.Get("status")
	form.Statuses = []views.Option{{Value: "", Label: "any", Selected: status == ""}}
	for _, s := range []domain.Status{domain.StatusHealthy, domain.StatusStale, domain.StatusUnreachable} {
		form.Statuses = append(form.Statuses, views.Option{Value: s.String(), Label: s.String(), Selected: strings.EqualFold(status, s.String())})
	}
	for _, s := range splitList(status) {
		st, err := ports.ParseStatus(s)
		if err != nil {
			addQueryError(errs, nil, err)
			break
		}
		a.statuses = append(a.statuses, st)
	}

	var err error
	if a.ranks, err = parseRanks(form.Rank); err != nil {
		errs["rank"] = err.Error()
	}
	a.threshold = defaultThreshold
	if s := strings.TrimSpace(form.Threshold); s != "" {
		if a.threshold, err = strconv.ParseFloat(s, 64); err != nil {
			errs["threshold"] = fmt.Sprintf("threshold: %q is not a number; write a token_usage spread such as 0.2", s)
		}
	}
	a.interval = h.o.HistoryInterval
	if s := strings.TrimSpace(form.Interval); s != "" {
		if a.interval, err = parseSpan("interval", s); err != nil {
			errs["interval"] = err.Error()
		}
	}
	if s := strings.TrimSpace(form.Limit); s != "" {
		if a.limit, err = strconv.Atoi(s); err != nil {
			errs["limit"] = fmt.Sprintf("limit: %q is not a whole number", s)
		}
	}
	a.cursor = q.Get("cursor")
	in := windowInput{Since: form.Since, Until: form.Until, Last: form.Last}
	a.window, _ = in.resolve(h.o.Now(), defaultAuditWindow, errs)
	// The port's own checks (ranges, limits, the cursor) too, so every
	// field's problem shows at once rather than one per submit.
	if known {
		addQueryError(errs, nil, a.validate())
	}
	return form, a, ran, errs
}

// validate runs the query type's Validate; a window that failed to parse
// (already reported) is replaced by a valid one so the other arguments
// are still checked.
func (a auditArgs) validate() error {
	w := a.window
	if w.Validate() != nil {
		w = ports.Window{Since: time.Unix(0, 0), Until: time.Unix(1, 0)}
	}
	switch a.query {
	case queryReports:
		return ports.ReportsQuery{Window: w, Workers: a.workers, Statuses: a.statuses, Ranks: a.ranks, Limit: a.limit, Cursor: a.cursor}.Validate()
	case queryOutages:
		return ports.OutagesQuery{Window: w, Workers: a.workers, Limit: a.limit}.Validate()
	case queryRankStats:
		return ports.RankStatsQuery{Window: w, Workers: a.workers, Ranks: a.ranks, Limit: a.limit}.Validate()
	case queryGaps:
		return ports.GapsQuery{Window: w, Workers: a.workers, Interval: a.interval, Limit: a.limit}.Validate()
	case queryImbalance:
		return ports.ImbalanceQuery{Window: w, Workers: a.workers, Threshold: a.threshold, Limit: a.limit}.Validate()
	}
	return nil
}

func (h *Handler) serveAudit(w http.ResponseWriter, r *http.Request) {
	if h.o.History == nil {
		p := views.AuditPage{Page: h.page("Audit", "audit")}
		p.Notice = "History is off (--history-interval 0): there is nothing recorded to audit."
		h.render(w, r, http.StatusNotFound, views.Audit(p))
		return
	}
	q := r.URL.Query()
	form, args, ran, errs := h.parseAudit(q)
	p := views.AuditPage{Page: h.page("Audit", "audit"), Form: form, Errors: errs}
	if !ran {
		h.render(w, r, http.StatusOK, views.Audit(p))
		return
	}
	if len(errs) > 0 {
		h.render(w, r, http.StatusBadRequest, views.Audit(p))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.o.QueryTimeout)
	defer cancel()
	t, next, err := h.runAudit(ctx, args)
	if err != nil {
		code, msg := h.queryStatus(r, err)
		if code == http.StatusBadRequest {
			addQueryError(p.Errors, &p.GeneralError, err)
		} else {
			p.GeneralError = msg
		}
		h.render(w, r, code, views.Audit(p))
		return
	}
	res := t.view(args)
	if next != "" {
		v := url.Values{}
		for k, vs := range q {
			v[k] = vs
		}
		v.Del("last")
		v.Set("since", isoTime(args.window.Since))
		v.Set("until", isoTime(args.window.Until))
		v.Set("cursor", next)
		res.NextHref = "/audit?" + v.Encode()
	}
	p.Result = &res
	p.CSVHref = "/audit.csv?" + q.Encode()
	h.render(w, r, http.StatusOK, views.Audit(p))
}

func (h *Handler) serveAuditCSV(w http.ResponseWriter, r *http.Request) {
	if h.o.History == nil {
		http.Error(w, "history is off (--history-interval 0)", http.StatusNotFound)
		return
	}
	_, args, _, errs := h.parseAudit(r.URL.Query())
	if len(errs) > 0 {
		csvError(w, http.StatusBadRequest, errs)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.o.QueryTimeout)
	defer cancel()
	t, next, err := h.runAudit(ctx, args)
	if err != nil {
		code, msg := h.queryStatus(r, err)
		if code == http.StatusBadRequest {
			e := views.FieldErrors{}
			general := ""
			addQueryError(e, &general, err)
			if general != "" {
				e["query"] = general
			}
			csvError(w, code, e)
			return
		}
		http.Error(w, msg, code)
		return
	}
	name := fmt.Sprintf("loadreporter-%s-%s.csv", args.query, args.window.Since.UTC().Format("20060102T150405Z"))
	w.Header().Set("Content-Type", "text/csv; charset=utf-8")
	w.Header().Set("Content-Disposition", `attachment; filename="`+name+`"`)
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	cw := csv.NewWriter(w)
	header := make([]string, len(t.cols))
	for i, c := range t.cols {
		header[i] = c.name
	}
	_ = cw.Write(header)
	written := 0
	writeRows := func(t table) {
		for _, row := range t.rows {
			raw := make([]string, len(row))
			for i, c := range row {
				raw[i] = c.raw
			}
			_ = cw.Write(raw)
		}
		written += t.reports
	}
	writeRows(t)
	// A reports CSV holds the whole window, not one page of it.
	for args.query == queryReports && next != "" && written < maxCSVReports {
		args.cursor = next
		if t, next, err = h.runAudit(ctx, args); err != nil {
			// The status line is gone; end the file short and say so in
			// the log.
			h.o.Logger.Error("web: audit CSV cut short", "err", err)
			break
		}
		writeRows(t)
	}
	cw.Flush()
}

// csvError answers a CSV request whose arguments are wrong, one
// "field: message" line per problem.
func csvError(w http.ResponseWriter, code int, errs views.FieldErrors) {
	lines := make([]string, 0, len(errs))
	for f, msg := range errs {
		lines = append(lines, f+": "+strings.TrimPrefix(msg, f+": "))
	}
	slices.Sort(lines)
	http.Error(w, strings.Join(lines, "\n"), code)
}

// column is a result column: name in the CSV header, label in the page.
type column struct{ name, label string }

// cell is one result value: raw for the CSV (machine-readable: RFC 3339
// times, plain numbers), text for people.
type cell struct{ raw, text, class string }

// table is a query result as rows of cells, shared by the page and the
// CSV so both hold the same rows.
type table struct {
	cols      []column
	rows      [][]cell
	truncated bool
	// reports is the number of reports a reports page held (rows are per
	// rank).
	reports int
}

func (t table) view(a auditArgs) views.ResultTable {
	res := views.ResultTable{Query: a.query, Truncated: t.truncated}
	for _, c := range t.cols {
		res.Columns = append(res.Columns, c.label)
	}
	for _, row := range t.rows {
		out := make([]views.Cell, len(row))
		for i, c := range row {
			out[i] = views.Cell{Text: c.text, Class: c.class}
		}
		res.Rows = append(res.Rows, out)
	}
	what := plural(len(t.rows), "row")
	if a.query == queryReports {
		what = plural(t.reports, "report") + " (" + what + ", one per rank)"
	}
	res.Summary = what + " from " + clock(a.window.Since) + " to " + clock(a.window.Until) +
		" (" + duration(a.window.Until.Sub(a.window.Since)) + ")"
	return res
}

// Cell constructors: raw for the CSV, text for people.

func textCell(s string) cell { return cell{raw: s, text: orDash(s)} }

func timeCell(t time.Time) cell {
	if t.IsZero() {
		return cell{text: "—"}
	}
	return cell{raw: isoTime(t), text: t.UTC().Format(timeLayout)}
}

func intCell(n int64) cell {
	return cell{raw: strconv.FormatInt(n, 10), text: thousands(n), class: "num"}
}

func ratioCell(f float64) cell {
	return cell{raw: strconv.FormatFloat(f, 'g', -1, 64), text: percent(f), class: "num"}
}

func rateCell(f float64) cell {
	return cell{raw: strconv.FormatFloat(f, 'g', -1, 64), text: decimal(f), class: "num"}
}

func durationCell(d time.Duration) cell {
	return cell{raw: strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', -1, 64), text: duration(d), class: "num"}
}

func boolCell(b bool) cell {
	if b {
		return cell{raw: "true", text: "yes"}
	}
	return cell{raw: "false", text: "no"}
}

func statusCell(s domain.Status) cell {
	return cell{raw: s.String(), text: s.String(), class: "status-" + statusClass(s)}
}

// runAudit runs one query (one page of it, for reports) and returns its
// table and, for reports, the cursor of the next page.
func (h *Handler) runAudit(ctx context.Context, a auditArgs) (table, string, error) {
	hq := h.o.History
	switch a.query {
	case queryReports:
		page, err := hq.Reports(ctx, ports.ReportsQuery{
			Window: a.window, Workers: a.workers, Statuses: a.statuses, Ranks: a.ranks, Limit: a.limit, Cursor: a.cursor,
		})
		if err != nil {
			return table{}, "", err
		}
		return reportsTable(page.Reports), page.NextCursor, nil
	case queryOutages:
		res, err := hq.Outages(ctx, ports.OutagesQuery{Window: a.window, Workers: a.workers, Limit: a.limit})
		if err != nil {
			return table{}, "", err
		}
		t := table{truncated: res.Truncated, cols: []column{
			{"worker_addr", "Worker"}, {"start", "Start"}, {"end", "End"}, {"ongoing", "Ongoing"},
			{"duration_ms", "Duration"}, {"statuses", "Statuses"}, {"reports", "Reports"}, {"last_error", "Last error"},
		}}
		for _, o := range res.Outages {
			st := statusList(o.Statuses)
			t.rows = append(t.rows, []cell{
				textCell(o.WorkerAddr), timeCell(o.Start), timeCell(o.End), boolCell(o.Ongoing),
				durationCell(o.Duration), {raw: st, text: st, class: "status-" + outageClass(o)}, intCell(o.Reports), textCell(o.LastError),
			})
		}
		return t, "", nil
	case queryRankStats:
		res, err := hq.RankStats(ctx, ports.RankStatsQuery{Window: a.window, Workers: a.workers, Ranks: a.ranks, Limit: a.limit})
		if err != nil {
			return table{}, "", err
		}
		t := table{truncated: res.Truncated, cols: []column{
			{"worker_addr", "Worker"}, {"dp_rank", "Rank"}, {"reports", "Reports"},
			{"avg_token_usage", "Avg KV usage"}, {"p95_token_usage", "p95 KV usage"}, {"max_token_usage", "Max KV usage"},
			{"max_waiting_reqs", "Max waiting"}, {"mean_gen_throughput", "Mean throughput (tok/s)"},
		}}
		for _, s := range res.Stats {
			t.rows = append(t.rows, []cell{
				textCell(s.WorkerAddr), intCell(s.DPRank), intCell(s.Reports),
				ratioCell(s.AvgTokenUsage), ratioCell(s.P95TokenUsage), ratioCell(s.MaxTokenUsage),
				intCell(s.MaxWaitingReqs), rateCell(s.MeanGenThroughput),
			})
		}
		return t, "", nil
	case queryGaps:
		res, err := hq.Gaps(ctx, ports.GapsQuery{Window: a.window, Workers: a.workers, Interval: a.interval, Limit: a.limit})
		if err != nil {
			return table{}, "", err
		}
		t := table{truncated: res.Truncated, cols: []column{
			{"kind", "Kind"}, {"worker_addr", "Worker"}, {"start", "Start"}, {"end", "End"}, {"duration_ms", "Duration"},
			{"source_instance_id", "Instance"}, {"previous_source_instance_id", "Previous instance"},
		}}
		type row struct {
			at    time.Time
			cells []cell
		}
		var rows []row
		for _, g := range res.Gaps {
			rows = append(rows, row{g.Start, []cell{
				textCell("gap"), textCell(g.WorkerAddr), timeCell(g.Start), timeCell(g.End), durationCell(g.Duration),
				textCell(""), textCell(""),
			}})
		}
		for _, rs := range res.Restarts {
			rows = append(rows, row{rs.PreviousLastTime, []cell{
				textCell("restart"), textCell(rs.WorkerAddr), timeCell(rs.PreviousLastTime), timeCell(rs.FirstTime),
				durationCell(rs.FirstTime.Sub(rs.PreviousLastTime)),
				textCell(rs.SourceInstanceID), textCell(rs.PreviousSourceInstanceID),
			}})
		}
		slices.SortStableFunc(rows, func(x, y row) int { return cmp.Compare(x.at.UnixNano(), y.at.UnixNano()) })
		for _, r := range rows {
			t.rows = append(t.rows, r.cells)
		}
		return t, "", nil
	case queryImbalance:
		res, err := hq.Imbalance(ctx, ports.ImbalanceQuery{Window: a.window, Workers: a.workers, Threshold: a.threshold, Limit: a.limit})
		if err != nil {
			return table{}, "", err
		}
		t := table{truncated: res.Truncated, cols: []column{
			{"worker_addr", "Worker"}, {"start", "Start"}, {"end", "End"}, {"ongoing", "Ongoing"}, {"duration_ms", "Duration"},
			{"peak_spread", "Peak spread"}, {"peak_time", "Peak at"}, {"reports", "Reports"},
		}}
		for _, s := range res.Spans {
			t.rows = append(t.rows, []cell{
				textCell(s.WorkerAddr), timeCell(s.Start), timeCell(s.End), boolCell(s.Ongoing), durationCell(s.Duration),
				ratioCell(s.PeakSpread), timeCell(s.PeakTime), intCell(s.Reports),
			})
		}
		return t, "", nil
	}
	return table{}, "", domain.Errorf(domain.CodeInvalidArgument, "query: unknown query %q", a.query)
}

// reportsTable has one row per (report, rank); a report without ranks
// (UNREACHABLE) has one row with the rank columns empty.
func reportsTable(reports []*domain.Report) table {
	t := table{reports: len(reports), cols: []column{
		{"report_time", "Time (UTC)"}, {"worker_addr", "Worker"}, {"source_instance_id", "Instance"},
		{"sequence_id", "Seq"}, {"status", "Status"}, {"last_error", "Last error"},
		{"dp_rank", "Rank"}, {"snapshot_time", "Snapshot (UTC)"},
		{"num_running_reqs", "Running"}, {"max_running_requests", "Max running"},
		{"num_waiting_reqs", "Waiting"}, {"num_waiting_uncached_tokens", "Waiting tokens"},
		{"num_used_tokens", "Used tokens"}, {"num_total_tokens", "Total tokens"}, {"max_total_num_tokens", "Max tokens"},
		{"token_usage", "KV usage"}, {"gen_throughput", "Throughput (tok/s)"},
		{"cache_hit_rate", "Cache hits"}, {"utilization", "Utilization"},
	}}
	for _, rep := range reports {
		head := []cell{
			timeCell(rep.ReportTime), textCell(rep.Worker.Addr), textCell(rep.SourceInstanceID),
			{raw: strconv.FormatUint(rep.SequenceID, 10), text: strconv.FormatUint(rep.SequenceID, 10), class: "num"},
			statusCell(rep.Status), textCell(rep.LastError),
		}
		if len(rep.Ranks) == 0 {
			row := slices.Clone(head)
			for range len(t.cols) - len(head) {
				row = append(row, textCell(""))
			}
			t.rows = append(t.rows, row)
			continue
		}
		for _, rk := range rep.Ranks {
			row := slices.Clone(head)
			row = append(row,
				intCell(rk.DPRank), timeCell(rk.SnapshotTime),
				intCell(rk.NumRunningReqs), intCell(rk.MaxRunningRequests),
				intCell(rk.NumWaitingReqs), intCell(rk.NumWaitingUncachedTokens),
				intCell(rk.NumUsedTokens), intCell(rk.NumTotalTokens), intCell(rk.MaxTotalNumTokens),
				ratioCell(rk.TokenUsage), rateCell(rk.GenThroughput), ratioCell(rk.CacheHitRate), ratioCell(rk.Utilization),
			)
			t.rows = append(t.rows, row)
		}
	}
	return t
}
