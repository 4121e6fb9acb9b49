package web

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/loadreporter/loadreporter/domain/audit"
	"github.com/loadreporter/loadreporter/web/humanize"

	"github.com/loadreporter/loadreporter/domain"
	"github.com/loadreporter/loadreporter/web/audittable"
	"github.com/loadreporter/loadreporter/web/views"
)

// auditQueries are the form's choices, in the order operators reach for
// them; package audittable answers them.
var auditQueries = []struct{ name, label string }{
	{audittable.Outages, "Outages (non-HEALTHY runs)"},
	{audittable.Reports, "Reports"},
	{audittable.RankStats, "Per-rank statistics"},
	{audittable.Gaps, "Recording gaps and restarts"},
	{audittable.Imbalance, "Imbalance across ranks"},
}

// defaultAuditWindow is the audit form's window when none is given.
const defaultAuditWindow = time.Hour

// parseAudit reads the form. ran is false when no query was asked for (a
// bare /audit); errs holds every problem under its field.
func (h *Handler) parseAudit(q url.Values) (form views.AuditForm, a audittable.Query, ran bool, errs views.FieldErrors) {
	errs = views.FieldErrors{}
	ran = q.Has("query")
	a.Name = q.Get("query")
	if !ran {
		a.Name = audittable.Outages
	}
	form = views.AuditForm{
		Since: q.Get("since"), Until: q.Get("until"), Last: q.Get("last"),
		Rank: q.Get("rank"), Threshold: q.Get("threshold"), Interval: q.Get("interval"), Limit: q.Get("limit"),
		DefaultInterval: h.o.HistoryInterval.String(),
	}
	form.Worker, a.Workers = h.workersParam(q)
	if !ran {
		form.Last = "1h"
	}
	for _, aq := range auditQueries {
		form.Queries = append(form.Queries, views.Option{Value: aq.name, Label: aq.label, Selected: aq.name == a.Name})
	}

	status := q.Get("status")
	form.Statuses = []views.Option{{Value: "", Label: "any", Selected: status == ""}}
	for _, s := range []domain.Status{domain.StatusHealthy, domain.StatusStale, domain.StatusUnreachable} {
		form.Statuses = append(form.Statuses, views.Option{Value: s.String(), Label: s.String(), Selected: strings.EqualFold(status, s.String())})
	}
	for _, s := range splitList(status) {
		st, err := audit.ParseStatus(s)
		if err != nil {
			addQueryError(errs, nil, err)
			break
		}
		a.Statuses = append(a.Statuses, st)
	}

	var err error
	if a.Ranks, err = parseRanks(form.Rank); err != nil {
		errs["rank"] = err.Error()
	}
	a.Threshold = audittable.DefaultThreshold
	if s := strings.TrimSpace(form.Threshold); s != "" {
		if a.Threshold, err = strconv.ParseFloat(s, 64); err != nil {
			errs["threshold"] = fmt.Sprintf("threshold: %q is not a number; write a token_usage spread such as 0.2", s)
		}
	}
	a.Interval = h.o.HistoryInterval
	if s := strings.TrimSpace(form.Interval); s != "" {
		if a.Interval, err = parseSpan("interval", s); err != nil {
			errs["interval"] = err.Error()
		}
	}
	if s := strings.TrimSpace(form.Limit); s != "" {
		if a.Limit, err = strconv.Atoi(s); err != nil {
			errs["limit"] = fmt.Sprintf("limit: %q is not a whole number", s)
		}
	}
	a.Cursor = q.Get("cursor")
	in := windowInput{Since: form.Since, Until: form.Until, Last: form.Last}
	a.Window, _ = in.resolve(h.o.Now(), defaultAuditWindow, errs)
	// The query's own checks (its name, ranges, limits, the cursor) too,
	// so every field's problem shows at once rather than one per submit.
	// A window that failed to parse (already reported) is replaced by a
	// valid one so the other arguments are still checked.
	check := a
	if check.Window.Validate() != nil {
		check.Window = audit.Window{Since: time.Unix(0, 0), Until: time.Unix(1, 0)}
	}
	addQueryError(errs, nil, check.Validate())
	return form, a, ran, errs
}

// MaxPageReports bounds the reports one audit page shows: a row per rank,
// rendered whole before it is sent, so 10 000 reports of 8 ranks made a
// 41 MB page and some 400 MB of heap (the downloads stream instead).
const MaxPageReports = 1000

// MaxPageRows bounds the rank rows of one audit page the same way: 1 000
// reports of 256 ranks made a 145 MB page and a gigabyte of heap. A page
// of reports with many ranks ends early; its next page continues.
const MaxPageRows = 10_000

