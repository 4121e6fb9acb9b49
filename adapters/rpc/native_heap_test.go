package rpc

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/loadreporter/loadreporter/domain"
	"github.com/loadreporter/loadreporter/domain/session"
	pb "github.com/loadreporter/loadreporter/gen/sglang/router/loadmonitor/v1"
	"github.com/loadreporter/loadreporter/gen/sglang/router/loadmonitor/v1/loadmonitorv1connect"
)

// heapClientEnv, set, makes the test binary the routers of
// TestNativeMonitorStreamHeap ("addr conns streams"): they live in a
// process of their own, so the server's heap is the server's alone.
const heapClientEnv = "LOADREPORTER_RPC_HEAP_CLIENT"

// maxHeapOverGRPC bounds the live heap one registered native Monitor
// stream holds, between reports, with one report written, over what a
// plain grpc-go server's stream holds measured the same way: what the
// bridge and Monitor keep (about 1.8 KiB on linux/amd64), not grpc-go's
// own, which moves with its version.
const maxHeapOverGRPC = 2300

// TestNativeMonitorStreamHeap: a registered native Monitor stream, between
// reports, holds at most maxHeapOverGRPC bytes of live heap on the server
// over a plain grpc-go server's stream (one serving it as ORCA's service
// does, its handler and a ticker), each measured after a collection over
// 500 streams on 10 connections from another process. It runs alone (no
// t.Parallel): it reads the process's heap; and without the race
// detector, whose allocations are no stream's (make test runs it so).
func TestNativeMonitorStreamHeap(t *testing.T) {
	if testing.Short() {
		t.Skip("opens 1000 streams in a second process")
	}
	if raceEnabled {
		t.Skip("the race detector allocates for what it watches: run without -race")
	}
	const conns, perConn = 10, 50
	ours := streamHeap(t, "ours", conns, perConn, startHeapMonitor)
	plain := streamHeap(t, "plain", conns, perConn, startPlainGRPC)
	t.Logf("live heap a native Monitor stream holds: %d B; a plain grpc-go server's stream: %d B; over it: %d B",
		ours, plain, ours-plain)
	if ours-plain > maxHeapOverGRPC {
		t.Errorf("a native Monitor stream holds %d B of live heap, %d over a plain grpc-go server's %d; want at most %d over",
			ours, ours-plain, plain, maxHeapOverGRPC)
	}
}

// heapServer is a server streamHeap measures: its address, how many
// streams it has registered and still holds, and what to do once every
// stream registered (the first report, for Monitor).
type heapServer struct {
	addr   string
	open   func() int64
	deploy func(t *testing.T, ctx context.Context)
}

// streamHeap serves start's server, opens conns×perConn registered streams
// on it from a child process, and returns the live heap per stream they
// hold, after a collection, over the heap with each connection open and
// idle.
func streamHeap(t *testing.T, name string, conns, perConn int, start func(t *testing.T) heapServer) int64 {
	t.Helper()
	ctx := testContext(t)
	srv := start(t)
	n := conns * perConn
	r := startRouters(t, ctx, srv, conns, perConn)
	defer r.stop()
	r.expect("warm") // each connection open, its first stream ended
	waitFor(t, ctx, "the warm-up streams ended", func() bool { return srv.open() == 0 })
	before := liveHeap()
	if _, err := io.WriteString(r.stdin, "go\n"); err != nil {
		t.Fatal(err)
	}
	r.expect("open")
	waitFor(t, ctx, "every stream registered", func() bool { return srv.open() == int64(n) })
	srv.deploy(t, ctx)
	held := (liveHeap() - before) / int64(n)
	if path := os.Getenv(heapProfileEnv); path != "" {
		writeHeapProfile(t, fmt.Sprintf("%s.%s", path, name))
	}
	return held
}

// routers is runHeapClient's process, as startRouters started it.
type routers struct {
	t     *testing.T
	stdin io.WriteCloser
	lines *bufio.Scanner
	stop  func() // closes stdin, waits for the process and until srv holds no stream
}

// startRouters starts runHeapClient's process on srv: conns connections,
// perConn streams on each once told to go.
func startRouters(t *testing.T, ctx context.Context, srv heapServer, conns, perConn int) *routers {
	t.Helper()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s %d %d", heapClientEnv, srv.addr, conns, perConn))
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return &routers{t: t, stdin: stdin, lines: bufio.NewScanner(stdout), stop: func() {
		_ = stdin.Close() // the routers go
		_ = cmd.Wait()
		waitFor(t, ctx, "every stream ended", func() bool { return srv.open() == 0 })
	}}
}

