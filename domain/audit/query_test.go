package audit_test

import (
	"encoding/base64"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/loadreporter/loadreporter/domain"
	"github.com/loadreporter/loadreporter/domain/audit"
)

func TestParseStatus(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]domain.Status{
		"HEALTHY": domain.StatusHealthy, "stale": domain.StatusStale,
		" REPORT_STATUS_UNREACHABLE ": domain.StatusUnreachable, "report_status_healthy": domain.StatusHealthy,
	} {
		if got, err := audit.ParseStatus(in); err != nil || got != want {
			t.Errorf("ParseStatus(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "UNSPECIFIED", "REPORT_STATUS_UNSPECIFIED", "ok", "1"} {
		if _, err := audit.ParseStatus(in); domain.ErrorCode(err) != domain.CodeInvalidArgument {
			t.Errorf("ParseStatus(%q) = %v, want %s", in, err, domain.CodeInvalidArgument)
		}
	}
}

func TestQueryDefaults(t *testing.T) {
	t.Parallel()
	w := audit.Window{Since: time.Unix(0, 0), Until: time.Unix(60, 0)}
	if got := (audit.ReportsQuery{Window: w}).PageSize(); got != audit.DefaultPageSize {
		t.Errorf("default page size %d", got)
	}
	if got := (audit.OutagesQuery{Window: w, Limit: 7}).MaxResults(); got != 7 {
		t.Errorf("explicit limit %d", got)
	}
	if got := (audit.GapsQuery{Window: w}).MaxResults(); got != audit.DefaultResultLimit {
		t.Errorf("default limit %d", got)
	}
	if !w.Contains(time.Unix(0, 0)) || w.Contains(time.Unix(60, 0)) {
		t.Error("Window is not half-open")
	}
}

func TestCursorRoundTrip(t *testing.T) {
	t.Parallel()
	k := audit.ReportKey{Time: time.UnixMicro(1_700_000_000_123_456).UTC(), WorkerAddr: "w:1", SourceInstanceID: "s", SequenceID: 42}
	w := audit.Window{Since: time.Unix(0, 0), Until: time.Unix(60, 0)}
	for _, desc := range []bool{false, true} {
		got, ok, err := audit.ReportsQuery{Window: w, Cursor: k.Cursor(desc), Descending: desc}.After()
		if err != nil || !ok || got.Compare(k) != 0 || !got.Time.Equal(k.Time) {
			t.Errorf("desc=%t: After() = %+v, %t, %v; want %+v", desc, got, ok, err, k)
		}
	}
	if _, ok, err := (audit.ReportsQuery{Window: w}).After(); ok || err != nil {
		t.Errorf("no cursor: ok=%t err=%v", ok, err)
	}
	// Hand-edited values no report holds are refused, where the two stores
	// would read them differently.
	for _, body := range []string{
		`{"v":1,"t":-9223372036854775808,"w":"w:1","s":"s","q":1,"d":false}`,
		`{"v":1,"t":253402300800000001,"w":"w:1","s":"s","q":1,"d":false}`,
		`{"v":1,"t":1700000000123456,"w":"w:1","s":"s","q":9223372036854775808,"d":false}`,
	} {
		q := audit.ReportsQuery{Window: w, Cursor: base64.RawURLEncoding.EncodeToString([]byte(body))}
		if _, _, err := q.After(); domain.ErrorCode(err) != domain.CodeInvalidArgument {
			t.Errorf("cursor %s: %v, want INVALID_ARGUMENT", body, err)
		}
	}
}

func TestTextArgumentsAreArgumentErrors(t *testing.T) {
	t.Parallel()
	w := audit.Window{Since: time.Unix(0, 0), Until: time.Unix(60, 0)}
	for _, worker := range []string{"10.0.0.7:30000\x00", "bad \xff utf-8"} {
		for name, err := range map[string]error{
			"reports":    audit.ReportsQuery{Window: w, Workers: []string{worker}}.Validate(),
			"outages":    audit.OutagesQuery{Window: w, Workers: []string{worker}}.Validate(),
			"rank-stats": audit.RankStatsQuery{Window: w, Workers: []string{worker}}.Validate(),
			"gaps":       audit.GapsQuery{Window: w, Workers: []string{worker}, Interval: time.Second}.Validate(),
			"imbalance":  audit.ImbalanceQuery{Window: w, Workers: []string{worker}}.Validate(),
		} {
			if domain.ErrorCode(err) != domain.CodeInvalidArgument || !strings.HasPrefix(domain.ErrorMessage(err), "workers: ") {
				t.Errorf("%s with worker %q: %v, want an argument error naming workers", name, worker, err)
			}
		}
	}
	nul := audit.ReportKey{Time: time.Unix(1, 0), WorkerAddr: "w\x00", SourceInstanceID: "s", SequenceID: 1}.Cursor(false)
	if _, _, err := (audit.ReportsQuery{Window: w, Cursor: nul}).After(); domain.ErrorCode(err) != domain.CodeInvalidArgument {
		t.Errorf("a cursor carrying NUL: %v", err)
	}
}

// A window bound outside years 0001..9999 is an argument error naming the
// bound, its value and the range, for every query: PostgreSQL answered
// such windows with nothing (pgx wraps past year 294247) or refused them,
// where the in-memory store answered.
func TestWindowBoundsOutsideWhatStoresHold(t *testing.T) {
	t.Parallel()
	ms := time.UnixMilli
	for _, tc := range []struct {
		name  string
		w     audit.Window
		field string
		value string
	}{
		{"until at the int64 end", audit.Window{Since: ms(1), Until: ms(math.MaxInt64)}, "until", "292278994-08-17T07:12:55.807Z"},
		{"until 1e17 ms", audit.Window{Since: ms(1), Until: ms(1e17)}, "until", "3170843-"},
		{"until 9.3e15 ms", audit.Window{Since: ms(1), Until: ms(9.3e15)}, "until", "296675-"},
		{"until in year 10000", audit.Window{Since: ms(1), Until: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}, "until", "10000-01-01T00:00:00Z"},
		{"since -9.3e15 ms", audit.Window{Since: ms(-9.3e15), Until: ms(1)}, "since", "-292736-"},
		{"since just before year 1", audit.Window{Since: time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC).Add(-time.Nanosecond), Until: ms(1)}, "since", "0000-12-31T23:59:59.999999999Z"},
	} {
		for name, err := range map[string]error{
			"reports":    audit.ReportsQuery{Window: tc.w}.Validate(),
			"outages":    audit.OutagesQuery{Window: tc.w}.Validate(),
			"rank-stats": audit.RankStatsQuery{Window: tc.w}.Validate(),
			"gaps":       audit.GapsQuery{Window: tc.w, Interval: time.Second}.Validate(),
			"imbalance":  audit.ImbalanceQuery{Window: tc.w}.Validate(),
		} {
			msg := domain.ErrorMessage(err)
			if domain.ErrorCode(err) != domain.CodeInvalidArgument || !strings.HasPrefix(msg, tc.field+" "+tc.value) ||
				!strings.Contains(msg, "[0001-01-01T00:00:00Z, 9999-12-31T23:59:59.999999999Z]") {
				t.Errorf("%s, %s: %v; want INVALID_ARGUMENT naming %s, its value %s… and the range", tc.name, name, err, tc.field, tc.value)
			}
		}
	}
	// The widest window: from the first instant a caller can give (the
	// zero time reads as unset) to the last of year 9999, in any zone.
	widest := audit.Window{
		Since: time.Date(1, 1, 1, 0, 0, 0, 1000, time.UTC),
		Until: time.Date(9999, 12, 31, 23, 59, 59, 999_999_999, time.UTC).In(time.FixedZone("UTC+5", 5*3600)),
	}
	if err := (audit.ReportsQuery{Window: widest}).Validate(); err != nil {
		t.Errorf("widest window: %v", err)
	}
}
