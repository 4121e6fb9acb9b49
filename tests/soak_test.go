package tests

import (
	"context"
	"flag"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	pb "github.com/loadreporter/loadreporter/gen/sglang/router/loadmonitor/v1"
	"github.com/loadreporter/loadreporter/gen/sglang/router/loadmonitor/v1/loadmonitorv1connect"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
)

var soakFor = flag.Duration("soak", 45*time.Second, "how long TestSoak runs (make soak runs it for 3m)")

// TestSoak runs the service for -soak under churning routers, streams that
// never register and a flooding client, all on loopback, then checks that
// goroutines and heap come back to their baseline and that a well-behaved
// router's reports kept arriving regularly (no lease lost, no gap of ten
// intervals). It logs its figures (go test -v, or make soak). It runs
// alone (no t.Parallel): it counts the whole process's goroutines and heap,
// and times the steady router's gaps.
func TestSoak(t *testing.T) {
	if testing.Short() {
		t.Skip("soak test: skipped with -short")
	}
	c := testConfig()
	c.Streams.Monitor.FirstFrameTimeout = 500 * time.Millisecond
	m := startMain(t, c, nil)
	goroutines0, heap0 := settle()

	ctx, cancel := context.WithTimeout(context.Background(), *soakFor)
	defer cancel()
	var wg sync.WaitGroup
	var churned, stuck, floods atomic.Int64
	gaps := make(chan []time.Duration, 1)
	wg.Add(4)
	go func() { defer wg.Done(); gaps <- steadyRouter(t, ctx, m.Addr()) }()
	// The hostile and churning clients share connections, as a fleet's
	// routers multiplex theirs; they are closed before the goroutines are
	// counted again.
	conns := make([]*grpc.ClientConn, 3)
	for i := range conns {
		var err error
		if conns[i], err = grpc.NewClient(m.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials())); err != nil {
			t.Fatal(err)
		}
	}
	go func() {
		defer wg.Done()
		soakLoop(ctx, 50*time.Millisecond, func() { churnRouter(ctx, conns[0]); churned.Add(1) })
	}()
	go func() {
		defer wg.Done()
		soakLoop(ctx, 200*time.Millisecond, func() { stuckStream(ctx, conns[1]); stuck.Add(1) })
	}()
	go func() {
		defer wg.Done()
		soakLoop(ctx, time.Second, func() { floodRouter(ctx, conns[2]); floods.Add(1) })
	}()
	wg.Wait()
	for _, cc := range conns {
		_ = cc.Close()
	}

	g := <-gaps
	goroutines1, heap1 := settle()
	slices.Sort(g)
	t.Logf("soak %s: %d churned routers, %d stuck streams, %d floods; steady router: %d reports, gap p50 %s p99 %s max %s; goroutines %d → %d, heap %.1f → %.1f MiB",
		*soakFor, churned.Load(), stuck.Load(), floods.Load(), len(g)+1, g[len(g)/2], g[len(g)*99/100], g[len(g)-1],
		goroutines0, goroutines1, float64(heap0)/(1<<20), float64(heap1)/(1<<20))
	// A stall (a flood holding the loop, a stuck stream holding a fire)
	// shows as a gap of many intervals; a busy CI machine can stretch one
	// gap to a few intervals, which the logged figures show.
	if max := g[len(g)-1]; max > time.Second {
		t.Errorf("the steady router waited %s for a report at 100 ms", max)
	}
	if goroutines1 > goroutines0+20 {
		t.Errorf("goroutines %d after the soak, %d before", goroutines1, goroutines0)
	}
	if heap1 > heap0+32<<20 {
		t.Errorf("heap %.1f MiB after the soak, %.1f before", float64(heap1)/(1<<20), float64(heap0)/(1<<20))
	}
}

// settle lets finished streams wind down, then reads goroutines and heap.
func settle() (int, uint64) {
	var ms runtime.MemStats
	n := runtime.NumGoroutine()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		runtime.GC()
		if m := runtime.NumGoroutine(); m >= n {
			break
		}
		n = runtime.NumGoroutine()
	}
	runtime.GC()
	runtime.ReadMemStats(&ms)
	return runtime.NumGoroutine(), ms.HeapInuse
}

func soakLoop(ctx context.Context, every time.Duration, f func()) {
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			f()
		}
	}
}

// steadyRouter registers at 100 ms, renews its lease, and returns the gaps
// between its reports until ctx ends.
func steadyRouter(t *testing.T, ctx context.Context, addr string) []time.Duration {
	r := openGRPC(t, ctx, addr)
	if err := r.Send(registerFrame("steady", 100, 3000)); err != nil {
		t.Error(err)
		return []time.Duration{0}
	}
	var gaps []time.Duration
	var last time.Time
	ka := &pb.RouterFrame{Payload: &pb.RouterFrame_KeepAlive{KeepAlive: &pb.KeepAlive{}}}
	for {
		f, err := r.Recv()
		if err != nil || f.GetError() != nil {
			// grpc-go ends the stream at its context's deadline by a timer of
			// its own, a moment before ctx.Err() is set.
			if ended := status.Code(err); ctx.Err() == nil && ended != codes.DeadlineExceeded && ended != codes.Canceled {
				t.Errorf("the steady router's stream ended: %v %v", err, f.GetError())
			}
			return append(gaps, 0)
		}
		if f.GetReport() == nil {
			continue
		}
		if now := time.Now(); !last.IsZero() {
			gaps = append(gaps, now.Sub(last))
		}
		last = time.Now()
		if len(gaps)%10 == 0 {
			_ = r.Send(ka)
		}
	}
}

// churnRouter registers, takes two reports and leaves, half the time with
// stop and half by dropping the stream.
func churnRouter(ctx context.Context, cc *grpc.ClientConn) {
	sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	r := openSoakStream(sctx, cc)
	if r == nil {
		return
	}
	_ = r.Send(registerFrame(fmt.Sprintf("churn-%d", time.Now().UnixNano()%7), 20, 2000))
	for reports := 0; reports < 2; {
		f, err := r.Recv()
		if err != nil || f.GetError() != nil {
			return
		}
		if f.GetReport() != nil {
			reports++
		}
	}
	if time.Now().UnixNano()%2 == 0 {
		_ = r.Send(stopFrame)
	}
}

// stuckStream opens a stream and never registers; the server ends it after
// --first-frame-timeout.
func stuckStream(ctx context.Context, cc *grpc.ClientConn) {
	go func() {
		sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		if r := openSoakStream(sctx, cc); r != nil {
			_, _ = r.Recv()
		}
	}()
}

// floodRouter registers and sends keep-alives as fast as it can until the
// server ends the stream.
func floodRouter(ctx context.Context, cc *grpc.ClientConn) {
	sctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	r := openSoakStream(sctx, cc)
	if r == nil {
		return
	}
	_ = r.Send(registerFrame("flooder", 1000, 5000))
	ka := &pb.RouterFrame{Payload: &pb.RouterFrame_KeepAlive{KeepAlive: &pb.KeepAlive{}}}
	go func() {
		for sctx.Err() == nil && r.Send(ka) == nil {
		}
	}()
	for {
		if f, err := r.Recv(); err != nil || f.GetError() != nil {
			return
		}
	}
}

func openSoakStream(ctx context.Context, cc *grpc.ClientConn) router {
	st, err := cc.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true, ClientStreams: true},
		loadmonitorv1connect.LoadMonitorServiceMonitorProcedure)
	if err != nil {
		return nil
	}
	return grpcRouter{st}
}
