package web

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/loadreporter/loadreporter/domain/audit"
	"github.com/loadreporter/loadreporter/web/internal/historytest"
)

// emptyHistory validates every query as a store does and holds nothing, so
// whatever a fuzzed form reaches the store with is either refused as an
// argument error or answered.
func emptyHistory() *historytest.Fake {
	return &historytest.Fake{
		ReportsFunc:   func(audit.ReportsQuery) (audit.ReportsPage, error) { return audit.ReportsPage{}, nil },
		OutagesFunc:   func(audit.OutagesQuery) (audit.OutagesResult, error) { return audit.OutagesResult{}, nil },
		RankStatsFunc: func(audit.RankStatsQuery) (audit.RankStatsResult, error) { return audit.RankStatsResult{}, nil },
		GapsFunc:      func(audit.GapsQuery) (audit.GapsResult, error) { return audit.GapsResult{}, nil },
		ImbalanceFunc: func(audit.ImbalanceQuery) (audit.ImbalanceResult, error) { return audit.ImbalanceResult{}, nil },
	}
}

// FuzzAuditArguments: no audit or history argument, however malformed (NUL
// bytes, invalid UTF-8, huge numbers, unknown names), makes a page fail
// with a server error: each is answered, or refused as the user's mistake
// (400); a worker no store can hold (NUL, invalid UTF-8) is always refused.
func FuzzAuditArguments(f *testing.F) {
	f.Add("outages", "1h", "", "", "10.0.0.7:30000", "unreachable", "3", "0.4", "10s", "100", "")
	f.Add("reports", "", "2026-11-30T07:00:00Z", "2026-11-30T08:00:00Z", "w\x00", "HEALTY", "-1", "NaN", "0s", "-5", "garbage")
	f.Add("imbalance", "99999h", "", "", "\xff\xfe", "REPORT_STATUS_STALE", "99999999999", "1e309", "25h", "1000000", "eyJ2IjoxfQ")
	f.Add("gaps", "", "yesterday", "1700000000000", "", "", "2147483648", "-0", "1ns", "0", "")
	h := newHandler(f, Options{History: emptyHistory()})
	f.Fuzz(func(t *testing.T, query, last, since, until, worker, status, rank, threshold, interval, limit, cursor string) {
		v := url.Values{"query": {query}, "last": {last}, "since": {since}, "until": {until}, "worker": {worker},
			"status": {status}, "rank": {rank}, "threshold": {threshold}, "interval": {interval}, "limit": {limit}, "cursor": {cursor}}
		for _, path := range []string{"/audit", "/audit.csv", "/history"} {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path+"?"+v.Encode(), nil))
			if rec.Code != http.StatusOK && rec.Code != http.StatusBadRequest {
				t.Fatalf("%s?%s: HTTP %d: %.300s", path, v.Encode(), rec.Code, rec.Body.String())
			}
			badWorker := !utf8.ValidString(worker) || strings.ContainsRune(worker, 0)
			if badWorker && path != "/history" && rec.Code != http.StatusBadRequest {
				t.Fatalf("%s?%s: worker %q answered with HTTP %d, want 400", path, v.Encode(), worker, rec.Code)
			}
		}
	})
}
