package audit

import (
	"testing"
	"time"

	"github.com/loadreporter/loadreporter/domain"
)

func TestStored(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 30, 12, 0, 0, 123456789, time.FixedZone("x", 3600))
	r := &domain.Report{ReportTime: at, Ranks: []domain.RankLoad{
		{DPRank: 2, SnapshotTime: at.Add(-time.Second)}, {DPRank: 0}}}
	s := Stored(r)
	want := time.Date(2026, 11, 30, 11, 0, 0, 123456000, time.UTC)
	if !s.ReportTime.Equal(want) || s.ReportTime.Location() != time.UTC || s.ReportTime.Nanosecond() != 123456000 {
		t.Errorf("report time %v, want %v in UTC", s.ReportTime, want)
	}
	if s.Ranks[0].DPRank != 0 || !s.Ranks[0].SnapshotTime.Equal(want) || s.Ranks[1].DPRank != 2 ||
		!s.Ranks[1].SnapshotTime.Equal(want.Add(-time.Second)) {
		t.Errorf("ranks %+v: want dp_rank order, a missing snapshot time taking the report's", s.Ranks)
	}
	if r.Ranks[0].DPRank != 2 || !r.ReportTime.Equal(at) || r.ReportTime.Location() == time.UTC {
		t.Error("Stored changed its argument")
	}
	if Stored(&domain.Report{Ranks: []domain.RankLoad{}}).Ranks != nil {
		t.Error("no ranks must be stored as nil")
	}
}
