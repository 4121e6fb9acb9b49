package web

import (
	"context"
	"encoding/csv"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"
	"go.uber.org/goleak"

	"github.com/loadreporter/loadreporter/domain"
	"github.com/loadreporter/loadreporter/domain/audit"
	"github.com/loadreporter/loadreporter/ports"
	"github.com/loadreporter/loadreporter/web/audittable"
	"github.com/loadreporter/loadreporter/web/internal/historytest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeLive is a LiveSource with fixed answers.
type fakeLive struct {
	report  *domain.Report
	routers int
}

func (f fakeLive) Latest(context.Context) *domain.Report { return f.report }
func (f fakeLive) RoutersConnected() int                 { return f.routers }

// The fixture: one worker reporting every 10 s from t0 for 10 min (60
// reports, sequence 1…60, 2 ranks each), UNREACHABLE from report 21 to 26
// (t0+200 s … t0+250 s), HEALTHY again at t0+260 s. The page's clock is
// t0+12 min, so "last 15 min" holds all of it.
var (
	t0      = time.Date(2026, 11, 29, 8, 0, 0, 0, time.UTC)
	fixNow  = t0.Add(12 * time.Minute)
	fixAddr = "10.0.0.7:30000"
)

const (
	fixReports   = 60
	fixRanks     = 2
	outageFirst  = 20 // index of the first UNREACHABLE report
	outageLen    = 6
	timeoutError = "load snapshot pull timed out"
)

func fixtureReport(i int) *domain.Report {
	at := t0.Add(time.Duration(i) * 10 * time.Second)
	r := &domain.Report{
		SourceInstanceID: "inst-a",
		SequenceID:       uint64(i + 1),
		ReportTime:       at,
		Worker:           domain.Worker{Addr: fixAddr, Type: domain.WorkerTypeRegular, Model: "llama-3"},
		Status:           domain.StatusHealthy,
	}
	if i >= outageFirst && i < outageFirst+outageLen {
		r.Status = domain.StatusUnreachable
		r.LastError = timeoutError
		return r
	}
	for k := range fixRanks {
		r.Ranks = append(r.Ranks, domain.RankLoad{
			DPRank: int64(k), SnapshotTime: at,
			NumRunningReqs: 12, MaxRunningRequests: 256, NumWaitingReqs: int64(k * 3),
			NumUsedTokens: 131072, MaxTotalNumTokens: 262144,
			TokenUsage: 0.25 + 0.5*float64(k), GenThroughput: 1234.5, CacheHitRate: 0.875,
		})
	}
	return r
}

// newHistory answers from the fixture as a store holding it would: its
// reports, and for the computed queries the answers a store gives over them
// (for a 10 s gaps interval and a 0.4 imbalance threshold, the only ones
// these tests ask for).
func newHistory() *historytest.Fake {
	reports := make([]*domain.Report, fixReports)
	for i := range reports {
		reports[i] = fixtureReport(i)
	}
	at := func(sec int) time.Time { return t0.Add(time.Duration(sec) * time.Second) }
	outages := []audit.Outage{{
		Episode:  audit.Episode{Span: audit.Span{WorkerAddr: fixAddr, Start: at(200), End: at(260), Duration: time.Minute}, LastSeen: at(250), Reports: outageLen},
		Statuses: []domain.Status{domain.StatusUnreachable}, LastError: timeoutError,
	}}
	stats := []audit.RankStat{
		{WorkerAddr: fixAddr, DPRank: 0, Reports: fixReports - outageLen, AvgTokenUsage: 0.25, MaxTokenUsage: 0.25, P95TokenUsage: 0.25, MaxWaitingReqs: 0, MeanGenThroughput: 1234.5},
		{WorkerAddr: fixAddr, DPRank: 1, Reports: fixReports - outageLen, AvgTokenUsage: 0.75, MaxTokenUsage: 0.75, P95TokenUsage: 0.75, MaxWaitingReqs: 3, MeanGenThroughput: 1234.5},
	}
	spans := []audit.Imbalance{
		{Episode: audit.Episode{Span: audit.Span{WorkerAddr: fixAddr, Start: at(0), End: at(200), Duration: 200 * time.Second}, LastSeen: at(190), Reports: outageFirst},
			PeakSpread: 0.5, PeakTime: at(0)},
		{Episode: audit.Episode{Span: audit.Span{WorkerAddr: fixAddr, Start: at(260), Duration: 330 * time.Second}, Ongoing: true, LastSeen: at(590), Reports: fixReports - outageFirst - outageLen},
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
				func(s audit.RankStat) (string, time.Time, time.Time) { return s.WorkerAddr, at(0), at(590) })
			return res, err
		},
		GapsFunc: func(q audit.GapsQuery) (audit.GapsResult, error) {
			if q.Interval != 10*time.Second {
				return audit.GapsResult{}, fmt.Errorf("no canned gaps for interval %s", q.Interval)
			}
			return audit.GapsResult{}, nil // reports every 10 s: no gap, no restart, in any window
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

func newHandler(t testing.TB, o Options) *Handler {
	t.Helper()
	if c, ok := o.History.(ports.HistoryChart); ok && o.Chart == nil {
		o.Chart = c // the fakes count charts too
	}
	if o.Live == nil {
		o.Live = fakeLive{report: fixtureReport(fixReports - 1), routers: 3}
	}
	if o.Now == nil {
		o.Now = func() time.Time { return fixNow }
	}
	if o.Worker.Addr == "" {
		o.Worker = domain.Worker{Addr: fixAddr, Type: domain.WorkerTypeRegular}
	}
	if o.HistoryInterval == 0 {
		o.HistoryInterval = 10 * time.Second
	}
	h, err := New(o)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return h
}

// get serves target and returns the response.
func get(t *testing.T, h http.Handler, target string) *http.Response {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequestWithContext(ctx, http.MethodGet, target, nil))
	return rec.Result()
}

// page serves target, checks the status and parses the HTML.
func page(t *testing.T, h http.Handler, target string, wantStatus int) *goquery.Document {
	t.Helper()
	res := get(t, h, target)
	defer res.Body.Close()
	if res.StatusCode != wantStatus {
		b, _ := io.ReadAll(res.Body)
		t.Fatalf("GET %s: status %d, want %d\n%s", target, res.StatusCode, wantStatus, b)
	}
	if ct := res.Header.Get("Content-Type"); ct != "text/html; charset=utf-8" {
		t.Errorf("GET %s: Content-Type %q", target, ct)
	}
	doc, err := goquery.NewDocumentFromReader(res.Body)
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	return doc
}

// finder is a document or a selection.
type finder interface {
	Find(string) *goquery.Selection
}

func tid(s finder, id string) *goquery.Selection {
	return s.Find(`[data-testid="` + id + `"]`)
}

func txt(s *goquery.Selection) string { return strings.TrimSpace(s.Text()) }

func TestNewRejectsBadOptions(t *testing.T) {
	t.Parallel()
	if _, err := New(Options{}); err == nil {
		t.Error("New without Live succeeded")
	}
	if _, err := New(Options{Live: fakeLive{}, Refresh: -time.Second}); err == nil {
		t.Error("New with a negative interval succeeded")
	}
}

func TestLivePage(t *testing.T) {
	t.Parallel()
	h := newHandler(t, Options{Refresh: 2 * time.Second, WatchInterval: 500 * time.Millisecond})
	res := get(t, h, "/")
	if csp := res.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'self'") {
		t.Errorf("Content-Security-Policy = %q", csp)
	}
	res.Body.Close()
	doc := page(t, h, "/", http.StatusOK)

	if got := doc.Find("head title").Text(); got != "Live · loadreporter" {
		t.Errorf("title = %q", got)
	}
	if n := tid(doc, "rank-cards").Find(`[data-testid^="rank-card-"]`).Length(); n != fixRanks {
		t.Errorf("rank cards = %d, want %d", n, fixRanks)
	}
	c := tid(doc, "rank-card-1")
	for id, want := range map[string]string{
		"rank-running":        "12 / 256",
		"rank-waiting":        "3",
		"rank-kv-usage":       "75.0 %",
		"rank-kv-tokens":      "131,072 / 262,144 tokens",
		"rank-throughput":     "1,234.5 tok/s",
		"rank-cache-hit-rate": "87.5 %",
	} {
		if got := txt(tid(c, id)); got != want {
			t.Errorf("rank 1 %s = %q, want %q", id, got, want)
		}
	}
	if w, _ := tid(c, "rank-kv-bar").Attr("width"); w != "75.0" {
		t.Errorf("rank 1 bar width = %q", w)
	}
	for id, want := range map[string]string{
		"report-status":     "HEALTHY",
		"report-age":        "2 min ago", // report 60 at t0+590 s, page at t0+720 s
		"report-sequence":   "60",
		"routers-connected": "3",
		"worker-addr":       fixAddr,
		"worker-model":      "llama-3",
	} {
		if got := txt(tid(doc, id)); got != want {
			t.Errorf("%s = %q, want %q", id, got, want)
		}
	}
	if v, _ := doc.Find("[data-live-root]").Attr("data-watch-interval-ms"); v != "500" {
		t.Errorf("watch interval = %q, want 500", v)
	}
	if !strings.Contains(doc.Find("head noscript").Text(), `content="2"`) {
		t.Errorf("noscript refresh = %q", doc.Find("head noscript").Text())
	}
}

func TestLivePageUnreachable(t *testing.T) {
	t.Parallel()
	h := newHandler(t, Options{Live: fakeLive{report: fixtureReport(outageFirst)}})
	doc := page(t, h, "/", http.StatusOK)
	if got := txt(tid(doc, "report-status")); got != "UNREACHABLE" {
		t.Errorf("report-status = %q", got)
	}
	if got := txt(tid(doc, "report-error")); got != timeoutError {
		t.Errorf("report-error = %q", got)
	}
	if n := tid(doc, "rank-cards").Children().Length(); n != 0 {
		t.Errorf("%d cards on an UNREACHABLE report", n)
	}
}

func TestLivePageBeforeFirstReport(t *testing.T) {
	t.Parallel()
	h := newHandler(t, Options{Live: fakeLive{}})
	doc := page(t, h, "/", http.StatusOK)
	if got := txt(tid(doc, "report-status")); got != "NO REPORT" {
		t.Errorf("report-status = %q", got)
	}
	if got := txt(tid(doc, "worker-addr")); got != fixAddr {
		t.Errorf("worker-addr = %q, want the configured worker", got)
	}
}

func TestStaticAssets(t *testing.T) {
	t.Parallel()
	h := newHandler(t, Options{})
	doc := page(t, h, "/", http.StatusOK)
	for sel, attr := range map[string]string{`link[rel="stylesheet"]`: "href", "head script": "src"} {
		href, _ := doc.Find(sel).Attr(attr)
		u, err := url.Parse(href)
		if err != nil || !strings.HasPrefix(u.Path, "/static/") || u.Query().Get("v") == "" {
			t.Fatalf("%s %s = %q, want a versioned /static/ URL", sel, attr, href)
		}
		res := get(t, h, href)
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusOK || len(body) == 0 {
			t.Errorf("GET %s: %d, %d bytes", href, res.StatusCode, len(body))
		}
		want := map[string]string{"href": "text/css", "src": "javascript"}[attr]
		if ct := res.Header.Get("Content-Type"); !strings.Contains(ct, want) {
			t.Errorf("GET %s: Content-Type %q", href, ct)
		}
		// Under its hashed name an asset never changes; under another it
		// is revalidated against its ETag.
		if cc := res.Header.Get("Cache-Control"); !strings.Contains(cc, "immutable") {
			t.Errorf("GET %s: Cache-Control %q, want immutable", href, cc)
		}
		etag := res.Header.Get("ETag")
		req := httptest.NewRequest(http.MethodGet, u.Path, nil)
		req.Header.Set("If-None-Match", etag)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if etag == "" || rec.Code != http.StatusNotModified || rec.Header().Get("Cache-Control") != "no-cache" {
			t.Errorf("GET %s with If-None-Match %q: %d, Cache-Control %q; want 304, no-cache", u.Path, etag, rec.Code, rec.Header().Get("Cache-Control"))
		}
	}
	for _, path := range []string{"/static/nope.js", "/static/", "/static/x/live.js"} {
		if res := get(t, h, path); res.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s: %d, want 404 (no listings, nothing but the assets)", path, res.StatusCode)
		}
	}
	if res := get(t, h, "/elsewhere"); res.StatusCode != http.StatusNotFound {
		t.Errorf("unknown path: %d", res.StatusCode)
	}
}

