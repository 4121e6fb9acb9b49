package rpc

import (
	"sync"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/loadreporter/loadreporter/adapters/internal/fanoutgzip"
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

// Unmarshal also refuses enum numbers the enum does not define (enums.go).
func (binaryCodec) Unmarshal(b []byte, m any) error {
	msg := m.(proto.Message)
	if err := proto.Unmarshal(b, msg); err != nil {
		return err
	}
	if r := msg.ProtoReflect(); holdsEnums(r.Descriptor()) {
		return checkEnums(r, "")
	}
	return nil
}

// jsonCodec is connect's "json" codec (under both of connect's names for
// it) that also accepts *outFrame.
type jsonCodec struct{ name string }

func (c jsonCodec) Name() string { return c.name }

func (jsonCodec) Marshal(m any) ([]byte, error) {
	if f, ok := m.(*outFrame); ok {
		b, err := f.protoJSON()
		return append([]byte(nil), b...), err
	}
	return protojson.Marshal(m.(proto.Message))
}

// Unmarshal tolerates unknown fields, as connect's own codec does, so a
// client built against a newer schema can still call us; it refuses enum
// names and numbers the enum does not define (enums.go).
func (jsonCodec) Unmarshal(b []byte, m any) error {
	msg := m.(proto.Message)
	md := msg.ProtoReflect().Descriptor()
	enums := holdsEnums(md)
	if enums {
		if err := checkJSONEnums(b, md); err != nil {
			return err
		}
	}
	if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(b, msg); err != nil {
		return err
	}
	if enums {
		return checkEnums(msg.ProtoReflect(), "")
	}
	return nil
}

// codecOptions replaces connect's codecs on every handler of the package.
func codecOptions() connect.HandlerOption {
	return connect.WithHandlerOptions(connect.WithCodec(binaryCodec{}),
		connect.WithCodec(jsonCodec{"json"}), connect.WithCodec(jsonCodec{"json; charset=utf-8"}), fanoutgzip.Options())
}
