package orca

import (
	"bytes"
	"testing"

	v3orcapb "github.com/cncf/xds/go/xds/data/orca/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/loadreporter/loadreporter/domain"
)

// TestFramesMapAndEncodeOncePerReport: every stream of a fire gets the same
// frame; its encodings decode to the mapped report, and what a codec hands
// out is a copy connect may reuse without corrupting the next stream's.
func TestFramesMapAndEncodeOncePerReport(t *testing.T) {
	fs := frames{nominalRPS: 1}
	r1 := &domain.Report{SequenceID: 1, ReportTime: t0, Status: domain.StatusHealthy,
		Ranks: []domain.RankLoad{rank(0, 0.5, 1, 0, 0)}}
	f := fs.get(r1)
	if fs.get(r1) != f {
		t.Fatal("a second stream of the same fire got another frame")
	}
	b1, err := binaryCodec{}.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	want := bytes.Clone(b1)
	clear(b1) // what connect may do with a buffer it was handed
	b2, _ := binaryCodec{}.MarshalAppend([]byte("x"), f)
	if !bytes.Equal(b2[1:], want) {
		t.Fatal("the cached encoding changed after a caller reused its copy")
	}
	var got v3orcapb.OrcaLoadReport
	if err := proto.Unmarshal(want, &got); err != nil || !proto.Equal(&got, f.msg) {
		t.Fatalf("binary encoding decodes to %v, %v", &got, err)
	}
	j, err := jsonCodec{"json"}.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	got.Reset()
	if err := protojson.Unmarshal(j, &got); err != nil || got.ApplicationUtilization != 0.5 {
		t.Fatalf("JSON encoding decodes to %v, %v", &got, err)
	}
	r2 := &domain.Report{SequenceID: 2, ReportTime: t0, Status: domain.StatusUnreachable}
	if f2 := fs.get(r2); f2 == f || f2.msg.NamedMetrics["status"] != 3 {
		t.Fatal("the next fire's report reused the previous frame")
	}
}