// expect fails the test unless the routers' next line is want.
func (r *routers) expect(want string) {
	r.t.Helper()
	if !r.lines.Scan() || r.lines.Text() != want {
		r.t.Fatalf("the routers said %q (%v), want %q", r.lines.Text(), r.lines.Err(), want)
	}
}

// heapProfileEnv, set to a path, makes TestNativeMonitorStreamHeap write
// the heap profile of each server with its streams open, to path.ours and
// path.plain (TestNativeIdleConnectionHeap: with its connections open, to
// path.conn.ours and path.conn.plain): run it with
// GODEBUG=memprofilerate=512 and read it with go tool pprof
// -sample_index=inuse_space.
const heapProfileEnv = "LOADREPORTER_RPC_HEAP_PROFILE"

func writeHeapProfile(t *testing.T, path string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		t.Fatal(err)
	}
}

// liveHeap is the heap in use after a collection, the least of a few
// looks (a goroutine winding down may still hold some).
func liveHeap() int64 {
	least := int64(-1)
	for range 3 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		if h := int64(ms.HeapAlloc); least < 0 || h < least {
			least = h
		}
	}
	return least
}

// startHeapMonitor serves Monitor on the native server as the reporter
// mounts it, over sessions that hold nothing but what Monitor reads.
func startHeapMonitor(t *testing.T) heapServer {
	reg := &heapRegistrar{}
	mon := mustMonitor(t, reg, MonitorOptions{Stalls: NewStalls(0, slog.New(slog.DiscardHandler))})
	mux := http.NewServeMux()
	mux.Handle(mon.Handler())
	stopping, stop := context.WithCancel(context.Background())
	t.Cleanup(stop)
	addr := startNative(t, WithTransportInfo(BoundWritesAtShutdown(stopping, time.Second, mux)))
	return heapServer{addr: addr, open: reg.open.Load, deploy: reg.deliver}
}

// heapRegistrar hands out heapSessions and counts those still open.
type heapRegistrar struct {
	open     atomic.Int64
	mu       sync.Mutex
	sessions map[*heapSession]struct{}
}

func (r *heapRegistrar) Register(routerID string, _, _ int64) (RouterSession, session.Config, error) {
	s := &heapSession{reg: r, id: routerID, reports: make(chan *domain.Report, 1), done: make(chan struct{})}
	r.mu.Lock()
	if r.sessions == nil {
		r.sessions = map[*heapSession]struct{}{}
	}
	r.sessions[s] = struct{}{}
	r.mu.Unlock()
	r.open.Add(1)
	return s, testConfig, nil
}

func (r *heapRegistrar) ShuttingDown() context.Context { return context.Background() }

// deliver gives every open session one report, the same one (its frame
// is encoded once), and waits until each stream has taken it.
func (r *heapRegistrar) deliver(t *testing.T, ctx context.Context) {
	rep := sampleReport()
	r.mu.Lock()
	sessions := slices.Collect(maps.Keys(r.sessions))
	r.mu.Unlock()
	for _, s := range sessions {
		s.reports <- rep
		s.mu.Lock()
		f := s.notify
		s.mu.Unlock()
		f()
	}
	waitFor(t, ctx, "every stream took its report", func() bool {
		for _, s := range sessions {
			if len(s.reports) > 0 {
				return false
			}
		}
		return true
	})
}

// heapSession is a live session whose reports the test delivers.
type heapSession struct {
	reg     *heapRegistrar
	id      string
	reports chan *domain.Report
	done    chan struct{}
	mu      sync.Mutex
	notify  func()
}

func (s *heapSession) RouterID() string                           { return s.id }
func (s *heapSession) Reports() <-chan *domain.Report             { return s.reports }
func (s *heapSession) Done() <-chan struct{}                      { return s.done }
func (s *heapSession) Take() *domain.Report                       { return takeFrom(s.reports) }
func (s *heapSession) Ended() bool                                { return isClosed(s.done) }
func (s *heapSession) Err() error                                 { return nil }
func (s *heapSession) KeepAlive() error                           { return nil }
func (s *heapSession) Update(_, _ *int64) (session.Config, error) { return testConfig, nil }
func (s *heapSession) Reregister(string, int64, int64) (session.Config, error) {
	return testConfig, nil
}

