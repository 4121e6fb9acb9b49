package orca

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"net/http"
	"testing"
	"time"

	"connectrpc.com/connect"
	v3orcapb "github.com/cncf/xds/go/xds/data/orca/v3"
	v3orcaservicepb "github.com/cncf/xds/go/xds/service/orca/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/loadreporter/loadreporter/adapters/internal/fanout"
	"github.com/loadreporter/loadreporter/domain/session"
)

// dialORCA opens StreamCoreMetrics to addr with a stock grpc-go client and
// the cncf/xds generated stub.
func dialORCA(t testing.TB, ctx context.Context, addr string, interval *durationpb.Duration) grpc.ServerStreamingClient[v3orcapb.OrcaLoadReport] {
	t.Helper()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	st, err := v3orcaservicepb.NewOpenRcaServiceClient(cc).StreamCoreMetrics(ctx,
		&v3orcaservicepb.OrcaLoadReportRequest{ReportInterval: interval})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// recvStatus reads reports until one carries the wanted status metric.
func recvStatus(t *testing.T, st grpc.ServerStreamingClient[v3orcapb.OrcaLoadReport], want float64) *v3orcapb.OrcaLoadReport {
	t.Helper()
	for {
		r, err := st.Recv()
		if err != nil {
			t.Fatalf("waiting for status %v: %v", want, err)
		}
		if r.GetNamedMetrics()["status"] == want {
			return r
		}
	}
}

// TestGRPCClientFollowsTheEngine: a stock grpc-go client on the one port
// receives the fire loop's reports as ORCA, HEALTHY, UNREACHABLE and STALE
// alike, as an ORCA session that ends with the stream.
func TestGRPCClientFollowsTheEngine(t *testing.T) {
	t.Parallel()
	ctx := testContext(t, 10*time.Second)
	eng := &engine{ranks: 2}
	eng.set(modeHealthy, 0.25)
	loop := startLoop(t, eng, session.DefaultLimits())
	svc, err := New(loop, Options{})
	if err != nil {
		t.Fatal(err)
	}
	addr := serveH2C(t, mount(svc))
	sctx, cancel := context.WithCancel(ctx)
	st := dialORCA(t, sctx, addr, durationpb.New(20*time.Millisecond))

	r := recvStatus(t, st, 1)
	t.Logf("HEALTHY: %v", r)
	if r.ApplicationUtilization != 0.25 || r.RpsFractional != 1 || r.NamedMetrics["ranks"] != 2 ||
		r.NamedMetrics["rank.1.token_usage"] != 0.25 || r.NamedMetrics["rank.1.waiting"] != 1 || r.NamedMetrics["running"] != 8 {
		t.Fatalf("HEALTHY report %v", r)
	}
	if n := loop.Count(session.KindORCA); n != 1 {
		t.Fatalf("%d ORCA sessions, want 1", n)
	}

	eng.set(modeFailing, 0)
	r = recvStatus(t, st, 3)
	t.Logf("UNREACHABLE: %v", r)
	if r.ApplicationUtilization != 1 || r.Eps != 1 || r.NamedMetrics["ranks"] != 0 || len(r.Utilization) != 0 {
		t.Fatalf("UNREACHABLE report %v", r)
	}

	eng.set(modeStale, 0.5)
	r = recvStatus(t, st, 2)
	t.Logf("STALE: %v", r)
	if r.ApplicationUtilization != 1 || r.Utilization["kv_cache"] != 0.5 || r.NamedMetrics["snapshot_age_ms"] < 10_000 {
		t.Fatalf("STALE report %v", r)
	}

	eng.set(modeHealthy, 0.625)
	if r = recvStatus(t, st, 1); r.ApplicationUtilization != 0.625 {
		t.Fatalf("HEALTHY again: %v", r)
	}
	cancel()
	waitFor(t, ctx, "the ORCA session to end with its stream", func() bool { return loop.Count(session.KindORCA) == 0 })
}

// TestMaxSessionsAndShutdown: ORCA streams count against max-sessions
// (RESOURCE_EXHAUSTED beyond it, as with any session) and end with
// UNAVAILABLE when the reporter shuts down; a malformed interval is
// INVALID_ARGUMENT.
func TestMaxSessionsAndShutdown(t *testing.T) {
	t.Parallel()
	ctx := testContext(t, 10*time.Second)
	limits := session.DefaultLimits()
	limits.MaxSessions = 1
	loop := startLoop(t, &engine{ranks: 1}, limits)
	svc, err := New(loop, Options{})
	if err != nil {
		t.Fatal(err)
	}
	addr := serveH2C(t, mount(svc))

	bad := dialORCA(t, ctx, addr, &durationpb.Duration{Seconds: 1, Nanos: -5})
	if _, err := bad.Recv(); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("malformed interval: %v, want InvalidArgument", err)
	}
	first := dialORCA(t, ctx, addr, nil)
	if _, err := first.Recv(); err != nil {
		t.Fatal(err)
	}
	second := dialORCA(t, ctx, addr, durationpb.New(time.Second))
	if _, err := second.Recv(); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("second stream: %v, want ResourceExhausted", err)
	}
	loop.Shutdown()
	for {
		_, err := first.Recv()
		if err == nil {
			continue
		}
		if status.Code(err) != codes.Unavailable {
			t.Fatalf("after shutdown: %v, want Unavailable", err)
		}
		break
	}
}

