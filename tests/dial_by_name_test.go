package tests

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/resolver/manual"
	"google.golang.org/grpc/status"

	loadreporterv1 "github.com/loadreporter/loadreporter/gen/loadreporter/v1"
	"github.com/loadreporter/loadreporter/gen/loadreporter/v1/loadreporterv1connect"
	pb "github.com/loadreporter/loadreporter/gen/sglang/router/loadmonitor/v1"
	"github.com/loadreporter/loadreporter/gen/sglang/router/loadmonitor/v1/loadmonitorv1connect"
)

// dialByName is a grpc-go channel to addr whose target is name: grpc-go
// sends the target as :authority, as it does for a Kubernetes Service
// name, while the dialer reaches 127.0.0.1.
func dialByName(t *testing.T, target, addr string, opts ...grpc.DialOption) *grpc.ClientConn {
	t.Helper()
	cc, err := grpc.NewClient(target, append([]grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "tcp", addr)
		})}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	return cc
}

// TestRoutersDialByAnyName: with the default flags, native gRPC clients
// dialing the worker by a DNS name (passthrough and dns targets, as
// grpc-go and SGLang's router build them) and pollers naming any Host are
// served; what a browser can reach still refuses a name it was not told
// about (a DNS-rebinding page).
func TestRoutersDialByAnyName(t *testing.T) {
	t.Parallel()
	m := startMain(t, testConfig(), &countingEngine{ranks: 2})
	port := m.Addr()[strings.LastIndex(m.Addr(), ":"):]
	// A resolver of the router's own (as a Kubernetes-aware router has)
	// that finds the worker at 127.0.0.1 under a name.
	k8s := manual.NewBuilderWithScheme("k8s")
	k8s.InitialState(resolver.State{Addresses: []resolver.Address{{Addr: m.Addr()}}})
	for _, target := range []string{
		"passthrough:///workers.serving.svc.cluster.local" + port,
		"k8s:///worker-7.serving" + port,
	} {
		t.Run("monitor "+target, func(t *testing.T) {
			ctx := testCtx(t, 10e9)
			cc := dialByName(t, target, m.Addr(), grpc.WithResolvers(k8s))
			st, err := cc.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true, ClientStreams: true},
				loadmonitorv1connect.LoadMonitorServiceMonitorProcedure)
			if err != nil {
				t.Fatal(err)
			}
			r := grpcRouter{st}
			if err := r.Send(registerFrame("by-name", 100, 5000)); err != nil {
				t.Fatal(err)
			}
			if recvFrame(t, r).GetRegistered() == nil {
				t.Fatal("no ack")
			}
			if rep := recvReport(t, r); rep.GetStatus() != pb.ReportStatus_REPORT_STATUS_HEALTHY {
				t.Fatalf("report %v", rep)
			}
			hc, err := healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{})
			if err != nil || hc.GetStatus() != healthpb.HealthCheckResponse_SERVING {
				t.Fatalf("health by name: %v %v", hc, err)
			}
		})
	}

	t.Run("pollers and scrapers by name", func(t *testing.T) {
		for _, path := range []string{"/v1/loads?include=core,disagg,queues,memory", "/metrics", "/healthz"} {
			if code := getWithHost(t, "http://"+m.Addr()+path, "workers.serving.svc:8080"); code != http.StatusOK {
				t.Errorf("GET %s by name: %d, want 200", path, code)
			}
		}
	})

	t.Run("a rebinding page is refused", func(t *testing.T) {
		const evil = "rebind.evil.example" + ":8080"
		for _, path := range []string{"/", "/history", "/audit", "/static/live.js"} {
			if code := getWithHost(t, "http://"+m.Addr()+path, evil); code != http.StatusMisdirectedRequest {
				t.Errorf("GET %s naming %s: %d, want 421", path, evil, code)
			}
		}
		// A page may POST Connect (JSON or binary) and gRPC-Web; over
		// cleartext it speaks HTTP/1.1 only, where even a gRPC content
		// type stays behind the check.
		hc := &http.Client{Transport: hostRewriter{evil, http.DefaultTransport}}
		for _, opt := range []connect.ClientOption{connect.WithProtoJSON(), connect.WithGRPCWeb(), connect.WithGRPC()} {
			admin := loadreporterv1connect.NewAdminServiceClient(hc, "http://"+m.Addr(), opt)
			_, err := admin.SetTopology(t.Context(), connect.NewRequest(&loadreporterv1.SetTopologyRequest{DpSize: 3}))
			if !misdirected(err) {
				t.Errorf("AdminService from a rebinding page: %v, want HTTP 421", err)
			}
		}
		watch := loadreporterv1connect.NewWatchServiceClient(hc, "http://"+m.Addr())
		st, err := watch.Watch(t.Context(), connect.NewRequest(&loadreporterv1.WatchRequest{}))
		if err == nil {
			if st.Receive() {
				t.Error("Watch from a rebinding page received a report")
			}
			err = st.Err()
			_ = st.Close()
		}
		if !misdirected(err) {
			t.Errorf("Watch from a rebinding page: %v, want HTTP 421", err)
		}
	})
}

