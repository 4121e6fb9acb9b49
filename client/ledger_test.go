package client

import (
	"testing"
	"time"

	pb "github.com/loadreporter/loadreporter/gen/sglang/router/loadmonitor/v1"
)

// t0 is the ledger tests' time zero, a whole millisecond.
var t0 = time.UnixMilli(1_700_000_000_000)

// at is t0 plus ms milliseconds.
func at(ms int64) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

// pulledReport is what a reporter builds from an engine that stamps no
// rank (SGLang's /v1/loads): one rank with running requests, stamped with
// the pull's completion at pulled, which is also the report's time.
func pulledReport(running int64, pulled time.Time) *pb.LoadReport {
	return &pb.LoadReport{ReportTimeUnixMs: pulled.UnixMilli(), Ranks: []*pb.RankLoad{{
		SnapshotTimeUnixMs: pulled.UnixMilli(), NumRunningReqs: running, MaxRunningRequests: 256,
		MaxTotalNumTokens: 400_000, GenThroughput: 100,
	}}}
}

// stampedReport is a report of an engine that stamps its numbers: the
// rank taken at snap, pulled a little later.
func stampedReport(running int64, snap, pulled time.Time) *pb.LoadReport {
	r := pulledReport(running, pulled)
	r.Ranks[0].SnapshotTimeUnixMs = snap.UnixMilli()
	return r
}

// The first report of a rank is taken at its word, and a rank the engine
// stamps counts what was sent before its stamp, the same numbers or not:
// a request sent within the stamp's millisecond, after it, is still
// pending.
func TestLedgerEngineStamps(t *testing.T) {
	var l Ledger
	l.Observe(stampedReport(10, at(-100), at(-90)), at(-89))
	l.Add(at(0).Add(500*time.Microsecond), Request{PromptTokens: 100, Tokens: 300})
	l.Add(at(10), Request{PromptTokens: 50})
	steps := []struct {
		name string
		r    *pb.LoadReport
		want int64 // requests still pending
	}{
		{"stamped before both", stampedReport(10, at(-1), at(5)), 2},
		{"stamped in the first's millisecond", stampedReport(11, at(0), at(5)), 2},
		{"stamped after the first, same numbers", stampedReport(11, at(1), at(20)), 1},
		{"stamped after both", stampedReport(11, at(11), at(30)), 0},
	}
	for _, s := range steps {
		l.Observe(s.r, at(50))
		if got := l.Pending().Requests; got != s.want {
			t.Fatalf("%s: %d pending, want %d", s.name, got, s.want)
		}
	}
}

// A rank stamped by the pull: the same numbers pulled again are the
// engine's old snapshot and age nothing out, however late the pull; new
// numbers were taken after the last pull that showed the old ones and
// count what was sent before it, not what was sent between that pull and
// theirs.
func TestLedgerPullStampsHoldUntilTheNumbersMove(t *testing.T) {
	var l Ledger
	l.Observe(pulledReport(10, at(0)), at(1))
	first := l.Add(at(50), Request{PromptTokens: 512, Tokens: 1024})
	steps := []struct {
		name   string
		r      *pb.LoadReport
		sendAt int64 // > 0: a request sent after observing, at this time
		want   Pending
	}{
		{"the old numbers pulled again", pulledReport(10, at(100)), 150, Pending{Requests: 2, Tokens: 1024, PromptTokens: 512}},
		{"and again, later", pulledReport(10, at(200)), 0, Pending{Requests: 2, Tokens: 1024, PromptTokens: 512}},
		// Taken after the pull at 200: the first (at 50) and the second
		// (at 150) are in them.
		{"numbers that moved", pulledReport(12, at(300)), 250, Pending{Requests: 1}},
		// The third (at 250) may or may not be in the numbers of 300: it
		// counts until numbers taken after 300 come.
		{"the numbers of 300 again", pulledReport(12, at(400)), 0, Pending{Requests: 1}},
		{"numbers taken after 400", pulledReport(13, at(500)), 0, Pending{}},
	}
	for _, s := range steps {
		l.Observe(s.r, time.UnixMilli(s.r.GetReportTimeUnixMs()+1))
		if s.sendAt > 0 {
			l.Add(at(s.sendAt), Request{})
		}
		if got := l.Pending(); got != s.want {
			t.Fatalf("%s: pending %+v, want %+v", s.name, got, s.want)
		}
	}
	l.Done(first) // after it aged out: nothing goes negative
	if got := l.Pending(); got != (Pending{}) {
		t.Fatalf("Done after the age-out: %+v", got)
	}
}

