package tests

import (
	"context"
	"net/http"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/loadreporter/loadreporter/domain/session"
	lrv1 "github.com/loadreporter/loadreporter/gen/loadreporter/v1"
	"github.com/loadreporter/loadreporter/gen/loadreporter/v1/loadreporterv1connect"
	pb "github.com/loadreporter/loadreporter/gen/sglang/router/loadmonitor/v1"
)

// TestWatchForBrowsers: Watch works over plain HTTP/1.1 (as fetch does),
// shares the fire loop with routers, counts against the session limit and
// ends when the browser goes away.
func TestWatchForBrowsers(t *testing.T) {
	engine := &countingEngine{ranks: 4}
	c := testConfig()
	c.Limits.MaxSessions = 2
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
			t.Fatal("a third session was admitted with max-sessions 2")
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
	deadline := time.Now().Add(5 * time.Second)
	for m.FireLoop().Count(session.KindWatch) != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the watch session outlived its browser")
		}
		time.Sleep(10 * time.Millisecond)
	}
	_ = router.Send(stopFrame)
}
