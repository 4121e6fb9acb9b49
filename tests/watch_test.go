package tests

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	v3orcaservicepb "github.com/cncf/xds/go/xds/service/orca/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/loadreporter/loadreporter/domain/session"
	lrv1 "github.com/loadreporter/loadreporter/gen/loadreporter/v1"
	"github.com/loadreporter/loadreporter/gen/loadreporter/v1/loadreporterv1connect"
	pb "github.com/loadreporter/loadreporter/gen/sglang/router/loadmonitor/v1"
)

// TestWatchForBrowsers: Watch works over plain HTTP/1.1 (as fetch does),
// shares the fire loop with routers, counts against a session limit of its
// own (never the routers') and ends when the browser goes away.
func TestWatchForBrowsers(t *testing.T) {
	t.Parallel()
	engine := &countingEngine{ranks: 4}
	c := testConfig()
	c.Sessions.MaxSessions, c.Sessions.MaxWatchSessions = 1, 1
	m := startMain(t, c, engine)
	http1 := &http.Client{Transport: &http.Transport{}}
	t.Cleanup(http1.CloseIdleConnections)
	watch := loadreporterv1connect.NewWatchServiceClient(http1, "http://"+m.Addr())

	router := openGRPC(t, testCtx(t, 20*time.Second), m.Addr())
	_ = router.Send(registerFrame("beside-the-browser", 100, 10000))
	recvFrame(t, router)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := watch.Watch(ctx, connect.NewRequest(&lrv1.WatchRequest{ReportIntervalMs: 100}))
	if err != nil {
		t.Fatal(err)
	}
	var last uint64
	for range 3 {
		if !st.Receive() {
			t.Fatalf("watch ended: %v", st.Err())
		}
		msg := st.Msg()
		if msg.GetReport().GetStatus() != pb.ReportStatus_REPORT_STATUS_HEALTHY || len(msg.GetReport().GetRanks()) != 4 {
			t.Fatalf("report %v", msg.GetReport())
		}
		if msg.GetRoutersConnected() != 1 {
			t.Fatalf("routers connected %d, want 1", msg.GetRoutersConnected())
		}
		last = msg.GetReport().GetSequenceId()
	}
	// The router and the browser share pulls on the 100 ms grid.
	for rep := recvReport(t, router); rep.GetSequenceId() < last; rep = recvReport(t, router) {
	}
	if pulls := engine.pulls.Load(); uint64(pulls) != last && uint64(pulls) != last+1 {
		t.Fatalf("%d pulls for %d reports: the watch did not share the router's pulls", pulls, last)
	}

	t.Run("counts against the session limit", func(t *testing.T) {
		second, err := watch.Watch(ctx, connect.NewRequest(&lrv1.WatchRequest{}))
		if err == nil && second.Receive() {
			t.Fatal("a second browser was admitted with max-watch-sessions 1")
		}
		if err == nil {
			err = second.Err()
		}
		if connect.CodeOf(err) != connect.CodeResourceExhausted {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("bad interval names the field", func(t *testing.T) {
		bad, err := watch.Watch(ctx, connect.NewRequest(&lrv1.WatchRequest{ReportIntervalMs: 1}))
		if err == nil && !bad.Receive() {
			err = bad.Err()
		}
		if connect.CodeOf(err) != connect.CodeInvalidArgument {
			t.Fatalf("err = %v", err)
		}
	})

	cancel() // the browser goes away
	_ = st.Close()
	eventually(t, testCtx(t, 5*time.Second), "the watch session to end with its browser", func() bool {
		return m.FireLoop().Count(session.KindWatch) == 0
	})
	_ = router.Send(stopFrame)
}

// TestAStreamThatStopsReadingGivesBackItsSlot: a browser's Watch and an
// ORCA stream hold no lease, and a router whose keep_alives arrive while
// its reports do not get through (only the way back is lost) keeps its
// lease; each would keep its slot (--max-watch-sessions, --max-sessions)
// for ever. Once a write has been blocked for --stalled-write-timeout the
// stream ends, the slot is free again and the metric counts it. Each
// client grants a 64 KiB window, which 64 ranks every 10 ms fill within a
// few seconds.
func TestAStreamThatStopsReadingGivesBackItsSlot(t *testing.T) {
	t.Parallel()
	var routers atomic.Int32
	for _, tc := range []struct {
		kind session.Kind
		open func(t *testing.T, ctx context.Context, addr string)
	}{
		{session.KindWatch, func(t *testing.T, ctx context.Context, addr string) {
			var p http.Protocols
			p.SetUnencryptedHTTP2(true)
			tr := &http.Transport{Protocols: &p, HTTP2: &http.HTTP2Config{
				MaxReceiveBufferPerStream: 64 << 10, MaxReceiveBufferPerConnection: 64 << 10,
			}}
			t.Cleanup(tr.CloseIdleConnections)
			watch := loadreporterv1connect.NewWatchServiceClient(&http.Client{Transport: tr}, "http://"+addr)
			st, err := watch.Watch(ctx, connect.NewRequest(&lrv1.WatchRequest{ReportIntervalMs: 10}))
			if err != nil || !st.Receive() {
				t.Fatalf("watch: %v %v", err, st.Err())
			}
		}},
		{session.KindMonitor, func(t *testing.T, ctx context.Context, addr string) {
			r := openGRPCWith(t, ctx, addr, grpc.WithInitialWindowSize(64<<10), grpc.WithInitialConnWindowSize(64<<10))
			_ = r.Send(registerFrame(fmt.Sprintf("one-way-%d", routers.Add(1)), 10, 1000))
			if f := recvFrame(t, r); f.GetRegistered() == nil {
				t.Fatalf("not registered: %v", f)
			}
			go func() { // keep_alives go on arriving; nothing more is read
				tick := time.NewTicker(200 * time.Millisecond)
				defer tick.Stop()
				for r.Send(keepAliveFrame) == nil {
					select {
					case <-ctx.Done():
						return
					case <-tick.C:
					}
				}
			}()
		}},
		{session.KindORCA, func(t *testing.T, ctx context.Context, addr string) {
			cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
				grpc.WithInitialWindowSize(64<<10), grpc.WithInitialConnWindowSize(64<<10))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = cc.Close() })
			st, err := v3orcaservicepb.NewOpenRcaServiceClient(cc).StreamCoreMetrics(ctx,
				&v3orcaservicepb.OrcaLoadReportRequest{ReportInterval: durationpb.New(10 * time.Millisecond)})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := st.Recv(); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.kind.String(), func(t *testing.T) {
			c := testConfig()
			c.Sessions.MaxSessions, c.Sessions.MaxWatchSessions = 1, 1
			c.Streams.Port.StalledWriteTimeout = 300 * time.Millisecond
			m := startMain(t, c, &countingEngine{ranks: 64})
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			tc.open(t, ctx, m.Addr()) // and reads nothing more
			eventually(t, testCtx(t, 10*time.Second), "a stream that stopped reading to give back its session", func() bool {
				return m.FireLoop().Count(tc.kind) == 0
			})
			if _, metrics := httpGet(t, "http://"+m.Addr()+"/metrics"); !strings.Contains(metrics, "\nloadreporter_stalled_streams_ended_total 1\n") {
				t.Fatal("/metrics does not count the stalled stream (want loadreporter_stalled_streams_ended_total 1)")
			}
			tc.open(t, ctx, m.Addr()) // admitted in the freed slot (and it too reads no more)
		})
	}
}