// Numbers that stand still for longer than MaxSnapshotHold are an idle
// engine's: their stamp is trusted again, less the hold.
func TestLedgerHoldIsBounded(t *testing.T) {
	var l Ledger
	l.Observe(pulledReport(0, at(0)), at(0))
	l.Add(at(10), Request{Tokens: 5})
	hold := MaxSnapshotHold.Milliseconds()
	l.Observe(pulledReport(0, at(10+hold)), at(10+hold))
	if got := l.Pending().Requests; got != 1 {
		t.Fatalf("held for exactly MaxSnapshotHold: %d pending, want 1", got)
	}
	l.Observe(pulledReport(0, at(11+hold)), at(11+hold))
	if got := l.Pending().Requests; got != 0 {
		t.Fatalf("held past MaxSnapshotHold: %d pending, want 0", got)
	}
}

// A report counts what every one of its ranks counts; a rank without a
// stamp counts as pulled at its arrival; a report without ranks, the
// report observed last, and an older report seen late change nothing.
func TestLedgerObserveEdges(t *testing.T) {
	two := func(a, b time.Time, running int64) *pb.LoadReport {
		r := stampedReport(running, a, at(1000))
		r.Ranks = append(r.Ranks, &pb.RankLoad{DpRank: 1, SnapshotTimeUnixMs: b.UnixMilli(), NumRunningReqs: running})
		return r
	}
	var l Ledger
	l.Add(at(10), Request{})
	for _, s := range []struct {
		name string
		r    *pb.LoadReport
		want int64
	}{
		{"unreachable", &pb.LoadReport{Status: pb.ReportStatus_REPORT_STATUS_UNREACHABLE}, 1},
		{"one rank after, one before", two(at(20), at(5), 3), 1},
		{"every rank after", two(at(20), at(30), 4), 0},
	} {
		l.Observe(s.r, at(1001))
		if got := l.Pending().Requests; got != s.want {
			t.Fatalf("%s: %d pending, want %d", s.name, got, s.want)
		}
	}

	var u Ledger
	unstamped := pulledReport(7, at(0))
	unstamped.Ranks[0].SnapshotTimeUnixMs = 0
	u.Observe(unstamped, at(0))
	u.Add(at(10), Request{})
	moved := pulledReport(8, at(0))
	moved.Ranks[0].SnapshotTimeUnixMs = 0
	u.Observe(moved, at(5)) // taken after the arrival at 0: before the request
	if got := u.Pending().Requests; got != 1 {
		t.Fatalf("unstamped numbers received before the request: %d pending, want 1", got)
	}
	again := pulledReport(9, at(0))
	again.Ranks[0].SnapshotTimeUnixMs = 0
	u.Observe(again, at(20)) // taken after the arrival at 5
	if got := u.Pending().Requests; got != 1 {
		t.Fatalf("unstamped numbers taken after 5: %d pending, want 1 (sent at 10)", got)
	}
	third := pulledReport(10, at(0))
	third.Ranks[0].SnapshotTimeUnixMs = 0
	u.Observe(third, at(30)) // taken after the arrival at 20
	if got := u.Pending().Requests; got != 0 {
		t.Fatalf("unstamped numbers taken after 20: %d pending, want 0", got)
	}

	var o Ledger
	late := pulledReport(1, at(100))
	o.Observe(pulledReport(1, at(0)), at(0))
	o.Add(at(50), Request{})
	o.Observe(late, at(100))
	o.Observe(pulledReport(2, at(60)), at(101)) // older than the last: not news
	o.Observe(late, at(300))                    // the latest report again
	if got := o.Pending().Requests; got != 1 {
		t.Fatalf("after an older report and a repeat: %d pending, want 1", got)
	}
	o.Observe(pulledReport(2, at(200)), at(201))
	if got := o.Pending().Requests; got != 0 {
		t.Fatalf("numbers taken after 100: %d pending, want 0", got)
	}
}

