package pollapi

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/loadreporter/loadreporter/domain"
	schedulerpb "github.com/loadreporter/loadreporter/gen/sglang/grpc/scheduler"
	"github.com/loadreporter/loadreporter/gen/sglang/grpc/scheduler/schedulerconnect"
)

func getLoadsClient(t *testing.T, h *Handler) schedulerconnect.SglangSchedulerClient {
	t.Helper()
	mux := http.NewServeMux()
	mux.Handle(GetLoadsProcedure, h.GetLoadsHandler())
	srv := httptest.NewUnstartedServer(mux)
	srv.EnableHTTP2 = true
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return schedulerconnect.NewSglangSchedulerClient(srv.Client(), srv.URL, connect.WithGRPC())
}

// TestGetLoadsOverGRPC: SGLang's GetLoadsResponse from the shared pull,
// counts saturated at int32, dp_rank honoured; a report no poller may
// route on is UNAVAILABLE saying why; an unknown include is
// INVALID_ARGUMENT.
func TestGetLoadsOverGRPC(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)
	p := &fakePoller{report: &domain.Report{SequenceID: 4, ReportTime: at, Status: domain.StatusHealthy, Ranks: []domain.RankLoad{
		{DPRank: 0, SnapshotTime: at, NumRunningReqs: 3, NumWaitingReqs: 2, NumUsedTokens: 5 << 31, MaxTotalNumTokens: 1 << 20,
			MaxRunningRequests: 64, TokenUsage: 0.5, NumWaitingUncachedTokens: 900},
		{DPRank: 1, SnapshotTime: at, NumRunningReqs: 1, MaxTotalNumTokens: 1 << 20, MaxRunningRequests: 64, TokenUsage: 0.1},
	}}}
	c := getLoadsClient(t, mustNew(t, p, Options{}))
	resp, err := c.GetLoads(t.Context(), connect.NewRequest(&schedulerpb.GetLoadsRequest{Include: []string{"core", "disagg", "queues", "memory"}}))
	if err != nil {
		t.Fatal(err)
	}
	m := resp.Msg
	if m.GetDpRankCount() != 2 || len(m.GetLoads()) != 2 || m.GetTimestamp() != "2026-12-01T08:00:00+00:00" || m.GetVersion() == "" {
		t.Fatalf("envelope %v", m)
	}
	l := m.GetLoads()[0]
	if l.GetNumRunningReqs() != 3 || l.GetNumTotalReqs() != 5 || l.GetNumUsedTokens() != 1<<31-1 || l.GetNumWaitingUncachedTokens() != 900 ||
		l.GetMaxTotalNumTokens() != 1<<20 || l.GetMaxRunningRequests() != 64 || l.GetTokenUsage() != 0.5 {
		t.Fatalf("rank 0 %v", l)
	}
	if a := m.GetAggregate(); a.GetTotalRunningReqs() != 4 || a.GetTotalReqs() != 6 || a.GetAvgTokenUsage() != 0.3 {
		t.Fatalf("aggregate %v", a)
	}
	one := int32(1)
	resp, err = c.GetLoads(t.Context(), connect.NewRequest(&schedulerpb.GetLoadsRequest{DpRank: &one}))
	if err != nil || len(resp.Msg.GetLoads()) != 1 || resp.Msg.GetLoads()[0].GetDpRank() != 1 || resp.Msg.GetDpRankCount() != 2 {
		t.Fatalf("dp_rank 1: %v %v", resp, err)
	}
	_, err = c.GetLoads(t.Context(), connect.NewRequest(&schedulerpb.GetLoadsRequest{Include: []string{"core", "bogus"}}))
	if connect.CodeOf(err) != connect.CodeInvalidArgument || !strings.Contains(err.Error(), `"bogus"`) {
		t.Fatalf("unknown include: %v", err)
	}
	p.report = &domain.Report{ReportTime: at, Status: domain.StatusStale, LastError: "load snapshot stale by 4000 ms",
		Ranks: []domain.RankLoad{{SnapshotTime: at.Add(-4 * time.Second)}}}
	_, err = c.GetLoads(t.Context(), connect.NewRequest(&schedulerpb.GetLoadsRequest{}))
	if connect.CodeOf(err) != connect.CodeUnavailable || !strings.Contains(err.Error(), "STALE: load snapshot stale by 4000 ms") {
		t.Fatalf("stale: %v", err)
	}
	p.report = &domain.Report{Status: domain.StatusUnreachable, LastError: "dial tcp: connection refused"}
	_, err = c.GetLoads(t.Context(), connect.NewRequest(&schedulerpb.GetLoadsRequest{}))
	if connect.CodeOf(err) != connect.CodeUnavailable || !strings.Contains(err.Error(), "UNREACHABLE: dial tcp: connection refused") {
		t.Fatalf("unreachable: %v", err)
	}
}

// TestGetLoadsPollErrorsTravelByTheTable: a failed poll is the Connect code
// of adapters/internal/connectcode's table with the error's message, and
// UNAVAILABLE for a code the table does not list.
func TestGetLoadsPollErrorsTravelByTheTable(t *testing.T) {
	t.Parallel()
	p := &fakePoller{}
	c := getLoadsClient(t, mustNew(t, p, Options{}))
	for _, tc := range []struct {
		err  error
		want connect.Code
	}{
		{domain.Errorf(domain.CodeResourceExhausted, "too many sessions"), connect.CodeResourceExhausted},
		{domain.Errorf(domain.CodeShuttingDown, "the reporter is shutting down"), connect.CodeUnavailable},
		{domain.Errorf(domain.CodeUnavailable, "the poll ended without a report"), connect.CodeUnavailable},
		{domain.Errorf(domain.CodeInternal, "a bug"), connect.CodeUnavailable},
	} {
		p.err = tc.err
		_, err := c.GetLoads(t.Context(), connect.NewRequest(&schedulerpb.GetLoadsRequest{}))
		if connect.CodeOf(err) != tc.want || !strings.Contains(err.Error(), domain.ErrorMessage(tc.err)) {
			t.Errorf("poll error %v: got %v, want %s with its message", tc.err, err, tc.want)
		}
	}
}