func TestRegisterSharesAMux(t *testing.T) {
	t.Parallel()
	h := newHandler(t, Options{History: newHistory()})
	mux := http.NewServeMux()
	mux.HandleFunc("POST /loadreporter.v1.WatchService/Watch", func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusTeapot)
	})
	h.Register(mux)
	srv := httptest.NewServer(mux)
	defer srv.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for path, want := range map[string]int{
		"/": 200, "/history": 200, "/audit": 200, "/audit.csv?query=outages": 200, "/nowhere": 404,
	} {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+path, nil)
		res, err := srv.Client().Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		res.Body.Close()
		if res.StatusCode != want {
			t.Errorf("GET %s: %d, want %d", path, res.StatusCode, want)
		}
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/loadreporter.v1.WatchService/Watch", nil)
	res, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusTeapot {
		t.Errorf("the RPC route was taken over: %d", res.StatusCode)
	}
	srv.Client().CloseIdleConnections()
}

func TestHistoryPageShowsChartsTimelineAndTable(t *testing.T) {
	t.Parallel()
	h := newHandler(t, Options{History: newHistory()})
	doc := page(t, h, "/history", http.StatusOK)

	if got := doc.Find("head title").Text(); got != "History · loadreporter" {
		t.Errorf("title = %q", got)
	}
	for _, id := range []string{"chart-token-usage", "chart-waiting"} {
		paths := tid(doc, id).Find("svg path")
		if paths.Length() != fixRanks {
			t.Errorf("%s: %d paths, want %d", id, paths.Length(), fixRanks)
		}
		paths.Each(func(_ int, p *goquery.Selection) {
			d, _ := p.Attr("d")
			// The outage (6 reports, 60 s > 2 × 10 s) breaks each line.
			if strings.Count(d, "M") != 2 {
				t.Errorf("%s: path %q has %d subpaths, want 2", id, d, strings.Count(d, "M"))
			}
		})
	}
	if n := tid(doc, "timeline-outage").Length(); n != 1 {
		t.Errorf("timeline outages = %d, want 1", n)
	}
	rows := tid(doc, "outage-row")
	if rows.Length() != 1 || !strings.Contains(rows.Text(), timeoutError) || !strings.Contains(rows.Text(), "1 min") {
		t.Errorf("outage rows: %q", rows.Text())
	}

	// Newest first, 50 a page, then the rest through the cursor link.
	reports := tid(doc, "report-row")
	if reports.Length() != historyPageSize {
		t.Fatalf("report rows = %d, want %d", reports.Length(), historyPageSize)
	}
	if first := reports.First().Find("td").Eq(1).Text(); first != "60" {
		t.Errorf("first row is report %s, want 60", first)
	}
	next, ok := tid(doc, "next-page").Attr("href")
	if !ok {
		t.Fatal("no next-page link")
	}
	doc2 := page(t, h, next, http.StatusOK)
	rest := tid(doc2, "report-row")
	if rest.Length() != fixReports-historyPageSize {
		t.Errorf("second page: %d rows, want %d", rest.Length(), fixReports-historyPageSize)
	}
	if last := rest.Last().Find("td").Eq(1).Text(); last != "1" {
		t.Errorf("last row is report %s, want 1", last)
	}
	if tid(doc2, "next-page").Length() != 0 {
		t.Error("next-page link on the last page")
	}
	if tid(doc2, "first-page").Length() != 1 {
		t.Error("no link back to the newest page")
	}
}

