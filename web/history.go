package web

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/loadreporter/loadreporter/domain/audit"
	"github.com/loadreporter/loadreporter/web/audittable"
	"github.com/loadreporter/loadreporter/web/humanize"

	"github.com/loadreporter/loadreporter/domain"
	"github.com/loadreporter/loadreporter/web/views"
)

// Limits of the history page.
const (
	// historyPageSize is the number of reports per table page.
	historyPageSize = 50
)

// windowPresets are the picker's fixed windows, shortest first; the first
// is the default.
var windowPresets = []struct{ key, label, last string }{
	{"15m", "Last 15 min", "15m"},
	{"1h", "Last hour", "1h"},
	{"24h", "Last 24 h", "24h"},
}

func (h *Handler) historyOff(w http.ResponseWriter, r *http.Request, title, active string) {
	p := views.HistoryPage{Page: h.page(title, active)}
	p.Notice = "History is off (--history-interval 0): there is nothing recorded to show."
	h.render(w, r, http.StatusNotFound, views.History(p))
}

func (h *Handler) page(title, active string) views.Page {
	return views.Page{Title: title, Active: active, StyleHref: h.style, Version: h.o.Version}
}

func (h *Handler) serveHistory(w http.ResponseWriter, r *http.Request) {
	if h.o.History == nil {
		h.historyOff(w, r, "History", "history")
		return
	}
	q := r.URL.Query()
	p := views.HistoryPage{Page: h.page("History", "history"), Errors: views.FieldErrors{}}
	workerText, workers := h.workersParam(q)
	p.Worker = workerText

	// The window: a preset (default the first), or the custom form.
	in := windowInput{Since: q.Get("since"), Until: q.Get("until")}
	preset := q.Get("window")
	custom := strings.TrimSpace(in.Since) != "" || strings.TrimSpace(in.Until) != ""
	switch {
	case custom && preset != "":
		p.Errors["window"] = "window: pick a preset or a custom since/until, not both"
	case custom:
		if strings.TrimSpace(in.Since) == "" {
			p.Errors["since"] = "since is required with until"
		}
	default:
		if preset == "" {
			preset = windowPresets[0].key
		}
		in.Last = ""
		for _, wp := range windowPresets {
			if wp.key == preset {
				in.Last = wp.last
			}
		}
		if in.Last == "" {
			p.Errors["window"] = "window: unknown window " + strconv.Quote(preset) + "; pick 15m, 1h or 24h"
		}
	}
	for _, wp := range windowPresets {
		v := url.Values{"window": {wp.key}}
		if q.Has("worker") {
			v.Set("worker", workerText)
		}
		p.Windows = append(p.Windows, views.WindowLink{
			Key: wp.key, Label: wp.label, Href: "/history?" + v.Encode(), Active: !custom && wp.key == preset,
		})
	}
	p.Since, p.Until = in.Since, in.Until
	if len(p.Errors) > 0 {
		h.render(w, r, http.StatusBadRequest, views.History(p))
		return
	}
	win, ok := in.resolve(h.o.Now(), 0, p.Errors)
	if !ok {
		h.render(w, r, http.StatusBadRequest, views.History(p))
		return
	}
	p.Since, p.Until = win.Since.UTC().Format(timeLayout), win.Until.UTC().Format(timeLayout)
	p.WindowText = clock(win.Since) + " – " + clock(win.Until) + " (" + humanize.Span(win.Since, win.Until) + ")"

	ctx, cancel := context.WithTimeout(r.Context(), h.o.QueryTimeout)
	defer cancel()
	if err := h.fillHistory(ctx, &p, win, workers, workerText, q.Get("cursor")); err != nil {
		code, msg := h.queryStatus(r, err)
		if code == http.StatusBadRequest {
			addQueryError(p.Errors, &p.Notice, err)
		} else {
			p.Notice = msg
		}
		h.render(w, r, code, views.History(p))
		return
	}
	p.HasWindow = true
	h.render(w, r, http.StatusOK, views.History(p))
}

