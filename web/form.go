package web

import (
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/loadreporter/loadreporter/domain"
	"github.com/loadreporter/loadreporter/domain/audit"
	"github.com/loadreporter/loadreporter/web/audittable"
	"github.com/loadreporter/loadreporter/web/views"
)

// Form parsing shared by the history and audit pages. Every problem is
// reported against the form field it is about, so the page can show it
// next to that field.

// timeLayouts are what a time field accepts besides RFC 3339; they are
// read as UTC.
var timeLayouts = []string{
	"2006-01-02 15:04:05.999999999",
	"2006-01-02T15:04:05.999999999",
	"2006-01-02 15:04",
	"2006-01-02T15:04",
	"2006-01-02",
}

// parseTime reads a time field.
func parseTime(field, s string) (time.Time, error) {
	s = strings.TrimSpace(s)
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return given(t.UTC()), nil
	}
	for _, l := range timeLayouts {
		if t, err := time.ParseInLocation(l, s, time.UTC); err == nil {
			return given(t), nil
		}
	}
	return time.Time{}, fmt.Errorf("%s: %q is not a time; write 2006-01-02 15:04:05 (UTC) or RFC 3339", field, s)
}

// given keeps a time the user wrote from reading as "not given": the
// first instant a window may start at, 0001-01-01 00:00 UTC, is the zero
// time.Time, so it becomes the microsecond after, which selects the same
// reports (they are stored to the microsecond, and none is that old).
func given(t time.Time) time.Time {
	if t.IsZero() {
		return t.Add(time.Microsecond)
	}
	return t
}

// parseSpan reads a positive duration such as "90s", "15m", "1h30m" or
// "7d" (days are not part of Go's syntax, but people write them).
func parseSpan(field, s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	var d time.Duration
	var err error
	if days, ok := strings.CutSuffix(s, "d"); ok {
		var n float64
		n, err = strconv.ParseFloat(days, 64)
		d = time.Duration(n * float64(24*time.Hour))
		if n > maxSpanDays {
			err = errSpanTooLong
		}
	} else {
		d, err = time.ParseDuration(s)
	}
	if errors.Is(err, errSpanTooLong) || audittable.DurationTooLong(s) {
		return 0, fmt.Errorf("%s: %q is too long; at most %dd", field, s, maxSpanDays)
	}
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("%s: %q is not a positive duration; write e.g. 30s, 15m, 1h or 7d", field, s)
	}
	return d, nil
}

// maxSpanDays bounds a span written in days; Go's durations end at about
// 106 751 days.
const maxSpanDays = 100000

var errSpanTooLong = errors.New("too long")

// windowInput is a window as the form gave it: since/until, or the last
// span before until (or now).
type windowInput struct {
	Since, Until, Last string
}

// resolve turns the input into a window; def is the span used when
// nothing is given. Problems go to errs under the field's name.
func (in windowInput) resolve(now time.Time, def time.Duration, errs views.FieldErrors) (audit.Window, bool) {
	var w audit.Window
	ok := true
	until := now
	if strings.TrimSpace(in.Until) != "" {
		t, err := parseTime("until", in.Until)
		if err != nil {
			errs["until"] = err.Error()
			ok = false
		}
		until = t
	}
	switch {
	case strings.TrimSpace(in.Last) != "" && strings.TrimSpace(in.Since) != "":
		errs["last"] = "last: give either last or since, not both"
		ok = false
	case strings.TrimSpace(in.Last) != "":
		d, err := parseSpan("last", in.Last)
		if err != nil {
			errs["last"] = err.Error()
			ok = false
		}
		w.Since = until.Add(-d)
	case strings.TrimSpace(in.Since) != "":
		t, err := parseTime("since", in.Since)
		if err != nil {
			errs["since"] = err.Error()
			ok = false
		}
		w.Since = t
	default:
		w.Since = until.Add(-def)
	}
	w.Until = until
	if !ok {
		return audit.Window{}, false
	}
	if err := w.Validate(); err != nil {
		addQueryError(errs, nil, err)
		return audit.Window{}, false
	}
	return w, true
}

// argFields maps the argument a domain INVALID_ARGUMENT message starts
// with to the form field that carries it.
var argFields = map[string]string{
	"since":     "since",
	"until":     "until",
	"last":      "last",
	"workers":   "worker",
	"worker":    "worker",
	"statuses":  "status",
	"status":    "status",
	"ranks":     "rank",
	"rank":      "rank",
	"limit":     "limit",
	"threshold": "threshold",
	"interval":  "interval",
	"cursor":    "cursor",
	"query":     "query",
}

// fieldOf returns the form field an argument error message names, or ""
// when it names none. Messages name their argument first ("until (…) must
// be after since (…)", "threshold must be within …", "ranks: …").
func fieldOf(msg string) string {
	end := strings.IndexAny(msg, " :(,")
	if end < 0 {
		end = len(msg)
	}
	return argFields[strings.ToLower(msg[:end])]
}

// addQueryError files an argument error under its field; one that names
// no field goes to *general (or, when general is nil, is dropped into the
// "query" field so it is still shown).
func addQueryError(errs views.FieldErrors, general *string, err error) {
	if err == nil {
		return
	}
	msg := domain.ErrorMessage(err)
	if f := fieldOf(msg); f != "" {
		if errs[f] == "" {
			errs[f] = msg
		}
		return
	}
	if general != nil {
		*general = msg
		return
	}
	errs["query"] = msg
}

// splitList splits a comma-separated field into trimmed, non-empty items.
func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// parseRanks reads "0,2,3" into dp_ranks.
func parseRanks(s string) ([]int64, error) {
	var out []int64
	for _, p := range splitList(s) {
		n, err := strconv.ParseInt(p, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("rank: %q is not a dp_rank; write e.g. 0 or 0,2", p)
		}
		out = append(out, n)
	}
	return out, nil
}

// workersParam is the worker filter: the field as given when the form
// carries one (empty means every worker), else this process's worker.
func (h *Handler) workersParam(q url.Values) (string, []string) {
	if q.Has("worker") {
		v := q.Get("worker")
		return v, splitList(v)
	}
	return h.o.Worker.Addr, splitList(h.o.Worker.Addr)
}

// isoTime is the exact form of t used in links that must reproduce a
// window (paging).
func isoTime(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }
