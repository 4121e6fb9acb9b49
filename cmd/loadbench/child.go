package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/pprof"
	"runtime"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"

	"github.com/loadreporter/loadreporter/adapters/rpc"
	"github.com/loadreporter/loadreporter/cmd/loadreporter/app"
	"github.com/loadreporter/loadreporter/domain"
	pb "github.com/loadreporter/loadreporter/gen/sglang/router/loadmonitor/v1"
	"github.com/loadreporter/loadreporter/gen/sglang/router/loadmonitor/v1/loadmonitorv1connect"
)

// instantEngine answers at once with n ranks and counts its pulls.
type instantEngine struct {
	ranks int
	pulls atomic.Int64
}

func (e *instantEngine) Pull(context.Context) (domain.Snapshot, error) {
	n := e.pulls.Add(1)
	s := domain.Snapshot{Ranks: make([]domain.RankLoad, e.ranks)}
	now := time.Now()
	for i := range s.Ranks {
		s.Ranks[i] = domain.RankLoad{
			DPRank: int64(i), SnapshotTime: now, NumRunningReqs: 100 + n%50, NumWaitingReqs: 3,
			NumWaitingUncachedTokens: 900, NumUsedTokens: 120000, NumTotalTokens: 121000,
			MaxTotalNumTokens: 262144, MaxRunningRequests: 256, TokenUsage: 0.457,
			GenThroughput: 3850.5, CacheHitRate: 0.53, Utilization: 0.41,
		}
	}
	return s, nil
}

// serveChild serves the Monitor stream (ours or a peer's) and a stats
// port that tells the parent how many pulls the engine saw.
func serveChild(ctx context.Context, o options) error {
	engine := &instantEngine{ranks: o.ranks}
	var addr string
	var closeServer func() error
	switch o.child {
	case "ours", netHTTPRef:
		c := app.DefaultConfig()
		// nethttp is ours with every connection on net/http, as before
		// the native gRPC port.
		c.Server.NativeGRPC = o.child == "ours"
		c.Server.Listen = "127.0.0.1:0"
		c.Logs.LogLevel = "error"
		c.Sessions.MaxSessions = max(c.Sessions.MaxSessions, o.routers+10)
		c.Streams.Port.MaxStreamsPerConn = max(c.Streams.Port.MaxStreamsPerConn, o.routers+10) // the join probe shares a connection
		if o.slots[0] != defaultSlots {
			c.Fire.PhaseSlots = o.slots[0]
		}
		m, err := app.InitializeMainWithEngine(c, app.Engine{Source: engine})
		if err != nil {
			return err
		}
		if err := m.Start(); err != nil {
			return err
		}
		addr, closeServer = m.Addr(), m.Close
	case "orca":
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return err
		}
		addr, closeServer = ln.Addr().String(), serveORCA(ln, engine)
	case "grpcfanout":
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return err
		}
		addr, closeServer = ln.Addr().String(), serveGRPCFanout(ln, engine, o.interval)
	case "perstream":
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return err
		}
		var p http.Protocols
		p.SetHTTP1(true)
		p.SetUnencryptedHTTP2(true)
		mux := http.NewServeMux()
		mux.Handle(loadmonitorv1connect.NewLoadMonitorServiceHandler(&perStreamMonitor{engine: engine}))
		srv := &http.Server{Handler: mux, Protocols: &p, HTTP2: &http.HTTP2Config{MaxConcurrentStreams: o.routers + 100}}
		go func() { _ = srv.Serve(ln) }()
		addr, closeServer = ln.Addr().String(), srv.Close
	default:
		return fmt.Errorf("--child %q: want ours, orca, grpcfanout, perstream or nethttp", o.child)
	}
	stats, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	statsMux := http.NewServeMux()
	statsMux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, engine.pulls.Load()) })
	statsMux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	statsMux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	statsMux.Handle("/debug/pprof/heap", pprof.Handler("heap"))
	statsMux.Handle("/debug/pprof/goroutine", pprof.Handler("goroutine"))
	statsMux.HandleFunc("/debug/memstats", func(w http.ResponseWriter, _ *http.Request) {
		// As found, then after a collection: stacks shrink and garbage
		// goes only then, so the second is what the streams hold.
		for _, when := range []string{"as found", "after GC"} {
			if when == "after GC" {
				runtime.GC()
			}
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			fmt.Fprintf(w, "%s: heap_inuse %d heap_alloc %d stack_inuse %d sys %d goroutines %d\n",
				when, ms.HeapInuse, ms.HeapAlloc, ms.StackInuse, ms.Sys, runtime.NumGoroutine())
		}
	})
	go func() { _ = http.Serve(stats, statsMux) }()
	fmt.Printf("listening %s %s\n", addr, stats.Addr())
	<-ctx.Done()
	return closeServer()
}

// perStreamMonitor is the older peer: ORCA's shape (each stream has its own
// ticker, pulls the engine itself and encodes its own report) on connect
// and net/http's HTTP/2 server, with a second goroutine per stream that
// drains keep-alives.
type perStreamMonitor struct {
	loadmonitorv1connect.UnimplementedLoadMonitorServiceHandler
	engine *instantEngine
	seq    atomic.Uint64
}

func (m *perStreamMonitor) Monitor(ctx context.Context, st *connect.BidiStream[pb.RouterFrame, pb.WorkerFrame]) error {
	first, err := st.Receive()
	if err != nil {
		if errors.Is(err, io.EOF) {
			return nil
		}
		return err
	}
	reg := first.GetRegister()
	if reg == nil {
		return nil
	}
	lease := reg.GetLeaseTtlMs()
	if err := st.Send(&pb.WorkerFrame{Payload: &pb.WorkerFrame_Registered{Registered: &pb.RegisterResponse{
		LeaseTtlMs: lease, RenewAfterMs: max(1, lease/3)}}}); err != nil {
		return err
	}
	go func() { // drain keep-alives
		for {
			if _, err := st.Receive(); err != nil {
				return
			}
		}
	}()
	send := func() error {
		snap, _ := m.engine.Pull(ctx)
		r := &domain.Report{SequenceID: m.seq.Add(1), ReportTime: time.Now(), Status: domain.StatusHealthy, Ranks: snap.Ranks}
		return st.Send(&pb.WorkerFrame{Payload: &pb.WorkerFrame_Report{Report: rpc.ReportToProto(r)}})
	}
	if err := send(); err != nil {
		return err
	}
	t := time.NewTicker(time.Duration(reg.GetReportIntervalMs()) * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			if err := send(); err != nil {
				return err
			}
		case <-ctx.Done():
			return nil
		}
	}
}
