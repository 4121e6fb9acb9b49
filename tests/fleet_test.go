package tests

import (
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	pb "github.com/loadreporter/loadreporter/gen/sglang/router/loadmonitor/v1"
	"github.com/loadreporter/loadreporter/gen/sglang/router/loadmonitor/v1/loadmonitorv1connect"
)

// TestFleetSharesPulls: 100 routers with a 200 ms interval connect at random
// moments over two seconds and run two more. On the aligned grid the engine
// sees about one pull per 200 ms in steady state, not one per router, and
// every router still gets a report per interval. It runs alone (no
// t.Parallel): it counts pulls and reports per interval of the wall clock.
func TestFleetSharesPulls(t *testing.T) {
	if testing.Short() {
		t.Skip("runs for 4 s")
	}
	engine := &countingEngine{ranks: 8}
	m := startMain(t, testConfig(), engine)
	cc, err := grpc.NewClient(m.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	const routers, join, steady = 100, 2 * time.Second, 2 * time.Second
	start := time.Now()
	steadyFrom := start.Add(join + 300*time.Millisecond) // the last joiner's first grid point has passed
	steadyTo := steadyFrom.Add(steady)
	var pullsAtSteady atomic.Int64
	var wg sync.WaitGroup
	inSteady := make([]int, routers)
	for i := range routers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			time.Sleep(time.Duration(rand.Int64N(int64(join)))) // connect at a random moment
			st, err := cc.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true, ClientStreams: true},
				loadmonitorv1connect.LoadMonitorServiceMonitorProcedure)
			if err != nil {
				t.Error(err)
				return
			}
			r := grpcRouter{st}
			if err := r.Send(registerFrame("fleet-"+string(rune('A'+i/26))+string(rune('a'+i%26)), 200, 30000)); err != nil {
				t.Error(err)
				return
			}
			for {
				f, err := r.Recv()
				if err != nil {
					t.Errorf("router %d: %v", i, err)
					return
				}
				if f.GetReport() == nil {
					continue
				}
				if st := f.GetReport().GetStatus(); st != pb.ReportStatus_REPORT_STATUS_HEALTHY {
					t.Errorf("router %d: report status %v (%s)", i, st, f.GetReport().GetLastError())
					return
				}
				now := time.Now()
				if now.After(steadyTo) {
					_ = r.Send(stopFrame)
					return
				}
				if now.After(steadyFrom) {
					inSteady[i]++
				}
			}
		}()
	}
	time.Sleep(time.Until(steadyFrom))
	pullsAtSteady.Store(engine.pulls.Load())
	time.Sleep(time.Until(steadyTo))
	steadyPulls := engine.pulls.Load() - pullsAtSteady.Load()
	wg.Wait()

	// 2 s at 200 ms is 10 grid points; one pull per router would be 1 000.
	// The slack absorbs a loaded CI machine skipping a late tick.
	if steadyPulls < 6 || steadyPulls > 14 {
		t.Errorf("engine pulls in 2 s of steady state = %d, want about 10 (one per 200 ms, shared by 100 routers)", steadyPulls)
	}
	total := engine.pulls.Load()
	t.Logf("pulls: %d in steady state, %d in all (first reports are due at once, one per joining router at most)", steadyPulls, total)
	if total > routers+25 {
		t.Errorf("total pulls %d exceed one per joining router plus the grid", total)
	}
	for i, n := range inSteady {
		if n < 6 { // 10 intervals; allow for window edges and a skipped late tick
			t.Errorf("router %d got %d reports in 2 s at 200 ms, want about 10", i, n)
		}
	}
}
