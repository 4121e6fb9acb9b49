package porttest_test

import (
	"testing"
	"time"

	"github.com/loadreporter/loadreporter/domain"
	"github.com/loadreporter/loadreporter/ports"
)

func TestParseStatus(t *testing.T) {
	for in, want := range map[string]domain.Status{
		"HEALTHY": domain.StatusHealthy, "stale": domain.StatusStale,
		" REPORT_STATUS_UNREACHABLE ": domain.StatusUnreachable, "report_status_healthy": domain.StatusHealthy,
	} {
		if got, err := ports.ParseStatus(in); err != nil || got != want {
			t.Errorf("ParseStatus(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "UNSPECIFIED", "REPORT_STATUS_UNSPECIFIED", "ok", "1"} {
		if _, err := ports.ParseStatus(in); domain.ErrorCode(err) != domain.CodeInvalidArgument {
			t.Errorf("ParseStatus(%q) = %v, want %s", in, err, domain.CodeInvalidArgument)
		}
	}
}

func TestQueryDefaults(t *testing.T) {
	w := ports.Window{Since: time.Unix(0, 0), Until: time.Unix(60, 0)}
	if got := (ports.ReportsQuery{Window: w}).PageSize(); got != ports.DefaultPageSize {
		t.Errorf("default page size %d", got)
	}
	if got := (ports.OutagesQuery{Window: w, Limit: 7}).MaxResults(); got != 7 {
		t.Errorf("explicit limit %d", got)
	}
	if got := (ports.GapsQuery{Window: w}).MaxResults(); got != ports.DefaultResultLimit {
		t.Errorf("default limit %d", got)
	}
	if !w.Contains(time.Unix(0, 0)) || w.Contains(time.Unix(60, 0)) {
		t.Error("Window is not half-open")
	}
}

func TestCursorRoundTrip(t *testing.T) {
	k := ports.ReportKey{Time: time.UnixMicro(1_700_000_000_123_456).UTC(), WorkerAddr: "w:1", SourceInstanceID: "s", SequenceID: 42}
	w := ports.Window{Since: time.Unix(0, 0), Until: time.Unix(60, 0)}
	for _, desc := range []bool{false, true} {
		got, ok, err := ports.ReportsQuery{Window: w, Cursor: k.Cursor(desc), Descending: desc}.After()
		if err != nil || !ok || got.Compare(k) != 0 || !got.Time.Equal(k.Time) {
			t.Errorf("desc=%t: After() = %+v, %t, %v; want %+v", desc, got, ok, err, k)
		}
	}
	if _, ok, err := (ports.ReportsQuery{Window: w}).After(); ok || err != nil {
		t.Errorf("no cursor: ok=%t err=%v", ok, err)
	}
}