// A worker that renumbers its ranks at every report leaves the ledger
// remembering only the ranks of the last one.
func TestLedgerForgetsRanksThatLeft(t *testing.T) {
	var l Ledger
	for i := range int64(100) {
		r := pulledReport(i, at(i))
		r.Ranks[0].DpRank = int32(i)
		r.Ranks = append(r.Ranks, &pb.RankLoad{DpRank: int32(1000 + i), SnapshotTimeUnixMs: at(i).UnixMilli()})
		l.Observe(r, at(i))
	}
	if len(l.ranks) != 2 {
		t.Fatalf("%d ranks remembered, want the last report's 2", len(l.ranks))
	}
}

// What a request counts: a negative size as 0, an unknown prompt as its
// Tokens; Done once; Reset forgets everything, and a Done after it
// counts nothing down.
func TestLedgerCounts(t *testing.T) {
	var l Ledger
	a := l.Add(at(0), Request{Tokens: 700})
	b := l.Add(at(1), Request{Tokens: -5, PromptTokens: -1})
	c := l.Add(at(2), Request{Tokens: 900, PromptTokens: 300})
	if got, want := l.Pending(), (Pending{Requests: 3, Tokens: 1600, PromptTokens: 1000}); got != want {
		t.Fatalf("pending %+v, want %+v", got, want)
	}
	l.Done(a)
	l.Done(a)
	l.Done(nil)
	if got, want := l.Pending(), (Pending{Requests: 2, Tokens: 900, PromptTokens: 300}); got != want {
		t.Fatalf("after Done: %+v, want %+v", got, want)
	}
	l.Done(b)
	l.Reset()
	l.Done(c)
	if got := l.Pending(); got != (Pending{}) {
		t.Fatalf("after Reset: %+v", got)
	}
	l.Add(at(3), Request{PromptTokens: 4})
	if got := l.Pending(); got != (Pending{Requests: 1, PromptTokens: 4}) {
		t.Fatalf("a Ledger used again after Reset: %+v", got)
	}
}

// A router that never calls Done, to a worker that never reports, keeps
// at most maxPendingDispatches: the oldest are forgotten.
func TestLedgerIsBounded(t *testing.T) {
	var l Ledger
	first := l.Add(at(1), Request{Tokens: 1})
	for range maxPendingDispatches + 10 {
		l.Add(at(1), Request{Tokens: 1})
	}
	if got := l.Pending(); got.Requests != maxPendingDispatches || got.Tokens != maxPendingDispatches {
		t.Fatalf("pending %+v, want %d", got, maxPendingDispatches)
	}
	l.Done(first) // forgotten: nothing changes
	if got := l.Pending(); got.Requests != maxPendingDispatches {
		t.Fatalf("pending %+v after a forgotten Done", got)
	}
	if len(l.q)-l.head > 2*maxPendingDispatches+64 {
		t.Fatalf("%d records kept for %d counted", len(l.q)-l.head, l.live)
	}
}

// Done in any order keeps the records in proportion to what is counted.
func TestLedgerDoneOutOfOrderIsTidied(t *testing.T) {
	var l Ledger
	long := l.Add(at(1), Request{}) // one long request holds the head
	for range 10_000 {
		l.Done(l.Add(at(2), Request{}))
	}
	if n := len(l.q) - l.head; n > 2*l.live+64 {
		t.Fatalf("%d records kept for %d counted", n, l.live)
	}
	l.Done(long)
	if got := l.Pending(); got != (Pending{}) || len(l.q) != l.head {
		t.Fatalf("pending %+v, %d records", got, len(l.q)-l.head)
	}
}