func TestHistoryWindows(t *testing.T) {
	t.Parallel()
	h := newHandler(t, Options{History: newHistory()})

	// The last 3 min before t0+12 min hold nothing (reports end at t0+590 s).
	doc := page(t, h, "/history?since="+url.QueryEscape("2026-11-29 08:09:00")+"&until="+url.QueryEscape("2026-11-29T08:12:00Z"), http.StatusOK)
	if n := tid(doc, "report-row").Length(); n != 6 {
		t.Errorf("custom window: %d reports, want 6 (08:09:00…08:09:50)", n)
	}
	if got := txt(tid(doc, "window-text")); !strings.Contains(got, "2026-11-29 08:09:00 UTC – 2026-11-29 08:12:00 UTC") {
		t.Errorf("window text = %q", got)
	}

	// Another worker: nothing.
	doc = page(t, h, "/history?window=1h&worker=other:1", http.StatusOK)
	if tid(doc, "reports-empty").Length() != 1 || tid(doc, "chart-token-usage").Find("path").Length() != 0 {
		t.Error("another worker's history shows reports")
	}
	if href, _ := tid(doc, "window-24h").Attr("href"); !strings.Contains(href, "worker=other%3A1") {
		t.Errorf("presets drop the worker filter: %q", href)
	}
	// worker= (empty) is every worker.
	doc = page(t, h, "/history?window=1h&worker=", http.StatusOK)
	if n := tid(doc, "report-row").Length(); n != historyPageSize {
		t.Errorf("all workers: %d rows", n)
	}
}