func (h *Handler) serveAudit(w http.ResponseWriter, r *http.Request) {
	if h.o.History == nil {
		p := views.AuditPage{Page: h.page("Audit", "audit")}
		p.Notice = "History is off (--history-interval 0): there is nothing recorded to audit."
		h.render(w, r, http.StatusNotFound, views.Audit(p))
		return
	}
	q := r.URL.Query()
	form, args, ran, errs := h.parseAudit(q)
	if args.Name == audittable.Reports && args.Limit > MaxPageReports && errs["limit"] == "" {
		errs["limit"] = fmt.Sprintf("limit: a page shows at most %d reports (the whole page is built in memory); the CSV download holds the whole window", MaxPageReports)
	}
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
	args.MaxRows = MaxPageRows
	t, err := audittable.Run(ctx, h.o.History, args)
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
	res := resultView(t, args)
	// Both links hold the window shown, not "the last hour" of whenever
	// they are followed.
	frozen := func() url.Values {
		v := url.Values{}
		for k, vs := range q {
			v[k] = vs
		}
		v.Del("last")
		v.Del("cursor")
		v.Set("since", isoTime(args.Window.Since))
		v.Set("until", isoTime(args.Window.Until))
		return v
	}
	if t.NextCursor != "" {
		v := frozen()
		v.Set("cursor", t.NextCursor)
		res.NextHref = "/audit?" + v.Encode()
	}
	p.Result = &res
	if args.Name == audittable.RankStats {
		p.Bars = rankBars(t)
	}
	// The whole window from its start, whichever page is shown.
	p.CSVHref = "/audit.csv?" + frozen().Encode()
	h.render(w, r, http.StatusOK, views.Audit(p))
}

// serveAuditCSV streams the query's table as CSV, a page of reports at a
// time: a reports CSV holds the whole window (up to
// audittable.MaxReports reports), not one page of it.
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
	args.AllPages = true
	ctx, cancel := context.WithTimeout(r.Context(), h.o.QueryTimeout)
	defer cancel()
	var enc audittable.Encoder
	for t, err := range audittable.Pages(ctx, h.o.History, args) {
		if err != nil && enc != nil {
			// The status line is gone; end the file short and say so in
			// the log.
			h.o.Logger.Error("web: audit CSV cut short", "err", err)
			break
		}
		if err != nil {
			h.csvQueryError(w, r, err)
			return
		}
		if enc == nil {
			name := fmt.Sprintf("loadreporter-%s-%s.csv", args.Name, args.Window.Since.UTC().Format("20060102T150405Z"))
			w.Header().Set("Content-Type", "text/csv; charset=utf-8")
			w.Header().Set("Content-Disposition", `attachment; filename="`+name+`"`)
			w.Header().Set("Cache-Control", "no-store")
			w.Header().Set("X-Content-Type-Options", "nosniff")
			enc = audittable.NewCSVEncoder(w)
		}
		if err := enc.Encode(t); err != nil {
			return // the client went away
		}
	}
	if enc != nil {
		_ = enc.Close()
	}
}

// csvQueryError answers a CSV request whose query failed before any row
// was written.
func (h *Handler) csvQueryError(w http.ResponseWriter, r *http.Request, err error) {
	code, msg := h.queryStatus(r, err)
	if code != http.StatusBadRequest {
		http.Error(w, msg, code)
		return
	}
	e := views.FieldErrors{}
	general := ""
	addQueryError(e, &general, err)
	if general != "" {
		e["query"] = general
	}
	csvError(w, code, e)
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

// resultView lays a table out for the page: column labels, each cell's
// text and CSS class, and a summary of what the rows cover.
func resultView(t audittable.Table, a audittable.Query) views.ResultTable {
	res := views.ResultTable{Query: a.Name, Truncated: t.Truncated}
	for _, c := range t.Columns {
		res.Columns = append(res.Columns, c.Label)
	}
	for _, row := range t.Rows {
		out := make([]views.Cell, len(row))
		for i, c := range row {
			out[i] = views.Cell{Text: c.Text, Class: cellClass(t.Columns[i].Kind, c)}
		}
		res.Rows = append(res.Rows, out)
	}
	what := plural(len(t.Rows), "row")
	if a.Name == audittable.Reports {
		what = plural(t.ReportCount, "report") + " (" + what + ", one per rank)"
	}
	res.Summary = what + " from " + clock(a.Window.Since) + " to " + clock(a.Window.Until) +
		" (" + humanize.Span(a.Window.Since, a.Window.Until) + ")"
	return res
}

// cellClass styles a cell: numbers aligned right, statuses in their
// colour; an empty cell has nothing to style.
func cellClass(k audittable.Kind, c audittable.Cell) string {
	if c.Raw == "" {
		return ""
	}
	switch k {
	case audittable.KindInt, audittable.KindRatio, audittable.KindRate, audittable.KindDuration:
		return "num"
	case audittable.KindStatus:
		return "status-" + statusClass(c.Status)
	}
	return ""
}
