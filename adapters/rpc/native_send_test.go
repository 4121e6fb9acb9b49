package rpc

import (
	"context"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/mem"
)

// writerHeld is grpc-go's server stream as a native Monitor send meets
// it: SendMsg encodes with the native codec, and its writer keeps the
// frame's buffers, a reference on them, until it has written them.
type writerHeld struct {
	grpc.ServerStream
	ctx  context.Context
	held mem.BufferSlice
}

func (w *writerHeld) Context() context.Context { return w.ctx }

func (w *writerHeld) SendMsg(m any) error {
	data, err := nativeCodec{}.Marshal(m)
	if err != nil {
		return err
	}
	data.Ref() // the writer's
	w.held = data
	data.Free() // SendMsg's own, once queued
	return nil
}

// write is grpc-go's writer done with the frame: the gate opens.
func (w *writerHeld) write() {
	w.held.Free()
	w.held = nil
}

// TestANativeSendAllocatesNothingOfOurs: a fire's report goes to every
// native stream as the same encoding; handing it to grpc-go allocates
// nothing of the bridge's (grpc-go allocates its own per message), so a
// thousand routers' reports make no garbage of ours at every fire.
func TestANativeSendAllocatesNothingOfOurs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates for what it watches")
	}
	ss := &writerHeld{ctx: context.Background()}
	s := &nativeStream{call: &nativeCall{ss: ss}, done: ss.ctx.Done()}
	f := newReportFrames().Get(sampleReport())
	send := func() {
		if err := s.Send(f); err != nil {
			t.Fatal(err)
		}
		if !s.inFlight() {
			t.Fatal("the frame is not in flight once sent")
		}
		ss.write()
		if s.inFlight() {
			t.Fatal("the frame is still in flight once written")
		}
	}
	send() // encodes the frame, once for every stream
	if allocs := testing.AllocsPerRun(100, send); allocs != 0 {
		t.Errorf("a native send allocates %v times, want 0", allocs)
	}
	if n := s.writtenCount(); n != 102 {
		t.Errorf("%d frames written, want 102", n)
	}
}