// TestConnectJSONClient: the same handler answers Connect clients, here
// with JSON, through the encode-once codec.
func TestConnectJSONClient(t *testing.T) {
	t.Parallel()
	ctx := testContext(t, 10*time.Second)
	addr := serveOneHealthyRank(t)
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	client := connect.NewClient[v3orcaservicepb.OrcaLoadReportRequest, v3orcapb.OrcaLoadReport](
		&http.Client{Transport: tr}, "http://"+addr+Procedure, connect.WithProtoJSON())
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	st, err := client.CallServerStream(sctx, connect.NewRequest(&v3orcaservicepb.OrcaLoadReportRequest{
		ReportInterval: durationpb.New(10 * time.Millisecond)}))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for range 3 {
		if !st.Receive() {
			t.Fatalf("stream ended: %v", st.Err())
		}
		if r := st.Msg(); r.ApplicationUtilization != 0.5 || r.RpsFractional != 4 || r.NamedMetrics["status"] != 1 {
			t.Fatalf("report %v", r)
		}
	}
}

// TestSmallReportsGoUncompressed: a client that accepts gzip still gets an
// OrcaLoadReport under fanout.MinBytes (one rank's) uncompressed (the
// envelope's flag says so): gzip per stream would cost more than the rest
// of its delivery. Larger ones are compressed once per fire (adapters/internal/fanout).
func TestSmallReportsGoUncompressed(t *testing.T) {
	t.Parallel()
	ctx := testContext(t, 10*time.Second)
	addr := serveOneHealthyRank(t)
	msg, err := proto.Marshal(&v3orcaservicepb.OrcaLoadReportRequest{ReportInterval: durationpb.New(10 * time.Millisecond)})
	if err != nil {
		t.Fatal(err)
	}
	body := append([]byte{0, 0, 0, 0, byte(len(msg))}, msg...)
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+Procedure, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/connect+proto")
	req.Header.Set("Connect-Accept-Encoding", "gzip")
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if enc := resp.Header.Get("Connect-Content-Encoding"); enc != "gzip" {
		t.Fatalf("Connect-Content-Encoding %q: the server did not take up gzip, so the test proves nothing", enc)
	}
	prefix := make([]byte, 5)
	if _, err := io.ReadFull(resp.Body, prefix); err != nil {
		t.Fatal(err)
	}
	size := binary.BigEndian.Uint32(prefix[1:])
	if prefix[0]&1 != 0 {
		t.Errorf("a report of %d bytes went out compressed", size)
	}
	if size >= fanout.MinBytes {
		t.Errorf("the report has %d bytes: not a small one, the test proves nothing", size)
	}
}

// serveOneHealthyRank serves ORCA over h2c for an engine of one healthy
// rank at utilization 0.5, with a nominal 4 requests/s, and returns its
// address.
func serveOneHealthyRank(t *testing.T) string {
	t.Helper()
	eng := &engine{ranks: 1}
	eng.set(modeHealthy, 0.5)
	svc, err := New(startLoop(t, eng, session.DefaultLimits()), Options{NominalRPS: 4})
	if err != nil {
		t.Fatal(err)
	}
	return serveH2C(t, mount(svc))
}
