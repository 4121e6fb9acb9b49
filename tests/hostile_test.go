package tests

import (
	"bytes"
	"compress/gzip"
	"compress/zlib"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	v3orcaservicepb "github.com/cncf/xds/go/xds/service/orca/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/loadreporter/loadreporter/cmd/loadreporter/app"
	lrv1 "github.com/loadreporter/loadreporter/gen/loadreporter/v1"
	"github.com/loadreporter/loadreporter/gen/loadreporter/v1/loadreporterv1connect"
	pb "github.com/loadreporter/loadreporter/gen/sglang/router/loadmonitor/v1"
)

func setTopology(base, token string, n int32) error {
	admin := loadreporterv1connect.NewAdminServiceClient(http.DefaultClient, base)
	req := connect.NewRequest(&lrv1.SetTopologyRequest{DpSize: n})
	if token != "" {
		req.Header().Set("Authorization", "Bearer "+token)
	}
	_, err := admin.SetTopology(context.Background(), req)
	return err
}

// TestAdminTokenSeparatesRoutersFromOperators: with --admin-token, a
// router's --auth-token cannot change the topology, the admin token can,
// and the admin token opens nothing but AdminService; --max-dp-size bounds
// the topology.
func TestAdminTokenSeparatesRoutersFromOperators(t *testing.T) {
	t.Parallel()
	c := testConfig()
	c.Security.AuthToken, c.Security.AdminToken, c.Source.MaxDPSize = "router-token", "admin-token", 64
	m := startMain(t, c, nil)
	base := "http://" + m.Addr()
	if err := setTopology(base, "router-token", 4); connect.CodeOf(err) != connect.CodePermissionDenied {
		t.Fatalf("a router's token changed the topology: %v", err)
	}
	if err := setTopology(base, "admin-token", 4); err != nil {
		t.Fatalf("the admin token: %v", err)
	}
	if err := setTopology(base, "admin-token", 65); connect.CodeOf(err) != connect.CodeInvalidArgument ||
		!strings.Contains(err.Error(), "--max-dp-size") {
		t.Fatalf("a topology beyond --max-dp-size: %v", err)
	}
	req, _ := http.NewRequest(http.MethodGet, base+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer admin-token")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("the admin token opened /metrics: %d", resp.StatusCode)
	}
}

// TestHostileRoutersAreEndedAndCounted: a stream that never registers ends
// after --first-frame-timeout with status DEADLINE_EXCEEDED, one that
// floods frames after its budget with its StreamError, and /metrics counts
// them.
func TestHostileRoutersAreEndedAndCounted(t *testing.T) {
	t.Parallel()
	c := testConfig()
	c.Streams.Monitor.FirstFrameTimeout = 200 * time.Millisecond
	c.Streams.Monitor.MaxFramesPerSecond, c.Streams.Monitor.FrameBurst = 5, 5
	m := startMain(t, c, nil)
	ctx := testCtx(t, 10*time.Second)

	// A status, no frame: a register that comes late is no refusal.
	silent := openGRPC(t, ctx, m.Addr())
	if f, err := silent.Recv(); status.Code(err) != codes.DeadlineExceeded || !strings.Contains(err.Error(), "no register within") {
		t.Fatalf("a silent stream: %v, %v; want status DEADLINE_EXCEEDED", f, err)
	}

	flood := openGRPC(t, ctx, m.Addr())
	if err := flood.Send(registerFrame("flooder", 1000, 60000)); err != nil {
		t.Fatal(err)
	}
	recvFrame(t, flood) // registered
	ka := &pb.RouterFrame{Payload: &pb.RouterFrame_KeepAlive{KeepAlive: &pb.KeepAlive{}}}
	for range 50 {
		if flood.Send(ka) != nil {
			break
		}
	}
	for {
		f := recvFrame(t, flood)
		if e := f.GetError(); e != nil {
			if e.GetCode() != "RESOURCE_EXHAUSTED" {
				t.Fatalf("a flood: %v", e)
			}
			break
		}
	}
	_, metrics := httpGet(t, "http://"+m.Addr()+"/metrics")
	for _, line := range []string{"loadreporter_monitor_first_frame_timeouts_total 1", "loadreporter_monitor_over_budget_total 1",
		"loadreporter_monitor_pending_streams 0",
		`loadreporter_monitor_stream_errors_total{code="RESOURCE_EXHAUSTED"} 1`} {
		if !strings.Contains(metrics, line+"\n") {
			t.Errorf("/metrics lacks %q", line)
		}
	}
	// The silent stream got no StreamError frame.
	if strings.Contains(metrics, `loadreporter_monitor_stream_errors_total{code="INVALID_FIRST_FRAME"}`) {
		t.Error("/metrics counts an INVALID_FIRST_FRAME frame for the silent stream")
	}
}

