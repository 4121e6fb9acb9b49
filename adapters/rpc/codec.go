package rpc

import (
	"errors"
	"fmt"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/loadreporter/loadreporter/adapters/internal/fanout"
	"github.com/loadreporter/loadreporter/domain"
	pb "github.com/loadreporter/loadreporter/gen/sglang/router/loadmonitor/v1"
)

// newOutFrame wraps a WorkerFrame for sending: encoded at most once per
// codec however many streams send it.
func newOutFrame(m *pb.WorkerFrame) *outFrame { return fanout.NewMessage(m) }

type outFrame = fanout.Message

// reportFrames remembers the frame of the latest report: every session of a
// fire receives the same *domain.Report.
type reportFrames = fanout.Latest[*domain.Report]

func newReportFrames() *reportFrames { return &reportFrames{Build: reportFrame} }

func reportFrame(r *domain.Report) proto.Message {
	return &pb.WorkerFrame{Payload: &pb.WorkerFrame_Report{Report: ReportToProto(r)}}
}

// unmarshalBinary also refuses enum numbers the enum does not define
// (enums.go).
func unmarshalBinary(b []byte, msg proto.Message) error {
	if err := proto.Unmarshal(b, msg); err != nil {
		if _, ok := msg.(*pb.RouterFrame); ok && holdsRegister(b) {
			return fmt.Errorf("%w: %w", errRegisterDoesNotDecode, err)
		}
		return err
	}
	if r := msg.ProtoReflect(); holdsEnums(r.Descriptor()) {
		return checkEnums(r, "")
	}
	return nil
}

// unmarshalJSON tolerates unknown fields, as connect's own codec does, so a
// client built against a newer schema can still call us; it refuses enum
// names and numbers the enum does not define (enums.go).
func unmarshalJSON(b []byte, msg proto.Message) error {
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

// codecOptions replaces connect's codecs and gzip on every handler of the
// package.
func codecOptions() connect.HandlerOption { return fanout.Options(unmarshalBinary, unmarshalJSON) }

// errRegisterDoesNotDecode marks a router frame that is a register whose
// fields do not decode (a router_id of invalid UTF-8): a bad register is
// INVALID_ARGUMENT (docs/routers.md), where a first frame of another kind is
// INVALID_FIRST_FRAME.
var errRegisterDoesNotDecode = errors.New("register does not decode")

// holdsRegister reports whether the encoded RouterFrame b carries its
// register field, whether or not that field's contents decode.
func holdsRegister(b []byte) bool {
	const registerField = 1 // RouterFrame.register
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return false
		}
		b = b[n:]
		if num == registerField && typ == protowire.BytesType {
			return true
		}
		if n = protowire.ConsumeFieldValue(num, typ, b); n < 0 {
			return false
		}
		b = b[n:]
	}
	return false
}
