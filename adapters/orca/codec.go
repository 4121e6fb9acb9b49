package orca

import (
	"sync"

	"connectrpc.com/connect"
	v3orcapb "github.com/cncf/xds/go/xds/data/orca/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/loadreporter/loadreporter/adapters/internal/fanoutgzip"
	"github.com/loadreporter/loadreporter/domain"
)

// frame is one fire's OrcaLoadReport whose encodings are computed at most
// once, so a report fanned out to a thousand streams is mapped once and
// marshalled once per codec.
type frame struct {
	msg      *v3orcapb.OrcaLoadReport
	binOnce  sync.Once
	bin      []byte
	binErr   error
	jsonOnce sync.Once
	json     []byte
	jsonErr  error
}

func (f *frame) binary() ([]byte, error) {
	f.binOnce.Do(func() { f.bin, f.binErr = proto.Marshal(f.msg) })
	return f.bin, f.binErr
}

func (f *frame) protoJSON() ([]byte, error) {
	f.jsonOnce.Do(func() { f.json, f.jsonErr = protojson.Marshal(f.msg) })
	return f.json, f.jsonErr
}

// frames remembers the frame of the latest report: every session of a fire
// receives the same *domain.Report, so one entry suffices.
type frames struct {
	nominalRPS float64

	mu     sync.Mutex
	report *domain.Report
	frame  *frame
}

func (c *frames) get(r *domain.Report) *frame {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.report != r {
		c.report = r
		c.frame = &frame{msg: loadReport(r, c.nominalRPS)}
	}
	return c.frame
}

// binaryCodec is connect's "proto" codec that also accepts *frame.
type binaryCodec struct{}

func (binaryCodec) Name() string { return "proto" }

func (binaryCodec) Marshal(m any) ([]byte, error) {
	if f, ok := m.(*frame); ok {
		b, err := f.binary()
		// connect may reuse what Marshal returns: hand out a copy.
		return append([]byte(nil), b...), err
	}
	return proto.Marshal(m.(proto.Message))
}

func (binaryCodec) MarshalAppend(dst []byte, m any) ([]byte, error) {
	if f, ok := m.(*frame); ok {
		b, err := f.binary()
		return append(dst, b...), err
	}
	return proto.MarshalOptions{}.MarshalAppend(dst, m.(proto.Message))
}

func (binaryCodec) Unmarshal(b []byte, m any) error { return proto.Unmarshal(b, m.(proto.Message)) }

// jsonCodec is connect's "json" codec (under both of connect's names for
// it) that also accepts *frame.
type jsonCodec struct{ name string }

func (c jsonCodec) Name() string { return c.name }

func (jsonCodec) Marshal(m any) ([]byte, error) {
	if f, ok := m.(*frame); ok {
		b, err := f.protoJSON()
		return append([]byte(nil), b...), err
	}
	return protojson.Marshal(m.(proto.Message))
}

// Unmarshal tolerates unknown fields, as connect's own codec does.
func (jsonCodec) Unmarshal(b []byte, m any) error {
	return protojson.UnmarshalOptions{DiscardUnknown: true}.Unmarshal(b, m.(proto.Message))
}

func codecOptions() connect.HandlerOption {
	return connect.WithHandlerOptions(connect.WithCodec(binaryCodec{}),
		connect.WithCodec(jsonCodec{"json"}), connect.WithCodec(jsonCodec{"json; charset=utf-8"}),
		fanoutgzip.Options())
}
