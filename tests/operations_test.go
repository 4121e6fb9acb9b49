package tests

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"

	lrv1 "github.com/loadreporter/loadreporter/gen/loadreporter/v1"
	"github.com/loadreporter/loadreporter/gen/loadreporter/v1/loadreporterv1connect"
)

func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestOnePortServesOperations: probes, Prometheus metrics, gRPC health
// checking and server reflection share the Monitor's port.
func TestOnePortServesOperations(t *testing.T) {
	t.Parallel()
	m := startMain(t, testConfig(), nil)
	base := "http://" + m.Addr()
	if code, body := httpGet(t, base+"/healthz"); code != 200 || !strings.Contains(body, "ok") {
		t.Fatalf("/healthz %d %q", code, body)
	}
	if code, _ := httpGet(t, base+"/readyz"); code != 200 {
		t.Fatalf("/readyz %d", code)
	}
	r := openGRPC(t, testCtx(t, 10*time.Second), m.Addr())
	_ = r.Send(registerFrame("ops", 100, 5000))
	recvFrame(t, r)
	recvReport(t, r)
	// The fire's counters are updated right after its reports are handed
	// out: read /metrics until they show (bounded by the test's deadline).
	var metrics string
	eventually(t, testCtx(t, 5*time.Second), "the fire's counters on /metrics", func() bool {
		_, metrics = httpGet(t, base+"/metrics")
		return strings.Contains(metrics, `loadreporter_reports_delivered_total{kind="monitor"}`)
	})
	for _, series := range []string{
		`loadreporter_pulls_total{outcome="ok"}`, `loadreporter_sessions{kind="monitor"} 1`,
		`loadreporter_reports_total{status="HEALTHY"}`, `loadreporter_reports_delivered_total{kind="monitor"}`,
		"loadreporter_pull_duration_seconds_bucket", "loadreporter_fire_lateness_seconds_count", "loadreporter_report_age_seconds",
		"loadreporter_history_written_total", "loadreporter_history_lag_seconds", "loadreporter_history_buffered_reports",
		"loadreporter_stalled_streams_ended_total", "loadreporter_history_retention_removed_total",
		"loadreporter_history_retention_failures_total",
	} {
		if !strings.Contains(metrics, series) {
			t.Errorf("/metrics lacks %s", series)
		}
	}

	cc, err := grpc.NewClient(m.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	ctx := testCtx(t, 10*time.Second)
	hr, err := healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{Service: "sglang.router.loadmonitor.v1.LoadMonitorService"})
	if err != nil || hr.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health %v %v", hr, err)
	}
	rs, err := reflectionpb.NewServerReflectionClient(cc).ServerReflectionInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_ = rs.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}})
	resp, err := rs.Recv()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range resp.GetListServicesResponse().GetService() {
		names = append(names, s.GetName())
	}
	for _, want := range []string{"sglang.router.loadmonitor.v1.LoadMonitorService", "loadreporter.v1.HistoryService", "loadreporter.v1.WatchService"} {
		if !strings.Contains(strings.Join(names, " "), want) {
			t.Errorf("reflection lists %v, missing %s", names, want)
		}
	}
	_ = rs.CloseSend()
	_ = r.Send(stopFrame)
}

// TestAuthToken: with --auth-token every RPC and page needs the bearer
// token; the probes stay open.
func TestAuthToken(t *testing.T) {
	t.Parallel()
	c := testConfig()
	c.Security.AuthToken = "s3cret"
	m := startMain(t, c, nil)
	base := "http://" + m.Addr()
	if code, _ := httpGet(t, base+"/healthz"); code != 200 {
		t.Fatalf("/healthz needs no token, got %d", code)
	}
	if code, _ := httpGet(t, base+"/metrics"); code != http.StatusUnauthorized {
		t.Fatalf("/metrics without token: %d", code)
	}

	ctx := testCtx(t, 10*time.Second)
	r := openGRPC(t, ctx, m.Addr())
	_ = r.Send(registerFrame("no-token", 100, 5000))
	if _, err := r.Recv(); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("grpc without token: %v", err)
	}
	authed := openGRPC(t, metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer s3cret"), m.Addr())
	_ = authed.Send(registerFrame("with-token", 100, 5000))
	if recvFrame(t, authed).GetRegistered() == nil {
		t.Fatal("no ack with the token")
	}
	_ = authed.Send(stopFrame)

	admin := loadreporterv1connect.NewAdminServiceClient(http.DefaultClient, base)
	_, err := admin.SetTopology(context.Background(), connect.NewRequest(&lrv1.SetTopologyRequest{DpSize: 4}))
	if connect.CodeOf(err) != connect.CodeUnauthenticated {
		t.Fatalf("connect without token: %v", err)
	}
	req := connect.NewRequest(&lrv1.SetTopologyRequest{DpSize: 4})
	req.Header().Set("Authorization", "Bearer s3cret")
	if _, err := admin.SetTopology(context.Background(), req); err != nil {
		t.Fatalf("connect with token: %v", err)
	}
}
