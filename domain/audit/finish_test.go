package audit_test

import (
	"testing"
	"time"

	"github.com/loadreporter/loadreporter/domain/audit"
)

// Both stores answer in this order; a store that computes rows in another
// order (PostgreSQL by partition, memory by report) still lists them alike.
func TestFinishOrdersThenLimits(t *testing.T) {
	t.Parallel()
	at := func(s int) time.Time { return time.Unix(1_700_000_000+int64(s), 0) }
	span := func(w string, s int) audit.Span { return audit.Span{WorkerAddr: w, Start: at(s)} }

	o := audit.OutagesResult{Outages: []audit.Outage{
		{Episode: audit.Episode{Span: span("b", 2)}}, {Episode: audit.Episode{Span: span("a", 2)}}, {Episode: audit.Episode{Span: span("c", 1)}},
	}}
	o.Finish(2)
	if len(o.Outages) != 2 || !o.Truncated || o.Outages[0].WorkerAddr != "c" || o.Outages[1].WorkerAddr != "a" {
		t.Errorf("outages: %+v, truncated %v; want c@1 then a@2, truncated", o.Outages, o.Truncated)
	}

	rs := audit.RankStatsResult{Stats: []audit.RankStat{{WorkerAddr: "b", DPRank: 0}, {WorkerAddr: "a", DPRank: 1}, {WorkerAddr: "a", DPRank: 0}}}
	rs.Finish(3)
	if rs.Truncated || rs.Stats[0] != (audit.RankStat{WorkerAddr: "a", DPRank: 0}) || rs.Stats[1].DPRank != 1 || rs.Stats[2].WorkerAddr != "b" {
		t.Errorf("rank stats: %+v, truncated %v; want a/0, a/1, b/0, not truncated", rs.Stats, rs.Truncated)
	}

	g := audit.GapsResult{
		Gaps:     []audit.Gap{{Span: span("a", 5)}, {Span: span("a", 3)}},
		Restarts: []audit.Restart{{WorkerAddr: "b", FirstTime: at(1)}, {WorkerAddr: "a", FirstTime: at(1)}, {WorkerAddr: "a", FirstTime: at(0)}},
	}
	g.Finish(2)
	if !g.Truncated || !g.Gaps[0].Start.Equal(at(3)) || len(g.Restarts) != 2 ||
		!g.Restarts[0].FirstTime.Equal(at(0)) || g.Restarts[1].WorkerAddr != "a" {
		t.Errorf("gaps %+v, restarts %+v, truncated %v; want gaps from 3 s, restarts a@0 then a@1, truncated by the restarts", g.Gaps, g.Restarts, g.Truncated)
	}

	im := audit.ImbalanceResult{Spans: []audit.Imbalance{{Episode: audit.Episode{Span: span("z", 9)}}, {Episode: audit.Episode{Span: span("y", 8)}}}}
	im.Finish(5)
	if im.Truncated || im.Spans[0].WorkerAddr != "y" {
		t.Errorf("imbalance: %+v, truncated %v; want y@8 first, not truncated", im.Spans, im.Truncated)
	}
}