// A window may start on the first day a window bound can name,
// 0001-01-01, which is the zero time.Time; it used to read as a since not
// given.
func TestWindowsFromTheFirstDay(t *testing.T) {
	t.Parallel()
	h := newHandler(t, Options{History: newHistory()})
	doc := page(t, h, "/history?since=0001-01-01", http.StatusOK)
	if n := tid(doc, "report-row").Length(); n != historyPageSize {
		t.Errorf("history since 0001-01-01: %d report rows, want %d", n, historyPageSize)
	}
	next, _ := tid(doc, "next-page").Attr("href")
	if n := tid(page(t, h, next, http.StatusOK), "report-row").Length(); n != fixReports-historyPageSize {
		t.Errorf("its next page: %d report rows, want %d", n, fixReports-historyPageSize)
	}
	doc = page(t, h, "/audit?query=reports&since=0001-01-01T00:00:00Z&until=2026-11-29T08:12:00Z&limit=1000", http.StatusOK)
	if n := tid(doc, "audit-result").Find("tbody tr").Length(); n == 0 {
		t.Error("audit since 0001-01-01: no rows")
	}
}

func TestHistoryBadArguments(t *testing.T) {
	t.Parallel()
	h := newHandler(t, Options{History: newHistory()})
	for _, tc := range []struct {
		name, query, field, want string
	}{
		{"bad since", "since=yesterday-ish", "since", `since: "yesterday-ish" is not a time`},
		{"bad until", "since=2026-11-29+08:00&until=soon", "until", `until: "soon" is not a time`},
		{"until before since", "since=2026-11-29+08:10&until=2026-11-29+08:00", "until", "until (2026-11-29T08:00:00Z) must be after since"},
		{"until without since", "until=2026-11-29+08:00", "since", "since is required"},
		{"unknown preset", "window=3d", "window", `unknown window "3d"`},
		{"bad cursor", "window=1h&cursor=nope", "cursor", "cursor: not a cursor"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			doc := page(t, h, "/history?"+tc.query, http.StatusBadRequest)
			got := txt(tid(doc, "error-"+tc.field))
			if !strings.Contains(got, tc.want) {
				t.Errorf("error-%s = %q, want it to contain %q", tc.field, got, tc.want)
			}
			if tc.field == "since" || tc.field == "until" {
				if tid(tid(doc, "field-"+tc.field), "error-"+tc.field).Length() != 1 {
					t.Errorf("error not inside field-%s", tc.field)
				}
			}
			if tid(doc, "chart-token-usage").Length() != 0 {
				t.Error("chart rendered for a bad window")
			}
		})
	}
}

