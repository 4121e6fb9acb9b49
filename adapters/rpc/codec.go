package rpc

import (
	"connectrpc.com/connect"
	"google.golang.org/protobuf/encoding/protojson"
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