// fillHistory runs the page's queries: one page of the table, the charts'
// buckets and the outages.
func (h *Handler) fillHistory(ctx context.Context, p *views.HistoryPage, win audit.Window, workers []string, workerText, cursor string) error {
	// The table first: a bad cursor is the user's error, reported before
	// the heavier chart queries run.
	page, err := h.o.History.Reports(ctx, audit.ReportsQuery{
		Window: win, Workers: workers, Limit: historyPageSize, Cursor: cursor, Descending: true,
	})
	if err != nil {
		return err
	}
	link := func(cursor string) string {
		v := url.Values{"since": {isoTime(win.Since)}, "until": {isoTime(win.Until)}, "worker": {workerText}}
		if cursor != "" {
			v.Set("cursor", cursor)
		}
		return "/history?" + v.Encode()
	}
	for _, rep := range page.Reports {
		p.Reports.Rows = append(p.Reports.Rows, reportRow(rep))
	}
	if page.NextCursor != "" {
		p.Reports.NextHref = link(page.NextCursor)
	}
	if cursor != "" {
		p.Reports.FirstHref = link("")
	}

	counted, err := h.o.Chart.Chart(ctx, chartQuery(win, workers))
	if err != nil {
		return err
	}
	s := newSeries(win, h.o.HistoryInterval, counted)
	out, err := h.o.History.Outages(ctx, audit.OutagesQuery{Window: win, Workers: workers})
	if err != nil {
		return err
	}
	s.outages = out.Outages
	p.Usage = s.usageChart()
	p.Waiting = s.waitingChart()
	p.WaitingPanels, p.WaitingNote = s.waitingPanels()
	p.Imbalance = s.spreadChart(audittable.DefaultThreshold)
	p.ImbalanceHref = "/audit?" + url.Values{
		"query": {audittable.Imbalance}, "since": {isoTime(win.Since)}, "until": {isoTime(win.Until)},
		"worker": {workerText}, "threshold": {strconv.FormatFloat(audittable.DefaultThreshold, 'g', -1, 64)},
	}.Encode()
	p.Timeline = s.timeline()
	for _, o := range out.Outages {
		p.Outages = append(p.Outages, outageRow(o))
	}
	if out.Truncated {
		p.Notice = "More outages happened in this window than are listed; narrow the window or use the audit page."
	}
	return nil
}

func reportRow(rep *domain.Report) views.ReportRow {
	row := views.ReportRow{
		Time:        rep.ReportTime.UTC().Format(timeLayout),
		Worker:      rep.Worker.Addr,
		Sequence:    strconv.FormatUint(rep.SequenceID, 10),
		Status:      rep.Status.String(),
		StatusClass: statusClass(rep.Status),
		Ranks:       strconv.Itoa(len(rep.Ranks)),
		AvgKVUsage:  "—",
		Running:     "—",
		Waiting:     "—",
		LastError:   rep.LastError,
	}
	if len(rep.Ranks) > 0 {
		var usage float64
		var running, waiting int64
		for _, rk := range rep.Ranks {
			usage += rk.TokenUsage
			running += rk.NumRunningReqs
			waiting += rk.NumWaitingReqs
		}
		row.AvgKVUsage = humanize.Percent(usage / float64(len(rep.Ranks)))
		row.Running = humanize.Thousands(running)
		row.Waiting = humanize.Thousands(waiting)
	}
	return row
}

func outageRow(o audit.Outage) views.OutageRow {
	row := views.OutageRow{
		Worker:    o.WorkerAddr,
		Start:     clock(o.Start),
		End:       clock(o.End),
		Duration:  humanize.Duration(o.Duration),
		Statuses:  statusList(o.Statuses),
		Reports:   humanize.Thousands(o.Reports),
		LastError: o.LastError,
		Class:     outageClass(o),
	}
	if o.Ongoing {
		row.End = "ongoing"
	}
	return row
}

func statusList(ss []domain.Status) string {
	names := make([]string, len(ss))
	for i, s := range ss {
		names[i] = s.String()
	}
	return strings.Join(names, ", ")
}