func TestHistoryOff(t *testing.T) {
	t.Parallel()
	h := newHandler(t, Options{})
	for _, p := range []string{"/history", "/audit"} {
		doc := page(t, h, p, http.StatusNotFound)
		if !strings.Contains(txt(tid(doc, "page-notice")), "History is off") {
			t.Errorf("%s: notice %q", p, txt(tid(doc, "page-notice")))
		}
	}
	if res := get(t, h, "/audit.csv?query=outages"); res.StatusCode != http.StatusNotFound {
		t.Errorf("CSV with history off: %d", res.StatusCode)
	}
}

// failingHistory answers every query with err.
type failingHistory struct {
	ports.HistoryQuery
	err error
}

func (f failingHistory) Reports(context.Context, audit.ReportsQuery) (audit.ReportsPage, error) {
	return audit.ReportsPage{}, f.err
}

func (f failingHistory) Outages(context.Context, audit.OutagesQuery) (audit.OutagesResult, error) {
	return audit.OutagesResult{}, f.err
}

func (f failingHistory) Chart(context.Context, audit.ChartQuery) (audit.ChartResult, error) {
	return audit.ChartResult{}, f.err
}

func TestStoreUnavailable(t *testing.T) {
	t.Parallel()
	h := newHandler(t, Options{History: failingHistory{err: domain.Errorf(domain.CodeUnavailable, "connection refused")}})
	doc := page(t, h, "/history", http.StatusServiceUnavailable)
	if got := txt(tid(doc, "page-notice")); !strings.Contains(got, "connection refused") {
		t.Errorf("notice = %q", got)
	}
	doc = page(t, h, "/audit?query=outages", http.StatusServiceUnavailable)
	if got := txt(tid(doc, "form-error")); !strings.Contains(got, "unavailable") {
		t.Errorf("form-error = %q", got)
	}
}

func TestAuditFormBeforeAQuery(t *testing.T) {
	t.Parallel()
	h := newHandler(t, Options{History: newHistory()})
	doc := page(t, h, "/audit", http.StatusOK)
	if got := doc.Find("head title").Text(); got != "Audit · loadreporter" {
		t.Errorf("title = %q", got)
	}
	if tid(doc, "audit-result").Length() != 0 || doc.Find(".field-error").Length() != 0 {
		t.Error("a bare /audit ran a query or shows errors")
	}
	if v, _ := tid(doc, "field-worker").Find("input").Attr("value"); v != fixAddr {
		t.Errorf("worker field = %q, want this worker", v)
	}
	var names []string
	tid(doc, "field-query").Find("option").Each(func(_ int, o *goquery.Selection) {
		v, _ := o.Attr("value")
		names = append(names, v)
	})
	if got := strings.Join(names, ","); got != "outages,reports,rank-stats,gaps,imbalance" {
		t.Errorf("queries = %s", got)
	}
}

func TestAuditOutages(t *testing.T) {
	t.Parallel()
	h := newHandler(t, Options{History: newHistory()})
	doc := page(t, h, "/audit?query=outages&last=1h&worker="+url.QueryEscape(fixAddr), http.StatusOK)

	rows := tid(doc, "result-row")
	if rows.Length() != 1 {
		t.Fatalf("outage rows = %d, want 1", rows.Length())
	}
	cells := rows.Find("td").Map(func(_ int, s *goquery.Selection) string { return s.Text() })
	want := []string{fixAddr, "2026-11-29 08:03:20", "2026-11-29 08:04:20", "no", "1 min", "UNREACHABLE", "6", timeoutError}
	if strings.Join(cells, "|") != strings.Join(want, "|") {
		t.Errorf("outage row = %q\nwant %q", cells, want)
	}
	href, _ := tid(doc, "csv-link").Attr("href")
	u, _ := url.Parse(href)
	// The window shown (the last hour before the fixture's now), frozen: the
	// download holds what the table holds, whenever it is followed.
	if u.Path != "/audit.csv" || u.Query().Get("query") != "outages" || u.Query().Has("last") ||
		u.Query().Get("since") != "2026-11-29T07:12:00Z" || u.Query().Get("until") != "2026-11-29T08:12:00Z" {
		t.Errorf("csv-link = %q", href)
	}
	if got := txt(tid(doc, "audit-summary")); !strings.HasPrefix(got, "1 row from") {
		t.Errorf("summary = %q", got)
	}
}

func TestAuditOtherQueries(t *testing.T) {
	t.Parallel()
	h := newHandler(t, Options{History: newHistory()})
	for _, tc := range []struct {
		query string
		rows  int
		has   string
	}{
		{"query=reports&last=1h&status=unreachable", outageLen, timeoutError},
		{"query=reports&last=1h&rank=1&limit=10", 10, "75.0 %"},
		{"query=rank-stats&last=1h", fixRanks, "25.0 %"},
		{"query=imbalance&last=1h&threshold=0.4", 2, "50.0 %"},
	} {
		t.Run(tc.query, func(t *testing.T) {
			doc := page(t, h, "/audit?"+tc.query, http.StatusOK)
			rows := tid(doc, "result-row")
			if rows.Length() != tc.rows {
				t.Errorf("rows = %d, want %d", rows.Length(), tc.rows)
			}
			if !strings.Contains(rows.Text(), tc.has) {
				t.Errorf("rows lack %q: %s", tc.has, rows.Text())
			}
		})
	}
}