// TestShutdownWithAStuckStreamLosesNothing: a stream that opened and never
// registered does not hold the shutdown to its grace, and the history
// flushes everything recorded (Close reports any unflushed report as an
// error): Close returns nil well within the grace.
func TestShutdownWithAStuckStreamLosesNothing(t *testing.T) {
	t.Parallel()
	c := testConfig()
	c.Server.ShutdownGrace = 5 * time.Second
	c.History.Interval = 10 * time.Millisecond
	m, err := app.InitializeMain(c)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Start(); err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t, 10*time.Second)
	stuck := openGRPC(t, ctx, m.Addr())
	_ = stuck
	metrics := "http://" + m.Addr() + "/metrics"
	eventually(t, ctx, "a few history records written and the stream open", func() bool {
		return metricSum(t, metrics, "loadreporter_history_written_total") >= 3 &&
			metricSum(t, metrics, "loadreporter_monitor_pending_streams") == 1
	})
	start := time.Now()
	if err := m.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if took := time.Since(start); took > c.Server.ShutdownGrace/2 {
		t.Fatalf("shutdown took %s with a stuck stream (grace %s)", took, c.Server.ShutdownGrace)
	}
}

// oversizedGRPCBodies are one gRPC message over the 64 KiB bound, plain
// and as gzip and deflate bombs (a few KiB that inflate to 16 MiB).
func oversizedGRPCBodies(t *testing.T) map[string][]byte {
	t.Helper()
	frame := func(flag byte, msg []byte) []byte {
		return append(binary.BigEndian.AppendUint32([]byte{flag}, uint32(len(msg))), msg...)
	}
	// Field 1 (a string in every request below) holding 1 MiB.
	plain := append([]byte{0x0a, 0x80, 0x80, 0x40}, bytes.Repeat([]byte("x"), 1<<20)...)
	inflated := append([]byte{0x0a, 0x80, 0x80, 0x80, 0x08}, make([]byte, 16<<20)...)
	var gz, df bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, _ = zw.Write(inflated)
	_ = zw.Close()
	fw := zlib.NewWriter(&df)
	_, _ = fw.Write(inflated)
	_ = fw.Close()
	return map[string][]byte{"plain": frame(0, plain), "gzip": frame(1, gz.Bytes()), "deflate": frame(1, df.Bytes())}
}

// TestEveryServiceRefusesAnOversizedMessage: the 64 KiB bound on one RPC
// message holds on every service of the port, health and reflection too,
// before the message is buffered or inflated (a gzip bomb to the health
// check took the reporter to 5 GB).
func TestEveryServiceRefusesAnOversizedMessage(t *testing.T) {
	t.Parallel()
	m := startMain(t, testConfig(), &countingEngine{ranks: 2})
	refusesOversizedMessages(t, m.Addr(), []string{
		"/grpc.health.v1.Health/Check",
		"/grpc.health.v1.Health/Watch",
		"/grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
		"/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
		"/loadreporter.v1.AdminService/SetSimMode",
	})
}

