package workertest

import (
	"context"
	"net/http"
	"testing"
	"time"

	"connectrpc.com/connect"

	pb "github.com/loadreporter/loadreporter/gen/sglang/router/loadmonitor/v1"
	"github.com/loadreporter/loadreporter/gen/sglang/router/loadmonitor/v1/loadmonitorv1connect"
	"github.com/loadreporter/loadreporter/internal/sharedtest"
)

// Reporting is a Monitor handler that acknowledges every registration
// with Grant and then sends Report(seq) every Every, from seq 1, until the
// router sends stop or goes away.
type Reporting struct {
	Grant  *pb.RegisterResponse
	Every  time.Duration
	Report func(seq uint64) *pb.LoadReport
}

// Monitor serves one router's stream.
func (w *Reporting) Monitor(ctx context.Context, st *connect.BidiStream[pb.RouterFrame, pb.WorkerFrame]) error {
	if _, err := st.Receive(); err != nil { // register
		return err
	}
	if err := st.Send(&pb.WorkerFrame{Payload: &pb.WorkerFrame_Registered{Registered: w.Grant}}); err != nil {
		return err
	}
	stopped := make(chan struct{})
	go func() { // the router's frames: stop (or its going away) ends the stream
		defer close(stopped)
		for {
			if f, err := st.Receive(); err != nil || f.GetStop() != nil {
				return
			}
		}
	}()
	tick := time.NewTicker(w.Every)
	defer tick.Stop()
	for seq := uint64(1); ; seq++ {
		if err := st.Send(&pb.WorkerFrame{Payload: &pb.WorkerFrame_Report{Report: w.Report(seq)}}); err != nil {
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

// Serve serves w, a worker's Monitor with opts, over h2c on 127.0.0.1
// until the test ends, and returns its address.
func Serve(t testing.TB, w loadmonitorv1connect.LoadMonitorServiceHandler, opts ...connect.HandlerOption) string {
	t.Helper()
	mux := http.NewServeMux()
	mux.Handle(loadmonitorv1connect.NewLoadMonitorServiceHandler(w, opts...))
	return sharedtest.ServeH2C(t, mux)
}
