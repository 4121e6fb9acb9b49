package client

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"connectrpc.com/connect"

	pb "github.com/loadreporter/loadreporter/gen/sglang/router/loadmonitor/v1"
	"github.com/loadreporter/loadreporter/gen/sglang/router/loadmonitor/v1/loadmonitorv1connect"
	"github.com/loadreporter/loadreporter/internal/sharedtest"
)

// fakeWorker is a Monitor handler of our own whose streams the test
// scripts frame by frame: the frames a real worker never sends (out of
// order, invalid) and the endings it sends rarely.
type fakeWorker struct {
	addr    string
	streams chan *fakeStream
	quit    chan struct{}
}

// fakeStream is one router stream as the fake worker sees it. Only the
// handler's goroutine sends (the race detector cannot see that a frame
// the test sent was on the wire before the handler returned).
type fakeStream struct {
	recv chan *pb.RouterFrame // closed at the router's half-close or error
	out  chan outgoing        // frames for the handler to send
	end  chan error           // the handler returns what arrives here
	stop chan struct{}        // closed at the router's stop: the handler returns nil
	done chan struct{}        // closed when the handler has returned
}

type outgoing struct {
	f    *pb.WorkerFrame
	sent chan error
}

func startFakeWorker(t *testing.T) *fakeWorker {
	t.Helper()
	fw := &fakeWorker{streams: make(chan *fakeStream, 16), quit: make(chan struct{})}
	mux := http.NewServeMux()
	mux.Handle(loadmonitorv1connect.NewLoadMonitorServiceHandler(fw))
	fw.addr = sharedtest.ServeH2C(t, mux)
	t.Cleanup(func() { close(fw.quit) }) // before the server closes: cleanups run last first
	return fw
}

// Monitor hands the stream to the test, sends what it is given and
// returns when told to.
func (fw *fakeWorker) Monitor(ctx context.Context, st *connect.BidiStream[pb.RouterFrame, pb.WorkerFrame]) error {
	fs := &fakeStream{recv: make(chan *pb.RouterFrame, 1024), out: make(chan outgoing), end: make(chan error, 1),
		stop: make(chan struct{}), done: make(chan struct{})}
	defer close(fs.done)
	go func() {
		defer close(fs.recv)
		for {
			f, err := st.Receive()
			if err != nil {
				return
			}
			select {
			case fs.recv <- f:
			case <-ctx.Done():
				return
			}
			if f.GetStop() != nil {
				close(fs.stop)
				return
			}
		}
	}()
	select {
	case fw.streams <- fs:
	case <-fw.quit:
		return errors.New("fake worker closed")
	}
	for {
		select {
		case o := <-fs.out:
			o.sent <- st.Send(o.f)
		case err := <-fs.end:
			return err
		case <-fs.stop:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		case <-fw.quit:
			return errors.New("fake worker closed")
		}
	}
}

// next is the next router stream.
func (fw *fakeWorker) next(ctx context.Context, t *testing.T) *fakeStream {
	t.Helper()
	select {
	case fs := <-fw.streams:
		return fs
	case <-ctx.Done():
		t.Fatal("no stream from the router")
		return nil
	}
}

// frame is the router's next frame; nil when it half-closed.
func (fs *fakeStream) frame(ctx context.Context, t *testing.T) *pb.RouterFrame {
	t.Helper()
	select {
	case f := <-fs.recv:
		return f
	case <-ctx.Done():
		t.Fatal("no frame from the router")
		return nil
	}
}

// frameOf skips keep-alives until a frame that is not one.
func (fs *fakeStream) frameOf(ctx context.Context, t *testing.T) *pb.RouterFrame {
	t.Helper()
	for {
		f := fs.frame(ctx, t)
		if f.GetKeepAlive() == nil {
			return f
		}
	}
}

func (fs *fakeStream) send(t *testing.T, f *pb.WorkerFrame) {
	t.Helper()
	o := outgoing{f: f, sent: make(chan error, 1)}
	select {
	case fs.out <- o:
	case <-fs.done:
		t.Fatal("fake worker send: the stream has ended")
	}
	if err := <-o.sent; err != nil {
		t.Fatalf("fake worker send: %v", err)
	}
}

// register expects a register frame and acknowledges it.
func (fs *fakeStream) register(ctx context.Context, t *testing.T, leaseMs, renewMs int64) *pb.RegisterRequest {
	t.Helper()
	reg := fs.frameOf(ctx, t).GetRegister()
	if reg == nil {
		t.Fatal("the first frame is not register")
	}
	fs.send(t, ackFrame(leaseMs, renewMs))
	return reg
}

func (fs *fakeStream) report(t *testing.T, r *pb.LoadReport) {
	t.Helper()
	fs.send(t, &pb.WorkerFrame{Payload: &pb.WorkerFrame_Report{Report: r}})
}

// fail sends a stream error and ends the stream with status OK.
func (fs *fakeStream) fail(t *testing.T, code, msg string) {
	t.Helper()
	fs.send(t, &pb.WorkerFrame{Payload: &pb.WorkerFrame_Error{Error: &pb.StreamError{Code: code, Message: msg}}})
	fs.end <- nil
}

func ackFrame(leaseMs, renewMs int64) *pb.WorkerFrame {
	return &pb.WorkerFrame{Payload: &pb.WorkerFrame_Registered{Registered: &pb.RegisterResponse{
		LeaseTtlMs: leaseMs, RenewAfterMs: renewMs}}}
}

// waitView reads views until ok accepts one, bounded by ctx.
func waitView(ctx context.Context, t *testing.T, views <-chan *View, what string, ok func(*View) bool) *View {
	t.Helper()
	var last *View
	for {
		select {
		case v, open := <-views:
			if !open {
				t.Fatalf("views closed waiting for %s; last %+v", what, last)
			}
			last = v
			if ok(v) {
				return v
			}
		case <-ctx.Done():
			t.Fatalf("no view %s; last %+v", what, last)
		}
	}
}

func isState(s State) func(*View) bool { return func(v *View) bool { return v.State == s } }

func hasSeq(id string, seq uint64) func(*View) bool {
	return func(v *View) bool {
		return v.Report.GetSourceInstanceId() == id && v.Report.GetSequenceId() == seq
	}
}
