package rpc

import (
	"sync"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/loadreporter/loadreporter/domain"
	pb "github.com/loadreporter/loadreporter/gen/sglang/router/loadmonitor/v1"
)

// outFrame is a WorkerFrame whose encodings are computed at most once, so a
// report fanned out to a thousand routers is marshalled once per codec.
type outFrame struct {
	msg      *pb.WorkerFrame
	binOnce  sync.Once
	bin      []byte
	binErr   error
	jsonOnce sync.Once
	json     []byte
	jsonErr  error
}

func newOutFrame(m *pb.WorkerFrame) *outFrame { return &outFrame{msg: m} }

func (f *outFrame) binary() ([]byte, error) {
	f.binOnce.Do(func() { f.bin, f.binErr = proto.Marshal(f.msg) })
	return f.bin, f.binErr
}

func (f *outFrame) protoJSON() ([]byte, error) {
	f.jsonOnce.Do(func() { f.json, f.jsonErr = protojson.Marshal(f.msg) })
	return f.json, f.jsonErr
}

// reportFrames remembers the frame of the latest report: every session of a
// fire receives the same *domain.Report, so one entry suffices.
type reportFrames struct {
	mu     sync.Mutex
	report *domain.Report
	frame  *outFrame
}

func (c *reportFrames) get(r *domain.Report) *outFrame {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.report != r {
		c.report = r
		c.frame = newOutFrame(&pb.WorkerFrame{Payload: &pb.WorkerFrame_Report{Report: ReportToProto(r)}})
	}
	return c.frame
}

// binaryCodec is connect's "proto" codec that also accepts *outFrame.
type binaryCodec struct{}

func (binaryCodec) Name() string { return "proto" }

func (binaryCodec) Marshal(m any) ([]byte, error) {
	if f, ok := m.(*outFrame); ok {
		b, err := f.binary()
		// connect may reuse what Marshal returns: hand out a copy.
		return append([]byte(nil), b...), err
	}
	return proto.Marshal(m.(proto.Message))
}

func (binaryCodec) MarshalAppend(dst []byte, m any) ([]byte, error) {
	if f, ok := m.(*outFrame); ok {
		b, err := f.binary()
		return append(dst, b...), err
	}
	return proto.MarshalOptions{}.MarshalAppend(dst, m.(proto.Message))
}

func (binaryCodec) Unmarshal(b []byte, m any) error {
	return proto.Unmarshal(b, m.(proto.Message))
}

// jsonCodec is connect's "json" codec that also accepts *outFrame.
type jsonCodec struct{}

func (jsonCodec) Name() string { return "json" }

func (jsonCodec) Marshal(m any) ([]byte, error) {
	if f, ok := m.(*outFrame); ok {
		b, err := f.protoJSON()
		return append([]byte(nil), b...), err
	}
	return protojson.Marshal(m.(proto.Message))
}

func (jsonCodec) Unmarshal(b []byte, m any) error {
	return protojson.UnmarshalOptions{DiscardUnknown: true}.Unmarshal(b, m.(proto.Message))
}

func codecOptions() connect.HandlerOption {
	return connect.WithHandlerOptions(connect.WithCodec(binaryCodec{}), connect.WithCodec(jsonCodec{}))
}
