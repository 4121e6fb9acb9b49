package session

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/loadreporter/loadreporter/domain"
)

func monitor(name string, ivl, lease time.Duration) Options {
	return Options{Kind: KindMonitor, Name: name, Config: Config{Interval: ivl, Lease: lease}}
}

func mustAdd(t *testing.T, tb *Table, o Options, now time.Time) *Session {
	t.Helper()
	s, _, err := tb.Add(o, now)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func report(seq uint64) *domain.Report { return &domain.Report{SequenceID: seq} }

func TestReplacementNeverRemovesTheReplacement(t *testing.T) {
	t.Parallel()
	tb := NewTable(DefaultLimits(), Grid{Schedule: Anchored}, epoch)
	old := mustAdd(t, tb, monitor("r1", time.Second, 5*time.Second), ms(0))
	neu, replaced, err := tb.Add(monitor("r1", time.Second, 5*time.Second), ms(10))
	if err != nil || replaced != old {
		t.Fatalf("replaced = %v, err %v", replaced, err)
	}
	if domain.ErrorCode(old.Outbox().Err()) != domain.CodeReplaced {
		t.Fatalf("old session ended with %v, want REPLACED", old.Outbox().Err())
	}
	if tb.Remove(old, nil) {
		t.Fatal("removing the replaced session succeeded")
	}
	if !tb.Live(neu) || tb.Count(KindMonitor) != 1 {
		t.Fatal("the old session's cleanup removed its replacement")
	}
	other := mustAdd(t, tb, monitor("r2", time.Second, 5*time.Second), ms(20))
	if !tb.Live(other) || tb.Count(KindMonitor) != 2 {
		t.Fatal("different router_ids must coexist")
	}
}

func TestMaxSessions(t *testing.T) {
	t.Parallel()
	l := DefaultLimits()
	l.MaxSessions = 2
	tb := NewTable(l, Grid{Schedule: Aligned}, epoch)
	mustAdd(t, tb, monitor("a", time.Second, 5*time.Second), ms(0))
	mustAdd(t, tb, Options{Kind: KindHistory, Config: Config{Interval: time.Second}, NoLease: true}, ms(0))
	mustAdd(t, tb, Options{Kind: KindORCA, Config: Config{Interval: time.Second}, NoLease: true}, ms(0))
	_, _, err := tb.Add(monitor("c", time.Second, 5*time.Second), ms(0))
	if domain.ErrorCode(err) != domain.CodeResourceExhausted {
		t.Fatalf("err = %v, want RESOURCE_EXHAUSTED", err)
	}
	if _, _, err := tb.Add(monitor("a", time.Second, 5*time.Second), ms(1)); err != nil {
		t.Fatalf("replacing at the limit must work: %v", err)
	}
}

// TestPollsNeverRefuseARouter: one-shot polls waiting for the next report
// (a burst of HTTP pollers while the engine is slow) count against a bound
// of their own, so routers still get their MaxSessions.
func TestPollsNeverRefuseARouter(t *testing.T) {
	t.Parallel()
	l := DefaultLimits()
	l.MaxSessions = 2
	tb := NewTable(l, Grid{Schedule: Aligned}, epoch)
	poll := Options{Kind: KindPoll, Name: "poll", Config: Config{Interval: time.Second}, NoLease: true, OneShot: true}
	mustAdd(t, tb, poll, ms(0))
	mustAdd(t, tb, poll, ms(0))
	if _, _, err := tb.Add(poll, ms(0)); domain.ErrorCode(err) != domain.CodeResourceExhausted ||
		!strings.Contains(domain.ErrorMessage(err), "2 polls are waiting") {
		t.Fatalf("third poll: %v, want RESOURCE_EXHAUSTED for polls", err)
	}
	mustAdd(t, tb, monitor("a", time.Second, 5*time.Second), ms(0))
	mustAdd(t, tb, monitor("b", time.Second, 5*time.Second), ms(0))
	if _, _, err := tb.Add(monitor("c", time.Second, 5*time.Second), ms(0)); domain.ErrorCode(err) != domain.CodeResourceExhausted {
		t.Fatalf("third router: %v, want RESOURCE_EXHAUSTED", err)
	}
}

// TestBrowsersNeverRefuseARouter: Watch streams (dashboards, or a client
// opening them by the thousand) count against MaxWatchSessions, apart
// from routers.
func TestBrowsersNeverRefuseARouter(t *testing.T) {
	t.Parallel()
	l := DefaultLimits()
	l.MaxSessions, l.MaxWatchSessions = 1, 2
	tb := NewTable(l, Grid{Schedule: Aligned}, epoch)
	watch := Options{Kind: KindWatch, Config: Config{Interval: time.Second}, NoLease: true}
	mustAdd(t, tb, watch, ms(0))
	mustAdd(t, tb, watch, ms(0))
	if _, _, err := tb.Add(watch, ms(0)); domain.ErrorCode(err) != domain.CodeResourceExhausted ||
		!strings.Contains(domain.ErrorMessage(err), "--max-watch-sessions") {
		t.Fatalf("third browser: %v, want RESOURCE_EXHAUSTED naming --max-watch-sessions", err)
	}
	mustAdd(t, tb, monitor("a", time.Second, 5*time.Second), ms(0))
	if _, _, err := tb.Add(Options{Kind: KindORCA, Config: Config{Interval: time.Second}, NoLease: true}, ms(0)); domain.ErrorCode(err) != domain.CodeResourceExhausted {
		t.Fatalf("an ORCA stream past MaxSessions: %v, want RESOURCE_EXHAUSTED", err)
	}
}

func TestKeepAliveNeverMovesDeadline(t *testing.T) {
	t.Parallel()
	tb := NewTable(DefaultLimits(), Grid{Schedule: Anchored}, epoch)
	s := mustAdd(t, tb, monitor("r", 100*time.Millisecond, time.Second), ms(0))
	tb.Deliver(report(1), ms(0))
	before := s.Next()
	tb.KeepAlive(s, ms(950))
	if !s.Next().Equal(before) {
		t.Fatalf("deadline moved from %v to %v", before, s.Next())
	}
	if got := tb.Sweep(ms(1000)).Expired; len(got) != 0 {
		t.Fatal("lease expired despite keep-alive")
	}
	if got := tb.Sweep(ms(1950)).Expired; len(got) != 1 || domain.ErrorCode(s.Outbox().Err()) != domain.CodeLeaseExpired {
		t.Fatalf("expired %d, err %v", len(got), s.Outbox().Err())
	}
}

func TestNextWakeIncludesLease(t *testing.T) {
	t.Parallel()
	tb := NewTable(DefaultLimits(), Grid{Schedule: Anchored}, epoch)
	if tb.Sweep(ms(0)).HasWake {
		t.Fatal("empty table has a wake time")
	}
	s := mustAdd(t, tb, monitor("r", 30*time.Second, time.Second), ms(0))
	tb.Deliver(report(1), ms(0))
	if w := tb.Sweep(ms(0)).Wake; !w.Equal(ms(1000)) || !s.Next().Equal(ms(30000)) {
		t.Fatalf("wake %v, want the lease expiry at 1s", w.Sub(epoch))
	}
}

func TestDeliverSlowerSessionOnlyAtItsDeadlines(t *testing.T) {
	t.Parallel()
	tb := NewTable(DefaultLimits(), Grid{Schedule: Aligned}, epoch)
	fast := mustAdd(t, tb, monitor("fast", 100*time.Millisecond, time.Minute), ms(0))
	slow := mustAdd(t, tb, monitor("slow", 300*time.Millisecond, time.Minute), ms(0))
	tb.Deliver(report(1), ms(0))
	<-fast.Outbox().Reports()
	<-slow.Outbox().Reports()
	got := map[string][]uint64{}
	for i := 1; i <= 6; i++ {
		now := ms(100 * i)
		if !tb.Sweep(now).Due {
			t.Fatalf("nothing due at %dms", 100*i)
		}
		tb.Deliver(report(uint64(i+1)), now)
		for _, s := range []*Session{fast, slow} {
			select {
			case r := <-s.Outbox().Reports():
				got[s.RouterID()] = append(got[s.RouterID()], r.SequenceID)
			default:
			}
		}
	}
	if len(got["fast"]) != 6 {
		t.Fatalf("fast got %v", got["fast"])
	}
	// slow: first at 0 → grid 300 (≥ 150), then 600.
	if want := []uint64{4, 7}; len(got["slow"]) != 2 || got["slow"][0] != want[0] || got["slow"][1] != want[1] {
		t.Fatalf("slow got %v, want %v", got["slow"], want)
	}
}

func TestOneShotEndsAfterFirstReport(t *testing.T) {
	t.Parallel()
	tb := NewTable(DefaultLimits(), Grid{Schedule: Aligned}, epoch)
	s := mustAdd(t, tb, Options{Kind: KindPoll, Config: Config{Interval: time.Second}, NoLease: true, OneShot: true}, ms(0))
	d, _ := tb.Deliver(report(1), ms(5))
	if d[KindPoll] != 1 || tb.Live(s) || (<-s.Outbox().Reports()).SequenceID != 1 {
		t.Fatal("one-shot session not served once and removed")
	}
	select {
	case <-s.Outbox().Done():
		if s.Outbox().Err() != nil {
			t.Fatalf("one-shot ended with %v", s.Outbox().Err())
		}
	default:
		t.Fatal("one-shot not ended")
	}
}

func TestOutboxLatestWins(t *testing.T) {
	t.Parallel()
	o := NewOutbox()
	if o.Offer(report(1)) {
		t.Fatal("first offer dropped something")
	}
	if !o.Offer(report(2)) || !o.Offer(report(3)) {
		t.Fatal("unread reports must be replaced")
	}
	if r := <-o.Reports(); r.SequenceID != 3 || o.Dropped() != 2 {
		t.Fatalf("got %d, dropped %d", r.SequenceID, o.Dropped())
	}
	select {
	case r := <-o.Reports():
		t.Fatalf("outbox held more than one report: %d", r.SequenceID)
	default:
	}
}

// Notify tells the reader after the fact: when it runs, the report is
// already readable and Done already closed, so a reader woken by it finds
// what woke it.
func TestOutboxNotifiesAfterEachOfferAndTheEnd(t *testing.T) {
	t.Parallel()
	o := NewOutbox()
	var seen []string
	o.Notify(func() {
		select {
		case <-o.Done():
			seen = append(seen, "done")
			return
		default:
		}
		select {
		case r := <-o.Reports():
			seen = append(seen, fmt.Sprint(r.SequenceID))
		default:
			seen = append(seen, "nothing")
		}
	})
	o.Offer(report(1))
	o.Offer(report(2))
	tb := NewTable(DefaultLimits(), Grid{Schedule: Aligned}, epoch)
	s, _, _ := tb.Add(Options{Kind: KindWatch, Name: "w", Config: Config{Interval: time.Second}, NoLease: true}, epoch)
	s.Outbox().Notify(func() { seen = append(seen, "ended") })
	tb.Remove(s, nil)
	o.end(nil)
	o.end(nil) // only the first end counts
	if got := strings.Join(seen, " "); got != "1 2 ended done" {
		t.Fatalf("notified with %q, want %q", got, "1 2 ended done")
	}
}

func TestUpdateMovesDeadline(t *testing.T) {
	t.Parallel()
	for _, sch := range []Schedule{Anchored, Aligned} {
		tb := NewTable(DefaultLimits(), Grid{Schedule: sch}, epoch)
		s := mustAdd(t, tb, monitor("r", time.Second, 5*time.Second), ms(0))
		tb.Deliver(report(1), ms(0))
		tb.Update(s, Config{Interval: 200 * time.Millisecond, Lease: 2 * time.Second}, ms(1010), true)
		want := map[Schedule]time.Time{Anchored: ms(1210), Aligned: ms(1200)}[sch]
		if !s.Next().Equal(want) {
			t.Fatalf("%v: next %v, want %v", sch, s.Next().Sub(epoch), want.Sub(epoch))
		}
		if len(tb.Sweep(ms(3009)).Expired) != 0 || len(tb.Sweep(ms(3010)).Expired) != 1 {
			t.Fatalf("%v: lease not re-anchored at the update", sch)
		}
	}
}

func TestRemovalsDuringPassesTouchEverySession(t *testing.T) {
	t.Parallel()
	tb := NewTable(DefaultLimits(), Grid{Schedule: Aligned}, epoch)
	var polls, monitors []*Session
	for i := range 5 {
		polls = append(polls, mustAdd(t, tb, Options{Kind: KindPoll, Config: Config{Interval: time.Second}, NoLease: true, OneShot: true}, ms(i)))
		monitors = append(monitors, mustAdd(t, tb, monitor(string(rune('a'+i)), time.Second, time.Minute), ms(i)))
	}
	d, _ := tb.Deliver(report(1), ms(10))
	if d[KindPoll] != 5 || d[KindMonitor] != 5 || tb.Len() != 5 {
		t.Fatalf("delivered %v, %d left; every one-shot must be served and removed", d, tb.Len())
	}
	for _, p := range polls {
		if tb.Live(p) {
			t.Fatal("a served one-shot is still live")
		}
	}
	tb.RemoveAll(domain.Errorf(domain.CodeShuttingDown, "bye"))
	for _, m := range monitors {
		if domain.ErrorCode(m.Outbox().Err()) != domain.CodeShuttingDown {
			t.Fatalf("%s not ended", m.RouterID())
		}
	}
	if tb.Len() != 0 || tb.Count(KindMonitor) != 0 {
		t.Fatalf("%d sessions left", tb.Len())
	}
}

func TestDeliverServesInRegistrationOrder(t *testing.T) {
	t.Parallel()
	tb := NewTable(DefaultLimits(), Grid{Schedule: Aligned}, epoch)
	var subs []*Session
	for i := range 50 {
		subs = append(subs, mustAdd(t, tb, monitor(string(rune('A'+i)), time.Second, time.Minute), ms(0)))
	}
	tb.Remove(subs[10], nil)
	prev := uint64(0)
	for _, s := range tb.ordered {
		if s.ID() <= prev {
			t.Fatal("sessions out of registration order")
		}
		prev = s.ID()
	}
}

func TestUpdateWithTheSameIntervalStillMovesTheDeadline(t *testing.T) {
	t.Parallel()
	tb := NewTable(DefaultLimits(), Grid{Schedule: Anchored}, epoch)
	s := mustAdd(t, tb, monitor("r", time.Second, 5*time.Second), ms(0))
	tb.Deliver(report(1), ms(0))
	tb.Update(s, s.Config(), ms(300), false) // lease only: the deadline stays
	if !s.Next().Equal(ms(1000)) {
		t.Fatalf("a lease-only update moved the deadline to %v", s.Next().Sub(epoch))
	}
	tb.Update(s, s.Config(), ms(300), true) // interval present, same value
	if !s.Next().Equal(ms(1300)) {
		t.Fatalf("next %v, want now + interval = 1300ms", s.Next().Sub(epoch))
	}
}

// TestORCASessions: an ORCA session holds no lease, counts against
// MaxSessions under its own kind and is served at its own deadlines.
func TestORCASessions(t *testing.T) {
	t.Parallel()
	l := DefaultLimits()
	l.MaxSessions = 2
	tb := NewTable(l, Grid{Schedule: Aligned}, epoch)
	orca := Options{Kind: KindORCA, Name: "orca", Config: Config{Interval: 100 * time.Millisecond}, NoLease: true}
	s := mustAdd(t, tb, orca, ms(0))
	mustAdd(t, tb, monitor("r", 100*time.Millisecond, time.Second), ms(0))
	if _, _, err := tb.Add(orca, ms(0)); domain.ErrorCode(err) != domain.CodeResourceExhausted {
		t.Fatalf("third session: %v, want RESOURCE_EXHAUSTED", err)
	}
	if tb.Count(KindORCA) != 1 || KindORCA.String() != "orca" {
		t.Fatalf("count %d, name %q", tb.Count(KindORCA), KindORCA)
	}
	if d, _ := tb.Deliver(report(1), ms(0)); d[KindORCA] != 1 || d[KindMonitor] != 1 {
		t.Fatalf("delivered %v", d)
	}
	if got := tb.Sweep(ms(10_000)).Expired; len(got) != 1 || got[0] == s || !tb.Live(s) {
		t.Fatal("only the Monitor session's lease may expire")
	}
}

// DeliverBetween offers a report to every Monitor session that has had
// its first, and moves no deadline.
func TestDeliverBetween(t *testing.T) {
	t.Parallel()
	tbl := NewTable(DefaultLimits(), Grid{}, epochBetween)
	mon, _, err := tbl.Add(Options{Kind: KindMonitor, Name: "r1", Config: Config{Interval: 100 * time.Millisecond, Lease: time.Minute}}, epochBetween)
	if err != nil {
		t.Fatal(err)
	}
	fresh, _, err := tbl.Add(Options{Kind: KindMonitor, Name: "r2", Config: Config{Interval: 100 * time.Millisecond, Lease: time.Minute}}, epochBetween)
	if err != nil {
		t.Fatal(err)
	}
	watch, _, err := tbl.Add(Options{Kind: KindWatch, Name: "w", Config: Config{Interval: 100 * time.Millisecond}, NoLease: true}, epochBetween)
	if err != nil {
		t.Fatal(err)
	}
	orca, _, err := tbl.Add(Options{Kind: KindORCA, Name: "o", Config: Config{Interval: 100 * time.Millisecond}, NoLease: true}, epochBetween)
	if err != nil {
		t.Fatal(err)
	}
	// r1, r2, the watch and the ORCA stream get their first report; r3
	// registers after it.
	tbl.Deliver(&domain.Report{SequenceID: 1}, epochBetween)
	<-mon.Outbox().Reports()
	<-watch.Outbox().Reports()
	<-fresh.Outbox().Reports()
	<-orca.Outbox().Reports()
	late, _, err := tbl.Add(Options{Kind: KindMonitor, Name: "r3", Config: Config{Interval: 100 * time.Millisecond, Lease: time.Minute}}, epochBetween)
	if err != nil {
		t.Fatal(err)
	}
	next := mon.Next()
	delivered, dropped := tbl.DeliverBetween(&domain.Report{SequenceID: 2})
	if delivered[KindMonitor] != 2 || delivered[KindWatch] != 0 || delivered[KindORCA] != 0 || dropped[KindMonitor] != 0 {
		t.Errorf("delivered %v dropped %v, want the 2 Monitor sessions that had a report", delivered, dropped)
	}
	if r := <-mon.Outbox().Reports(); r.SequenceID != 2 {
		t.Errorf("r1 got %d", r.SequenceID)
	}
	select {
	case r := <-late.Outbox().Reports():
		t.Errorf("a session before its first report got %d between the deadlines", r.SequenceID)
	case r := <-watch.Outbox().Reports():
		t.Errorf("a Watch session got %d between the deadlines", r.SequenceID)
	case r := <-orca.Outbox().Reports():
		t.Errorf("an ORCA session got %d between the deadlines", r.SequenceID)
	default:
	}
	if !mon.Next().Equal(next) {
		t.Errorf("the deadline moved from %v to %v", next, mon.Next())
	}
}

var epochBetween = time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