// TestUnknownGRPCMethodIsUnimplemented: a call to a method the port does
// not serve gets the status UNIMPLEMENTED in the caller's protocol, not a
// plain-text 404.
func TestUnknownGRPCMethodIsUnimplemented(t *testing.T) {
	t.Parallel()
	m := startMain(t, testConfig(), &countingEngine{ranks: 2})
	cc := dialByName(t, "passthrough:///"+m.Addr(), m.Addr())
	var out healthpb.HealthCheckResponse
	err := cc.Invoke(testCtx(t, 5e9), "/sglang.grpc.scheduler.SglangScheduler/Generate", &healthpb.HealthCheckRequest{}, &out)
	if status.Code(err) != codes.Unimplemented || !strings.Contains(status.Convert(err).Message(), "SglangScheduler/Generate") {
		t.Fatalf("grpc-go: %v, want Unimplemented naming the method", err)
	}
	for _, opt := range []connect.ClientOption{connect.WithGRPC(), connect.WithGRPCWeb(), connect.WithProtoJSON()} {
		c := connect.NewClient[healthpb.HealthCheckRequest, healthpb.HealthCheckResponse](h2cClient(t),
			"http://"+m.Addr()+"/no.such.Service/Method", opt)
		_, err := c.CallUnary(t.Context(), connect.NewRequest(&healthpb.HealthCheckRequest{}))
		if connect.CodeOf(err) != connect.CodeUnimplemented {
			t.Errorf("%T: %v, want unimplemented", opt, err)
		}
	}
	// The raw answer a gRPC peer reads: a gRPC content type and a status.
	req, _ := http.NewRequest(http.MethodPost, "http://"+m.Addr()+"/no.such.Service/Method", strings.NewReader("\x00\x00\x00\x00\x00"))
	req.Header.Set("Content-Type", "application/grpc")
	req.Header.Set("TE", "trailers")
	resp, err := h2cClient(t).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body) // trailers follow the body
	resp.Body.Close()
	gs := resp.Header.Get("Grpc-Status") + resp.Trailer.Get("Grpc-Status")
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/grpc") || gs != "12" {
		t.Fatalf("raw gRPC: %d %q grpc-status %q, want 200 application/grpc 12", resp.StatusCode, resp.Header.Get("Content-Type"), gs)
	}
}

// getWithHost GETs url naming host in Host and returns the status code.
func getWithHost(t *testing.T, url, host string) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = host
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// misdirected reports whether err is the Host check's HTTP 421.
func misdirected(err error) bool {
	return err != nil && strings.Contains(err.Error(), "421")
}

// hostRewriter sends every request naming host, as a browser on a rebound
// name does.
type hostRewriter struct {
	host string
	next http.RoundTripper
}

func (h hostRewriter) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Host = h.host
	return h.next.RoundTrip(r)
}

// TestRoutersWithoutCredentialsUnderOperatorsScope: as the manifests run
// it (--auth-token with --auth-scope operators), a router that sends no
// credentials, dialing by name, gets its reports and health checks, a
// poller its loads, while the pages and AdminService still want the token.
func TestRoutersWithoutCredentialsUnderOperatorsScope(t *testing.T) {
	t.Parallel()
	c := testConfig()
	c.Security.AuthToken, c.Security.AuthScope = "s3cret-token-for-operators", "operators"
	m := startMain(t, c, &countingEngine{ranks: 2})
	ctx := testCtx(t, 10e9)
	cc := dialByName(t, "passthrough:///workers.serving.svc"+m.Addr()[strings.LastIndex(m.Addr(), ":"):], m.Addr())
	st, err := cc.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true, ClientStreams: true},
		loadmonitorv1connect.LoadMonitorServiceMonitorProcedure)
	if err != nil {
		t.Fatal(err)
	}
	r := grpcRouter{st}
	if err := r.Send(registerFrame("no-credentials", 100, 5000)); err != nil {
		t.Fatal(err)
	}
	if recvFrame(t, r).GetRegistered() == nil || recvReport(t, r).GetStatus() != pb.ReportStatus_REPORT_STATUS_HEALTHY {
		t.Fatal("a router without credentials got no report")
	}
	if hc, err := healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{}); err != nil || hc.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health without credentials: %v %v", hc, err)
	}
	smgPoll(t, "http://"+m.Addr()+"/v1/loads?include=core")
	for _, path := range []string{"/", "/history"} {
		if code := getWithHost(t, "http://"+m.Addr()+path, m.Addr()); code != http.StatusUnauthorized {
			t.Errorf("GET %s without the token: %d, want 401", path, code)
		}
	}
	admin := loadreporterv1connect.NewAdminServiceClient(http.DefaultClient, "http://"+m.Addr(), connect.WithProtoJSON())
	if _, err := admin.SetTopology(ctx, connect.NewRequest(&loadreporterv1.SetTopologyRequest{DpSize: 3})); connect.CodeOf(err) != connect.CodeUnauthenticated {
		t.Errorf("AdminService without the token: %v, want unauthenticated", err)
	}
}

// TestUnknownMethodsOfServedServicesAreUnimplemented: a method a served
// service does not declare (a newer client's Health/List, a typo) is
// UNIMPLEMENTED too, and a path under Monitor's service is not Monitor.
func TestUnknownMethodsOfServedServicesAreUnimplemented(t *testing.T) {
	t.Parallel()
	m := startMain(t, testConfig(), &countingEngine{ranks: 2})
	cc := dialByName(t, "passthrough:///"+m.Addr(), m.Addr())
	for _, method := range []string{"/loadreporter.v1.AdminService/Nope", "/loadreporter.v1.HistoryService/Nope",
		"/grpc.health.v1.Health/Nope", "/sglang.router.loadmonitor.v1.LoadMonitorService/Nope"} {
		var out healthpb.HealthCheckResponse
		err := cc.Invoke(testCtx(t, 5e9), method, &healthpb.HealthCheckRequest{}, &out)
		if status.Code(err) != codes.Unimplemented || !strings.Contains(status.Convert(err).Message(), "is not served here") {
			t.Errorf("%s: %v, want Unimplemented", method, err)
		}
	}
	var hc healthpb.HealthCheckResponse
	if err := cc.Invoke(testCtx(t, 5e9), "/grpc.health.v1.Health/Check", &healthpb.HealthCheckRequest{}, &hc); err != nil {
		t.Fatalf("a declared method: %v", err)
	}
}
