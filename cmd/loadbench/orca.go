package main

import (
	"errors"
	"io"
	"net"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/loadreporter/loadreporter/adapters/rpc"
	"github.com/loadreporter/loadreporter/domain"
	pb "github.com/loadreporter/loadreporter/gen/sglang/router/loadmonitor/v1"
	"github.com/loadreporter/loadreporter/gen/sglang/router/loadmonitor/v1/loadmonitorv1connect"
)

// orcaPeer serves the Monitor stream the way grpc-go's ORCA service serves
// StreamCoreMetrics (orca/service.go): a grpc-go server, and per stream one
// goroutine — its handler — with its own ticker that reads the current load
// and marshals and sends it on every tick. Like ORCA it never reads what
// the client sends after its request (keep-alives stay unread; it enforces
// no lease), and it sends the first report at once.
type orcaPeer struct {
	engine *instantEngine
	seq    atomic.Uint64
}

// serveORCA starts the ORCA-shaped peer on ln and returns its stop.
func serveORCA(ln net.Listener, engine *instantEngine) func() error {
	p := &orcaPeer{engine: engine}
	srv := grpc.NewServer()
	registerMonitor(srv, p.monitor)
	go func() { _ = srv.Serve(ln) }()
	return func() error { srv.Stop(); return nil }
}

// registerMonitor serves monitor as the Monitor method of srv, as a bare
// grpc-go peer does without generated grpc-go code.
func registerMonitor(srv *grpc.Server, monitor func(grpc.ServerStream) error) {
	srv.RegisterService(&grpc.ServiceDesc{
		ServiceName: loadmonitorv1connect.LoadMonitorServiceName,
		HandlerType: (*any)(nil),
		Streams: []grpc.StreamDesc{{
			StreamName: "Monitor", ServerStreams: true, ClientStreams: true,
			Handler: func(_ any, st grpc.ServerStream) error { return monitor(st) },
		}},
	}, nil)
}

// acceptRegister reads a peer stream's first frame, which must register
// with an interval, and acks it without any of loadreporter's checks; a
// stream closed before any frame yields nil and nil.
func acceptRegister(st grpc.ServerStream) (*pb.RegisterRequest, error) {
	first := new(pb.RouterFrame)
	if err := st.RecvMsg(first); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil
		}
		return nil, err
	}
	reg := first.GetRegister()
	if reg == nil || reg.GetReportIntervalMs() <= 0 {
		return nil, status.Error(codes.InvalidArgument, "the first frame must be register")
	}
	lease := reg.GetLeaseTtlMs()
	ack := &pb.WorkerFrame{Payload: &pb.WorkerFrame_Registered{Registered: &pb.RegisterResponse{
		LeaseTtlMs: lease, RenewAfterMs: max(1, lease/3)}}}
	return reg, st.SendMsg(ack)
}

func (p *orcaPeer) monitor(st grpc.ServerStream) error {
	reg, err := acceptRegister(st)
	if reg == nil || err != nil {
		return err
	}
	ticker := time.NewTicker(time.Duration(reg.GetReportIntervalMs()) * time.Millisecond)
	defer ticker.Stop()
	for {
		if err := st.SendMsg(p.report(st)); err != nil {
			return err
		}
		select {
		case <-st.Context().Done():
			return nil
		case <-ticker.C:
		}
	}
}

// report reads the current load and builds this stream's own message, as
// ORCA's ServerMetrics().toLoadReportProto() does on every tick.
func (p *orcaPeer) report(st grpc.ServerStream) *pb.WorkerFrame {
	snap, _ := p.engine.Pull(st.Context())
	r := &domain.Report{SequenceID: p.seq.Add(1), ReportTime: time.Now(), Status: domain.StatusHealthy, Ranks: snap.Ranks}
	return &pb.WorkerFrame{Payload: &pb.WorkerFrame_Report{Report: rpc.ReportToProto(r)}}
}
