package cli

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/loadreporter/loadreporter/cmd/loadreporter/internal/routerflags"
	pb "github.com/loadreporter/loadreporter/gen/sglang/router/loadmonitor/v1"
	"github.com/loadreporter/loadreporter/gen/sglang/router/loadmonitor/v1/loadmonitorv1connect"
	"github.com/loadreporter/loadreporter/internal/sharedtest"
)

// grantingWorker acknowledges every registration with a lease of its own
// choosing (as a worker clamping the lease does) and then sends reports
// until the router stops.
type grantingWorker struct {
	leaseMs, renewAfterMs int64
}

func (g *grantingWorker) Monitor(ctx context.Context, st *connect.BidiStream[pb.RouterFrame, pb.WorkerFrame]) error {
	if _, err := st.Receive(); err != nil { // register
		return err
	}
	ack := &pb.RegisterResponse{LeaseTtlMs: g.leaseMs, RenewAfterMs: g.renewAfterMs}
	if err := st.Send(&pb.WorkerFrame{Payload: &pb.WorkerFrame_Registered{Registered: ack}}); err != nil {
		return err
	}
	stopped := make(chan struct{})
	go func() { // the router's frames: stop (or its going away) ends the stream
		defer close(stopped)
		for {
			f, err := st.Receive()
			if err != nil || f.GetStop() != nil {
				return
			}
		}
	}()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for seq := uint64(1); ; seq++ {
		r := &pb.LoadReport{SourceInstanceId: "fake", SequenceId: seq, ReportTimeUnixMs: time.Now().UnixMilli(),
			Status: pb.ReportStatus_REPORT_STATUS_HEALTHY,
			Ranks:  []*pb.RankLoad{{DpRank: 0, SnapshotTimeUnixMs: time.Now().UnixMilli(), MaxRunningRequests: 8}}}
		if err := st.Send(&pb.WorkerFrame{Payload: &pb.WorkerFrame_Report{Report: r}}); err != nil {
			return err
		}
		select {
		case <-tick.C:
		case <-stopped:
			return nil
		case <-ctx.Done():
			return nil
		}
	}
}

// watch prints what the worker granted (its lease, not the one asked,
// and its renew_after_ms), as it did before it went through package
// client.
func TestWatchPrintsTheGrant(t *testing.T) {
	t.Parallel()
	g := &grantingWorker{leaseMs: 3000, renewAfterMs: 1000}
	addr := serveWorker(t, g)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c := WatchConfig{Target: addr, Count: 2,
		Router: routerflags.Router{Interval: 250 * time.Millisecond, Lease: 20 * time.Second, RouterID: "watch-test"}}
	var out bytes.Buffer
	if err := Watch(ctx, c, &out); err != nil {
		t.Fatal(err)
	}
	want := `registered as "watch-test" with ` + c.Target + ": interval 250 ms, lease 3000 ms granted (20000 ms asked), renew after 1000 ms\n"
	if first, _, _ := strings.Cut(out.String(), "#"); first != want {
		t.Fatalf("watch printed\n%s\nwant it to open with\n%s", out.String(), want)
	}
	if n := strings.Count(out.String(), " HEALTHY 1 ranks"); n != 2 {
		t.Fatalf("%d reports printed, want 2:\n%s", n, out.String())
	}
}

// serveWorker serves w as a worker's Monitor over h2c on 127.0.0.1 until
// the test ends, and returns its address.
func serveWorker(t *testing.T, w loadmonitorv1connect.LoadMonitorServiceHandler) string {
	t.Helper()
	mux := http.NewServeMux()
	mux.Handle(loadmonitorv1connect.NewLoadMonitorServiceHandler(w))
	return sharedtest.ServeH2C(t, mux)
}
