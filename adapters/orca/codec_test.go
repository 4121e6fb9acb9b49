package orca

import (
	"testing"

	v3orcapb "github.com/cncf/xds/go/xds/data/orca/v3"
	"google.golang.org/protobuf/proto"

	"github.com/loadreporter/loadreporter/domain"
)

// TestFramesMapOncePerReport: every stream of a fire gets the same frame
// (encoded once by fanout's codecs), mapped from the report; the next
// fire's report gets its own.
func TestFramesMapOncePerReport(t *testing.T) {
	t.Parallel()
	fs := newFrames(1)
	r1 := &domain.Report{SequenceID: 1, ReportTime: t0, Status: domain.StatusHealthy,
		Ranks: []domain.RankLoad{rank(0, 0.5, 1, 0, 0)}}
	f := fs.Get(r1)
	if fs.Get(r1) != f {
		t.Fatal("a second stream of the same fire got another frame")
	}
	if got := f.Proto().(*v3orcapb.OrcaLoadReport); !proto.Equal(got, loadReport(r1, 1)) || got.ApplicationUtilization != 0.5 {
		t.Fatalf("frame %v, want the mapped report", got)
	}
	r2 := &domain.Report{SequenceID: 2, ReportTime: t0, Status: domain.StatusUnreachable}
	if f2 := fs.Get(r2); f2 == f || f2.Proto().(*v3orcapb.OrcaLoadReport).NamedMetrics["status"] != 3 {
		t.Fatal("the next fire's report reused the previous frame")
	}
}
