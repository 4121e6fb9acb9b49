package main

import (
	"context"
	"net"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"

	"github.com/loadreporter/loadreporter/adapters/rpc"
	"github.com/loadreporter/loadreporter/domain"
	pb "github.com/loadreporter/loadreporter/gen/sglang/router/loadmonitor/v1"
)

// fanoutPeer is the floor of grpc-go's server transport for our fan-out:
// one timer for the process on the aligned grid, one pull and one encode
// per fire, and per stream a goroutine that waits for the fire and sends
// the already encoded bytes (grpc-go's per-connection writer batches the
// burst's frames). It has no lease, no session table and no latest-wins
// outbox: what it costs is what grpc-go's transport costs, the lower bound
// of serving routers' gRPC through it (the remaining lever).
type fanoutPeer struct {
	mu     sync.Mutex
	latest encoded
	fired  chan struct{} // closed at the next fire
}

// encoded is a WorkerFrame already marshalled; passCodec sends it as is.
type encoded []byte

// passCodec is grpc-go's proto codec, except that it sends encoded bytes
// without marshalling them again.
type passCodec struct{}

func (passCodec) Name() string { return "proto" }

func (passCodec) Marshal(v any) (mem.BufferSlice, error) {
	if e, ok := v.(encoded); ok {
		return mem.BufferSlice{mem.SliceBuffer(e)}, nil
	}
	b, err := proto.Marshal(v.(proto.Message))
	return mem.BufferSlice{mem.SliceBuffer(b)}, err
}

func (passCodec) Unmarshal(d mem.BufferSlice, v any) error {
	return proto.Unmarshal(d.Materialize(), v.(proto.Message))
}

// serveGRPCFanout starts the peer on ln, firing every interval, and
// returns its stop.
func serveGRPCFanout(ln net.Listener, engine *instantEngine, interval time.Duration) func() error {
	p := &fanoutPeer{fired: make(chan struct{})}
	srv := grpc.NewServer(grpc.ForceServerCodecV2(passCodec{}), grpc.MaxConcurrentStreams(1<<20))
	registerMonitor(srv, p.monitor)
	ctx, cancel := context.WithCancel(context.Background())
	go p.fire(ctx, engine, interval)
	go func() { _ = srv.Serve(ln) }()
	return func() error { cancel(); srv.Stop(); return nil }
}

// fire pulls and encodes once per grid point and wakes every stream.
func (p *fanoutPeer) fire(ctx context.Context, engine *instantEngine, interval time.Duration) {
	var seq uint64
	for {
		now := time.Now()
		t := time.NewTimer(now.Truncate(interval).Add(interval).Sub(now))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		snap, _ := engine.Pull(ctx)
		seq++
		r := &domain.Report{SequenceID: seq, ReportTime: time.Now(), Status: domain.StatusHealthy, Ranks: snap.Ranks}
		b, err := proto.Marshal(&pb.WorkerFrame{Payload: &pb.WorkerFrame_Report{Report: rpc.ReportToProto(r)}})
		if err != nil {
			panic(err) // a report always encodes
		}
		p.mu.Lock()
		p.latest = b
		close(p.fired)
		p.fired = make(chan struct{})
		p.mu.Unlock()
	}
}

func (p *fanoutPeer) monitor(st grpc.ServerStream) error {
	if reg, err := acceptRegister(st); reg == nil || err != nil {
		return err
	}
	go func() { // drain keep-alives: grpc-go's RecvMsg cannot be selected on
		for st.RecvMsg(new(pb.RouterFrame)) == nil {
		}
	}()
	for {
		p.mu.Lock()
		fired := p.fired
		p.mu.Unlock()
		select {
		case <-st.Context().Done():
			return nil
		case <-fired:
		}
		p.mu.Lock()
		latest := p.latest
		p.mu.Unlock()
		if err := st.SendMsg(latest); err != nil {
			return err
		}
	}
}