// refusesOversizedMessages checks that each gRPC path at addr answers an
// oversized message, plain or gzip, with RESOURCE_EXHAUSTED.
func refusesOversizedMessages(t *testing.T, addr string, paths []string) {
	t.Helper()
	client := h2cClient(t)
	bodies := oversizedGRPCBodies(t)
	for _, path := range paths {
		for kind, body := range bodies {
			// A stream that took the message would run until the deadline.
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+path, bytes.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/grpc")
			req.Header.Set("Grpc-Encoding", "gzip")
			if kind == "deflate" {
				req.Header.Set("Grpc-Encoding", "deflate")
			}
			req.Header.Set("Te", "trailers")
			resp, err := client.Do(req)
			if err != nil {
				t.Fatalf("%s %s: %v", path, kind, err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			code := resp.Trailer.Get("Grpc-Status")
			if code == "" {
				code = resp.Header.Get("Grpc-Status")
			}
			// RESOURCE_EXHAUSTED; a service without deflate refuses it as
			// UNIMPLEMENTED, before inflating anything.
			if code != "8" && !(kind == "deflate" && code == "12") {
				msg := resp.Trailer.Get("Grpc-Message") + resp.Header.Get("Grpc-Message")
				t.Errorf("%s, %s body: grpc-status %q (%.80s), want 8 (RESOURCE_EXHAUSTED)", path, kind, code, msg)
			}
		}
	}
}

// TestATrickledBodyIsCutOff: a request that sends its body a byte at a
// time is cut off after --request-body-timeout (it held a connection and
// a file descriptor as long as it liked), while a browser's Watch over
// HTTP/1.1, whose body is read at once, streams on past it.
func TestATrickledBodyIsCutOff(t *testing.T) {
	t.Parallel()
	c := testConfig()
	c.Streams.Port.RequestBodyTimeout = 300 * time.Millisecond
	m := startMain(t, c, &countingEngine{ranks: 2})

	conn, err := net.Dial("tcp", m.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /loadreporter.v1.AdminService/SetSimMode HTTP/1.1\r\nHost: %s\r\n"+
		"Content-Type: application/json\r\nContent-Length: 60000\r\n\r\n{\"mode\":\"", m.Addr())
	start := time.Now()
	_ = conn.SetReadDeadline(start.Add(5 * time.Second))
	if _, err := io.ReadAll(conn); err != nil {
		t.Fatalf("the trickled request still holds its connection after %s: %v", time.Since(start).Round(time.Millisecond), err)
	}

	// A reflection stream (two-way, over HTTP/2) that never sends a
	// request: its body is bounded too.
	silent, _ := io.Pipe()
	rctx, rcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer rcancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodPost,
		"http://"+m.Addr()+"/grpc.reflection.v1.ServerReflection/ServerReflectionInfo", silent)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/grpc")
	start = time.Now()
	if resp, err := h2cClient(t).Do(req); err == nil { // or the stream's reset
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	if rctx.Err() != nil {
		t.Fatalf("a silent reflection stream still open after %s", time.Since(start).Round(time.Millisecond))
	}

	http1 := &http.Client{Transport: &http.Transport{}}
	t.Cleanup(http1.CloseIdleConnections)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := loadreporterv1connect.NewWatchServiceClient(http1, "http://"+m.Addr()).
		Watch(ctx, connect.NewRequest(&lrv1.WatchRequest{ReportIntervalMs: 100}))
	if err != nil {
		t.Fatal(err)
	}
	for start := time.Now(); time.Since(start) < 1200*time.Millisecond; {
		if !st.Receive() {
			t.Fatalf("the Watch ended %s in: %v", time.Since(start).Round(time.Millisecond), st.Err())
		}
	}
	// A server stream over HTTP/2 (ORCA from grpc-go) streams on too.
	cc, err := grpc.NewClient(m.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	orcaStream, err := v3orcaservicepb.NewOpenRcaServiceClient(cc).StreamCoreMetrics(ctx,
		&v3orcaservicepb.OrcaLoadReportRequest{ReportInterval: durationpb.New(100 * time.Millisecond)})
	if err != nil {
		t.Fatal(err)
	}
	for start := time.Now(); time.Since(start) < 1200*time.Millisecond; {
		if _, err := orcaStream.Recv(); err != nil {
			t.Fatalf("the ORCA stream ended %s in: %v", time.Since(start).Round(time.Millisecond), err)
		}
	}
}