func (s *heapSession) Notify(f func()) {
	s.mu.Lock()
	s.notify = f
	s.mu.Unlock()
}

func (s *heapSession) Close() {
	s.reg.mu.Lock()
	_, ok := s.reg.sessions[s]
	delete(s.reg.sessions, s)
	s.reg.mu.Unlock()
	if ok {
		s.reg.open.Add(-1)
	}
}

// startPlainGRPC serves Monitor's stream on a plain grpc-go server as
// ORCA's service serves its stream: its handler acks the register, sends
// a report at once and waits on a ticker, reading nothing more.
func startPlainGRPC(t *testing.T) heapServer {
	var open atomic.Int64
	srv := grpc.NewServer()
	srv.RegisterService(&grpc.ServiceDesc{
		ServiceName: loadmonitorv1connect.LoadMonitorServiceName,
		HandlerType: (*any)(nil),
		Streams: []grpc.StreamDesc{{StreamName: "Monitor", ServerStreams: true, ClientStreams: true,
			Handler: func(_ any, st grpc.ServerStream) error {
				if err := st.RecvMsg(&pb.RouterFrame{}); err != nil {
					return nil
				}
				open.Add(1)
				defer open.Add(-1)
				ack := &pb.WorkerFrame{Payload: &pb.WorkerFrame_Registered{Registered: &pb.RegisterResponse{LeaseTtlMs: 3000}}}
				if err := st.SendMsg(ack); err != nil {
					return err
				}
				report := &pb.WorkerFrame{Payload: &pb.WorkerFrame_Report{Report: ReportToProto(sampleReport())}}
				if err := st.SendMsg(report); err != nil {
					return err
				}
				ticker := time.NewTicker(time.Hour)
				defer ticker.Stop()
				for {
					select {
					case <-st.Context().Done():
						return nil
					case <-ticker.C:
					}
				}
			}}},
	}, nil)
	return heapServer{addr: serveGRPC(t, srv), open: open.Load, deploy: func(*testing.T, context.Context) {}}
}

// runHeapClient is the routers' process: conns connections to addr, each
// opened by one stream that registers and ends ("warm"); on "go" from
// stdin, perConn registered streams on each ("open"), held until stdin
// closes.
func runHeapClient(spec string) int {
	fields := strings.Fields(spec)
	if len(fields) != 3 {
		fmt.Fprintf(os.Stderr, "%s=%q: want addr conns streams\n", heapClientEnv, spec)
		return 2
	}
	conns, err1 := strconv.Atoi(fields[1])
	perConn, err2 := strconv.Atoi(fields[2])
	if err1 != nil || err2 != nil {
		fmt.Fprintf(os.Stderr, "%s=%q: want addr conns streams\n", heapClientEnv, spec)
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	fail := func(err error) int { fmt.Fprintln(os.Stderr, "routers:", err); return 1 }
	register := func(cc *grpc.ClientConn, ctx context.Context, id string) error {
		st, err := cc.NewStream(ctx, monitorDesc, loadmonitorv1connect.LoadMonitorServiceMonitorProcedure)
		if err != nil {
			return err
		}
		if err := st.SendMsg(registerFrame(id, 1000, 3000)); err != nil {
			return err
		}
		return st.RecvMsg(&pb.WorkerFrame{})
	}
	ccs := make([]*grpc.ClientConn, conns)
	for i := range ccs {
		cc, err := grpc.NewClient(fields[0], grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			return fail(err)
		}
		defer cc.Close()
		warm, end := context.WithCancel(ctx)
		err = register(cc, warm, fmt.Sprintf("warm%d", i))
		end()
		if err != nil {
			return fail(err)
		}
		ccs[i] = cc
	}
	stdin := bufio.NewScanner(os.Stdin)
	fmt.Println("warm")
	if !stdin.Scan() {
		return 0
	}
	for i, cc := range ccs {
		for j := range perConn {
			// No deadline, as a router's stream has none.
			if err := register(cc, context.Background(), fmt.Sprintf("r%d.%d", i, j)); err != nil {
				return fail(err)
			}
		}
	}
	fmt.Println("open")
	for stdin.Scan() {
	}
	return 0
}