func TestAuditGaps(t *testing.T) {
	t.Parallel()
	st := newHistory()
	h := newHandler(t, Options{History: st})
	// Reports every 10 s, the history interval: no gap, no restart.
	doc := page(t, h, "/audit?query=gaps&last=1h", http.StatusOK)
	if n := tid(doc, "result-row").Length(); n != 0 || tid(doc, "audit-empty").Length() != 1 {
		t.Errorf("gaps in a gapless history: %d rows", n)
	}
	// A new instance at t0+700 s, after 110 s without a report: what a
	// store answers then.
	last, first := t0.Add(590*time.Second), t0.Add(700*time.Second)
	st.GapsFunc = func(audit.GapsQuery) (audit.GapsResult, error) {
		return audit.GapsResult{
			Gaps: []audit.Gap{{Span: audit.Span{WorkerAddr: fixAddr, Start: last, End: first, Duration: first.Sub(last)}}},
			Restarts: []audit.Restart{{WorkerAddr: fixAddr, SourceInstanceID: "inst-b", FirstTime: first,
				PreviousSourceInstanceID: "inst-a", PreviousLastTime: last}},
		}, nil
	}
	doc = page(t, h, "/audit?query=gaps&last=1h", http.StatusOK)
	rows := tid(doc, "result-row")
	if rows.Length() != 2 {
		t.Fatalf("rows = %d, want a gap and a restart", rows.Length())
	}
	for i, want := range []string{"gap", "restart"} {
		if got := rows.Eq(i).Find("td").First().Text(); got != want {
			t.Errorf("row %d kind = %q, want %q", i, got, want)
		}
	}
	if got := rows.Eq(0).Find("td").Eq(4).Text(); got != "1 min 50 s" {
		t.Errorf("gap duration = %q", got)
	}
	if !strings.Contains(rows.Eq(1).Text(), "inst-b") || !strings.Contains(rows.Eq(1).Text(), "inst-a") {
		t.Errorf("restart row = %q", rows.Eq(1).Text())
	}
}

func TestAuditPagesReports(t *testing.T) {
	t.Parallel()
	h := newHandler(t, Options{History: newHistory()})
	doc := page(t, h, "/audit?query=reports&last=1h&limit=40", http.StatusOK)
	next, ok := tid(doc, "next-page").Attr("href")
	if !ok {
		t.Fatal("no next page")
	}
	u, _ := url.Parse(next)
	if u.Query().Get("cursor") == "" || u.Query().Has("last") || u.Query().Get("since") == "" {
		t.Errorf("next page link %q must freeze the window", next)
	}
	doc = page(t, h, next, http.StatusOK)
	if got := txt(tid(doc, "audit-summary")); !strings.HasPrefix(got, "20 reports") {
		t.Errorf("second page summary = %q", got)
	}
	// The CSV of the second page is the whole window's, from its start.
	csvHref, _ := tid(doc, "csv-link").Attr("href")
	if cu, _ := url.Parse(csvHref); cu.Query().Has("cursor") || cu.Query().Get("since") != u.Query().Get("since") {
		t.Errorf("second page's csv-link %q, want the window without the cursor", csvHref)
	}
}

func TestAuditErrorsNextToTheField(t *testing.T) {
	t.Parallel()
	h := newHandler(t, Options{History: newHistory()})
	for _, tc := range []struct {
		name, query, field, want string
	}{
		{"unknown query", "query=everything", "query", `unknown query "everything"`},
		{"bad since", "query=outages&since=noon", "since", `since: "noon" is not a time`},
		{"until before since", "query=outages&since=2026-11-29+08:10&until=2026-11-29+08:00", "until", "must be after since"},
		{"last and since", "query=outages&last=1h&since=2026-11-29", "last", "either last or since"},
		{"bad last", "query=outages&last=forever", "last", "not a positive duration"},
		{"threshold out of range", "query=imbalance&last=1h&threshold=2", "threshold", "threshold must be within [0, 1]"},
		{"threshold not a number", "query=imbalance&last=1h&threshold=lots", "threshold", "not a number"},
		{"gaps interval too long", "query=gaps&last=1h&interval=48h", "interval", "interval must be within"},
		{"gaps interval below a millisecond", "query=gaps&last=1h&interval=1ns", "interval", "interval must be within [1ms, 24h0m0s] in whole milliseconds"},
		{"last past what a duration holds", "query=outages&last=3000000h", "last", `"3000000h" is too long; at most 100000d`},
		{"since before year 1", "query=outages&until=0100-01-01&last=100000d", "since", "is outside [0001-01-01T00:00:00Z, 9999-12-31T23:59:59.999999999Z]"},
		{"limit too big", "query=outages&last=1h&limit=20000", "limit", "limit must be within"},
		{"bad rank", "query=reports&last=1h&rank=x", "rank", `"x" is not a dp_rank`},
		{"negative rank", "query=reports&last=1h&rank=-1", "rank", "ranks: dp_rank -1"},
		{"bad status", "query=reports&last=1h&status=sleepy", "status", `status "sleepy"`},
		{"bad cursor", "query=reports&last=1h&cursor=zzz", "cursor", "cursor: not a cursor"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			doc := page(t, h, "/audit?"+tc.query, http.StatusBadRequest)
			got := txt(tid(doc, "error-"+tc.field))
			if !strings.Contains(got, tc.want) {
				t.Errorf("error-%s = %q, want it to contain %q (page errors: %q)", tc.field, got, tc.want, doc.Find(".field-error").Text())
			}
			if tc.field != "cursor" && tid(tid(doc, "field-"+tc.field), "error-"+tc.field).Length() != 1 {
				t.Errorf("error-%s is not inside field-%s", tc.field, tc.field)
			}
			if tid(doc, "audit-result").Length() != 0 {
				t.Error("a result is shown for a bad query")
			}
			// The CSV of the same query is refused the same way.
			res := get(t, h, "/audit.csv?"+tc.query)
			body, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if res.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), tc.field+": ") {
				t.Errorf("CSV: %d %q", res.StatusCode, body)
			}
		})
	}
}

