package rpc

import (
	"context"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/loadreporter/loadreporter/domain"
	"github.com/loadreporter/loadreporter/domain/audit"
	lrv1 "github.com/loadreporter/loadreporter/gen/loadreporter/v1"
	"github.com/loadreporter/loadreporter/gen/loadreporter/v1/loadreporterv1connect"
	pb "github.com/loadreporter/loadreporter/gen/sglang/router/loadmonitor/v1"
	"github.com/loadreporter/loadreporter/ports"
)

// fakeQuery records the reports queries it answers, with an empty page.
type fakeQuery struct {
	ports.HistoryQuery // nil: other queries are not expected
	got                chan audit.ReportsQuery
}

func (q fakeQuery) Reports(_ context.Context, rq audit.ReportsQuery) (audit.ReportsPage, error) {
	q.got <- rq
	return audit.ReportsPage{}, nil
}

const allowedStatuses = "allowed REPORT_STATUS_HEALTHY, REPORT_STATUS_STALE, REPORT_STATUS_UNREACHABLE"

// TestHistoryUnknownEnumNameInJSON: a status name the enum does not define
// is an argument error naming the field, the value and the allowed names,
// never a filter that silently vanishes; unknown fields stay tolerated.
func TestHistoryUnknownEnumNameInJSON(t *testing.T) {
	t.Parallel()
	q := fakeQuery{got: make(chan audit.ReportsQuery, 1)}
	srv := serve(t, NewHistory(q, time.Now, time.Second).Handler)
	post := func(contentType, body string) (int, string) {
		t.Helper()
		req, _ := http.NewRequestWithContext(testContext(t), http.MethodPost,
			srv.URL+loadreporterv1connect.HistoryServiceListReportsProcedure, strings.NewReader(body))
		req.Header.Set("Content-Type", contentType)
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, c := range []struct{ name, body, want string }{
		{"misspelled", `{"statuses":["REPORT_STATUS_HEALTHY","REPORT_STATUS_HEALTY"]}`, `statuses[1]: unknown ReportStatus \"REPORT_STATUS_HEALTY\"; ` + allowedStatuses},
		{"short name", `{"statuses":["HEALTHY"]}`, `statuses[0]: unknown ReportStatus \"HEALTHY\"`},
		{"number", `{"statuses":[7]}`, `statuses[0]: unknown ReportStatus 7; ` + allowedStatuses},
	} {
		for _, ct := range []string{"application/json", "application/json; charset=utf-8"} {
			t.Run(c.name+" "+ct, func(t *testing.T) {
				code, body := post(ct, c.body)
				if code != http.StatusBadRequest || !strings.Contains(body, `"invalid_argument"`) || !strings.Contains(body, c.want) {
					t.Errorf("%d %s, want 400 invalid_argument with %s", code, body, c.want)
				}
			})
		}
	}
	select {
	case rq := <-q.got:
		t.Fatalf("an invalid request reached the query: %+v", rq)
	default:
	}
	code, body := post("application/json", `{"window":{"sinceUnixMs":"1000"},"statuses":["REPORT_STATUS_STALE"],"someFutureField":1}`)
	if code != http.StatusOK {
		t.Fatalf("%d %s for a valid request with an unknown field", code, body)
	}
	if rq := <-q.got; !slices.Equal(rq.Statuses, []domain.Status{domain.StatusStale}) {
		t.Errorf("statuses %v, want [STALE]", rq.Statuses)
	}
}

// TestHistoryUnknownEnumNumber: a number outside the enum, in binary
// protobuf over every protocol, is an argument error too, never cut down
// to a status that exists (259 would be UNREACHABLE as an int8).
func TestHistoryUnknownEnumNumber(t *testing.T) {
	t.Parallel()
	q := fakeQuery{got: make(chan audit.ReportsQuery, 1)}
	srv := serve(t, NewHistory(q, time.Now, time.Second).Handler)
	for _, p := range clientProtocols {
		for _, n := range []pb.ReportStatus{7, 259, -1} {
			client := loadreporterv1connect.NewHistoryServiceClient(srv.Client(), srv.URL, p.opts...)
			_, err := client.ListReports(testContext(t), connect.NewRequest(&lrv1.ListReportsRequest{
				Statuses: []pb.ReportStatus{pb.ReportStatus_REPORT_STATUS_HEALTHY, n}}))
			if connect.CodeOf(err) != connect.CodeInvalidArgument || !strings.Contains(err.Error(), "statuses[1]: unknown ReportStatus") {
				t.Errorf("%s, status %d: %v, want INVALID_ARGUMENT naming statuses[1]", p.name, n, err)
			}
		}
	}
	select {
	case rq := <-q.got:
		t.Fatalf("an invalid request reached the query: %+v", rq)
	default:
	}
}

// TestCheckEnumsNested: the checks follow nested messages and lists and
// name the path to the value.
func TestCheckEnumsNested(t *testing.T) {
	t.Parallel()
	md := (&lrv1.ListOutagesResponse{}).ProtoReflect().Descriptor()
	err := checkJSONEnums([]byte(`{"truncated":true,"outages":[{"statuses":["REPORT_STATUS_STALE"]},{"statuses":["NOPE"]}]}`), md)
	if err == nil || !strings.HasPrefix(err.Error(), `outages[1].statuses[0]: unknown ReportStatus "NOPE"`) {
		t.Errorf("JSON: %v", err)
	}
	if err := checkJSONEnums([]byte(`{"outages":[{"statuses":["REPORT_STATUS_STALE"]}],"unknown":{"x":1}}`), md); err != nil {
		t.Errorf("valid JSON: %v", err)
	}
	m := &lrv1.ListOutagesResponse{Outages: []*lrv1.Outage{{}, {Statuses: []pb.ReportStatus{1, 9}}}}
	if err := checkEnums(m.ProtoReflect(), ""); err == nil || !strings.HasPrefix(err.Error(), "outages[1].statuses[1]: unknown ReportStatus 9") {
		t.Errorf("binary: %v", err)
	}
	if holdsEnums((&pb.RouterFrame{}).ProtoReflect().Descriptor()) {
		t.Error("RouterFrame holds no enum, yet is checked")
	}
}
