package tests

import (
	"strings"
	"testing"
	"time"

	v3orcaservicepb "github.com/cncf/xds/go/xds/service/orca/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/protobuf/types/known/durationpb"
)

// TestORCAOnThePort: StreamCoreMetrics is served on the one port from the
// same fire loop, counted as an "orca" session, health-checked and listed
// by reflection.
func TestORCAOnThePort(t *testing.T) {
	t.Parallel()
	eng := &countingEngine{ranks: 2}
	m := startMain(t, testConfig(), eng)
	ctx := testCtx(t, 10*time.Second)
	cc, err := grpc.NewClient(m.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	st, err := v3orcaservicepb.NewOpenRcaServiceClient(cc).StreamCoreMetrics(ctx,
		&v3orcaservicepb.OrcaLoadReportRequest{ReportInterval: durationpb.New(50 * time.Millisecond)})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		r, err := st.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if r.ApplicationUtilization != 0.25 || r.NamedMetrics["status"] != 1 || r.NamedMetrics["rank.1.token_usage"] != 0.25 {
			t.Fatalf("report %v", r)
		}
	}
	if _, metrics := httpGet(t, "http://"+m.Addr()+"/metrics"); !strings.Contains(metrics, `loadreporter_sessions{kind="orca"} 1`) {
		t.Errorf("/metrics lacks the orca session")
	}
	hr, err := healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{Service: "xds.service.orca.v3.OpenRcaService"})
	if err != nil || hr.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health %v %v", hr, err)
	}
	rs, err := reflectionpb.NewServerReflectionClient(cc).ServerReflectionInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_ = rs.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_FileContainingSymbol{
		FileContainingSymbol: "xds.service.orca.v3.OpenRcaService"}})
	resp, err := rs.Recv()
	if err != nil || len(resp.GetFileDescriptorResponse().GetFileDescriptorProto()) == 0 {
		t.Fatalf("reflection of the ORCA service: %v, %v", resp, err)
	}
	_ = rs.CloseSend()
}