// TestAuditPageShowsAtMostAThousandReports: a page is built whole in memory,
// a row per rank, so a page of reports is bounded; the CSV of the same
// query, which streams, is not.
func TestAuditPageShowsAtMostAThousandReports(t *testing.T) {
	t.Parallel()
	h := newHandler(t, Options{History: newHistory()})
	doc := page(t, h, "/audit?query=reports&last=1h&limit=5000", http.StatusBadRequest)
	if got := txt(tid(doc, "error-limit")); !strings.Contains(got, "a page shows at most 1000 reports") {
		t.Errorf("error-limit = %q", got)
	}
	page(t, h, "/audit?query=reports&last=1h&limit=1000", http.StatusOK)
	if res := get(t, h, "/audit.csv?query=reports&last=1h&limit=5000"); res.StatusCode != http.StatusOK {
		t.Errorf("CSV with limit 5000: %d", res.StatusCode)
	} else {
		res.Body.Close()
	}
}

// TestAuditPageBoundsItsRankRows: the bound is on rows, a row per rank:
// 30 reports of 500 ranks would be 15 000 rows, so the page ends after
// MaxPageRows of them and links to the rest.
func TestAuditPageBoundsItsRankRows(t *testing.T) {
	t.Parallel()
	var reports []*domain.Report
	for i := range 30 {
		r := fixtureReport(0)
		r.SequenceID, r.ReportTime = uint64(i+1), r.ReportTime.Add(time.Duration(i)*time.Second)
		r.Status, r.LastError, r.Ranks = domain.StatusHealthy, "", nil
		for k := range 500 {
			r.Ranks = append(r.Ranks, domain.RankLoad{DPRank: int64(k), SnapshotTime: r.ReportTime})
		}
		reports = append(reports, r)
	}
	h := newHandler(t, Options{History: &historytest.Fake{
		ReportsFunc: func(q audit.ReportsQuery) (audit.ReportsPage, error) { return historytest.PageOf(reports, q), nil },
	}})
	doc := page(t, h, "/audit?query=reports&since=0001-01-01T00:00:00Z&until=9999-01-01T00:00:00Z&limit=1000", http.StatusOK)
	if rows := tid(doc, "audit-result").Find("tbody tr").Length(); rows != MaxPageRows {
		t.Errorf("%d rows on the page, want %d", rows, MaxPageRows)
	}
	if got := txt(tid(doc, "audit-summary")); !strings.HasPrefix(got, "20 reports") {
		t.Errorf("summary = %q, want 20 reports", got)
	}
	if _, ok := tid(doc, "next-page").Attr("href"); !ok {
		t.Error("no link to the reports after the page")
	}
}

func TestAuditShowsEveryFieldsErrorAtOnce(t *testing.T) {
	t.Parallel()
	h := newHandler(t, Options{History: newHistory()})
	doc := page(t, h, "/audit?query=imbalance&since=yesterday&threshold=3", http.StatusBadRequest)
	for field, want := range map[string]string{"since": `"yesterday" is not a time`, "threshold": "threshold must be within [0, 1]"} {
		if got := txt(tid(tid(doc, "field-"+field), "error-"+field)); !strings.Contains(got, want) {
			t.Errorf("error-%s = %q, want %q", field, got, want)
		}
	}
}

func readCSV(t *testing.T, h http.Handler, target string) (*http.Response, [][]string) {
	t.Helper()
	res := get(t, h, target)
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(res.Body)
		t.Fatalf("GET %s: %d %s", target, res.StatusCode, b)
	}
	recs, err := csv.NewReader(res.Body).ReadAll()
	if err != nil {
		t.Fatalf("CSV: %v", err)
	}
	return res, recs
}

