package orca

import (
	"connectrpc.com/connect"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/loadreporter/loadreporter/adapters/internal/fanout"
	"github.com/loadreporter/loadreporter/domain"
)

// frames remembers the OrcaLoadReport of the latest report, mapped and
// encoded once however many streams send it: every session of a fire
// receives the same *domain.Report.
type frames = fanout.Latest[*domain.Report]

type frame = fanout.Message

func newFrames(nominalRPS float64) *frames {
	return &frames{Build: func(r *domain.Report) proto.Message { return loadReport(r, nominalRPS) }}
}

// codecOptions: requests decode as connect's own codecs decode them
// (unknown JSON fields tolerated).
func codecOptions() connect.HandlerOption {
	return fanout.Options(
		func(b []byte, m proto.Message) error { return proto.Unmarshal(b, m) },
		func(b []byte, m proto.Message) error {
			return protojson.UnmarshalOptions{DiscardUnknown: true}.Unmarshal(b, m)
		})
}