func TestAuditCSVOutages(t *testing.T) {
	t.Parallel()
	h := newHandler(t, Options{History: newHistory()})
	res, recs := readCSV(t, h, "/audit.csv?query=outages&since=2026-11-29T08:00:00Z&until=2026-11-29T09:00:00Z")
	if ct := res.Header.Get("Content-Type"); ct != "text/csv; charset=utf-8" {
		t.Errorf("Content-Type = %q", ct)
	}
	if cd := res.Header.Get("Content-Disposition"); cd != `attachment; filename="loadreporter-outages-20261129T080000Z.csv"` {
		t.Errorf("Content-Disposition = %q", cd)
	}
	want := [][]string{
		{"worker_addr", "start", "end", "ongoing", "duration_ms", "statuses", "reports", "last_error"},
		{fixAddr, "2026-11-29T08:03:20Z", "2026-11-29T08:04:20Z", "false", "60000", "UNREACHABLE", "6", timeoutError},
	}
	if len(recs) != len(want) {
		t.Fatalf("CSV = %q", recs)
	}
	for i := range want {
		if strings.Join(recs[i], ",") != strings.Join(want[i], ",") {
			t.Errorf("CSV line %d = %q\nwant %q", i, recs[i], want[i])
		}
	}
}

func TestAuditCSVReportsFollowsEveryPage(t *testing.T) {
	t.Parallel()
	h := newHandler(t, Options{History: newHistory()})
	// limit is the page size here; the CSV holds the whole window.
	_, recs := readCSV(t, h, "/audit.csv?query=reports&last=1h&limit=7")
	header := strings.Join(recs[0], ",")
	if header != "report_time,worker_addr,source_instance_id,sequence_id,status,last_error,dp_rank,snapshot_time,"+
		"num_running_reqs,max_running_requests,num_waiting_reqs,num_waiting_uncached_tokens,num_used_tokens,"+
		"num_total_tokens,max_total_num_tokens,token_usage,gen_throughput,cache_hit_rate,utilization" {
		t.Errorf("header = %s", header)
	}
	wantRows := (fixReports-outageLen)*fixRanks + outageLen
	if len(recs)-1 != wantRows {
		t.Errorf("rows = %d, want %d", len(recs)-1, wantRows)
	}
	first := recs[1]
	if first[0] != "2026-11-29T08:00:00Z" || first[3] != "1" || first[4] != "HEALTHY" || first[6] != "0" || first[15] != "0.25" {
		t.Errorf("first row = %q", first)
	}
	var unreachable []string
	for _, r := range recs[1:] {
		if r[4] == "UNREACHABLE" {
			unreachable = r
		}
	}
	if unreachable == nil || unreachable[5] != timeoutError || unreachable[6] != "" {
		t.Errorf("UNREACHABLE row = %q", unreachable)
	}
}

// The page's cells keep their classes: numbers aligned right, statuses in
// their colour, empty cells (a report without ranks) plain.
func TestAuditCellClasses(t *testing.T) {
	t.Parallel()
	h := newHandler(t, Options{History: newHistory()})
	doc := page(t, h, "/audit?query=reports&last=1h&status=unreachable&limit=1", http.StatusOK)
	var classes []string
	tid(doc, "result-row").First().Find("td").Each(func(_ int, s *goquery.Selection) {
		c, _ := s.Attr("class")
		classes = append(classes, c)
	})
	want := []string{"", "", "", "num", "status-unreachable", ""}
	for range 13 { // the rank columns, empty
		want = append(want, "")
	}
	if strings.Join(classes, ",") != strings.Join(want, ",") {
		t.Errorf("classes = %q\nwant %q", classes, want)
	}
	doc = page(t, h, "/audit?query=rank-stats&last=1h", http.StatusOK)
	classes = nil
	tid(doc, "result-row").First().Find("td").Each(func(_ int, s *goquery.Selection) {
		c, _ := s.Attr("class")
		classes = append(classes, c)
	})
	if got := strings.Join(classes, ","); got != ",num,num,num,num,num,num,num" {
		t.Errorf("rank-stats classes = %s", got)
	}
}

// The download is audittable's CSV of the same query over every page: the
// bytes `loadreporter audit --format csv` writes.
func TestAuditCSVIsTheTablesCSV(t *testing.T) {
	t.Parallel()
	st := newHistory()
	h := newHandler(t, Options{History: st})
	for _, q := range []audittable.Query{
		{Name: audittable.Outages},
		{Name: audittable.Reports, Limit: 7, AllPages: true},
		{Name: audittable.RankStats},
		{Name: audittable.Gaps, Interval: 10 * time.Second},
		{Name: audittable.Imbalance, Threshold: 0.4},
	} {
		t.Run(q.Name, func(t *testing.T) {
			q.Window = audit.Window{Since: t0, Until: fixNow}
			q.Workers = []string{fixAddr}
			tab, err := audittable.Run(t.Context(), st, q)
			if err != nil {
				t.Fatal(err)
			}
			var want strings.Builder
			if err := tab.WriteCSV(&want); err != nil {
				t.Fatal(err)
			}
			v := url.Values{"query": {q.Name}, "since": {isoTime(t0)}, "until": {isoTime(fixNow)},
				"threshold": {"0.4"}, "interval": {"10s"}}
			if q.Limit != 0 {
				v.Set("limit", strconv.Itoa(q.Limit))
			}
			res := get(t, h, "/audit.csv?"+v.Encode())
			got, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if res.StatusCode != http.StatusOK || string(got) != want.String() || len(tab.Rows) == 0 && q.Name != audittable.Gaps {
				t.Errorf("%d:\n%s\nwant (%d rows):\n%s", res.StatusCode, got, len(tab.Rows), want.String())
			}
		})
	}
}
