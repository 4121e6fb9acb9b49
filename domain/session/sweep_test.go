package session

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/loadreporter/loadreporter/domain"
)

// Sweep must end expired sessions before it looks for due ones and the
// next wake: a session whose lease ran out is neither due nor a wake.
func TestSweepExpiresThenLooksAtWhatIsLeft(t *testing.T) {
	t.Parallel()
	tb := NewTable(DefaultLimits(), Grid{Schedule: Anchored}, epoch)
	if sw := tb.Sweep(ms(0)); sw.HasWake || sw.Due || len(sw.Expired) != 0 {
		t.Fatalf("empty table: %+v", sw)
	}
	short := mustAdd(t, tb, monitor("short", 50*time.Millisecond, time.Second), ms(0)) // due at once, lease to 1 s
	long := mustAdd(t, tb, monitor("long", 300*time.Millisecond, time.Minute), ms(0))  // due at once, lease to 60 s
	history := mustAdd(t, tb, Options{Kind: KindHistory, Config: Config{Interval: 5 * time.Second}, NoLease: true}, ms(0))
	tb.Deliver(report(1), ms(0)) // next: short 50 ms, long 300 ms, history 5 s

	if sw := tb.Sweep(ms(10)); sw.Due || !sw.Wake.Equal(ms(50)) || len(sw.Expired) != 0 {
		t.Fatalf("at 10 ms: due %v, wake %v, expired %d; want not due, wake at 50 ms, none expired", sw.Due, sw.Wake.Sub(epoch), len(sw.Expired))
	}
	if sw := tb.Sweep(ms(60)); !sw.Due || !sw.DueAt.Equal(ms(50)) || !sw.Wake.Equal(ms(50)) {
		t.Fatalf("at 60 ms: due %v since %v, wake %v; want due since 50 ms, wake at 50 ms", sw.Due, sw.DueAt.Sub(epoch), sw.Wake.Sub(epoch))
	}
	// At 1 s short's lease runs out, its deadline (50 ms) long past: it
	// goes, and what is left is long's deadline at 300 ms.
	sw := tb.Sweep(ms(1000))
	if len(sw.Expired) != 1 || sw.Expired[0] != short || tb.Live(short) {
		t.Fatalf("at 1 s expired %v, want only short", sw.Expired)
	}
	if domain.ErrorCode(short.Outbox().Err()) != domain.CodeLeaseExpired {
		t.Fatalf("short ended with %v, want LEASE_EXPIRED", short.Outbox().Err())
	}
	if !sw.Due || !sw.DueAt.Equal(ms(300)) || !sw.Wake.Equal(ms(300)) || !tb.Live(long) || !tb.Live(history) {
		t.Fatalf("at 1 s: due %v since %v, wake %v; want long due since 300 ms and history live", sw.Due, sw.DueAt.Sub(epoch), sw.Wake.Sub(epoch))
	}
	// Anchored, missed ticks skipped: long's next deadline is 1.2 s.
	tb.Deliver(report(2), ms(1000))
	if sw := tb.Sweep(ms(1001)); sw.Due || !sw.Wake.Equal(ms(1200)) {
		t.Fatalf("after the delivery: due %v, wake %v; want not due, wake at 1.2 s", sw.Due, sw.Wake.Sub(epoch))
	}
	// A lease expiry earlier than every deadline is the wake.
	tb.Update(long, Config{Interval: time.Minute, Lease: time.Second}, ms(1001), true)
	if sw := tb.Sweep(ms(1002)); !sw.Wake.Equal(ms(2001)) {
		t.Fatalf("wake %v, want long's lease expiry at 2.001 s", sw.Wake.Sub(epoch))
	}
}

// DueAt is the earliest of the due deadlines, wherever its session sits
// in the table: the fire's lateness is measured from it.
func TestSweepDueAtIsTheEarliestDueDeadline(t *testing.T) {
	t.Parallel()
	tb := NewTable(DefaultLimits(), Grid{Schedule: Anchored}, epoch)
	mustAdd(t, tb, monitor("a", 50*time.Millisecond, time.Minute), ms(0))
	mustAdd(t, tb, monitor("b", 30*time.Millisecond, time.Minute), ms(0))
	mustAdd(t, tb, monitor("c", 200*time.Millisecond, time.Minute), ms(0))
	tb.Deliver(report(1), ms(0)) // next: a 50 ms, b 30 ms, c 200 ms
	if sw := tb.Sweep(ms(100)); !sw.Due || !sw.DueAt.Equal(ms(30)) {
		t.Fatalf("at 100 ms: due %v since %v; want due since 30 ms", sw.Due, sw.DueAt.Sub(epoch))
	}
	if sw := tb.Sweep(ms(20)); sw.Due || !sw.DueAt.IsZero() {
		t.Fatalf("at 20 ms: due %v since %v; want nothing due", sw.Due, sw.DueAt)
	}
}

// The fire loop's look at the table, at 1 000 and 10 000 routers at 1 s
// on 10 phases, so that each fire serves a tenth of them (`go test
// ./domain/session -run '^$' -bench FireLook`): look is a Sweep with
// nothing due, what the loop does when its timer wakes early or a router
// joins; fire is one fire's share, the Sweep that finds it due, the
// Deliver to the due routers and the Sweep for the next wake. The walk
// variants run the plain walks the index replaced (walkSweep,
// walkDeliver) on the same table.
func BenchmarkFireLook(b *testing.B) {
	const phases = 10
	type ways struct {
		sweep   func(*Table, time.Time) Sweep
		deliver func(*Table, *domain.Report, time.Time) (PerKind, PerKind)
	}
	for _, n := range []int{1000, 10000} {
		for _, way := range []struct {
			name string
			ways
		}{
			{"", ways{(*Table).Sweep, (*Table).Deliver}},
			{"-walk", ways{(*Table).walkSweep, (*Table).walkDeliver}},
		} {
			b.Run(fmt.Sprintf("sessions=%d/look%s", n, way.name), func(b *testing.B) {
				tb, now := fireLookTable(b, n, phases)
				for b.Loop() {
					if way.sweep(tb, now).Due {
						b.Fatal("due")
					}
				}
			})
			b.Run(fmt.Sprintf("sessions=%d/fire%s", n, way.name), func(b *testing.B) {
				tb, now := fireLookTable(b, n, phases)
				r := report(2)
				i := 0
				for b.Loop() {
					now = now.Add(time.Second / phases)
					sw := way.sweep(tb, now)
					if !sw.Due || !sw.DueAt.Equal(now) {
						b.Fatalf("at %v: due %v at %v", now.Sub(epoch), sw.Due, sw.DueAt.Sub(epoch))
					}
					if d, _ := way.deliver(tb, r, now); d[KindMonitor] != n/phases {
						b.Fatalf("delivered %d, want %d", d[KindMonitor], n/phases)
					}
					if sw := way.sweep(tb, now); sw.Due || len(sw.Expired) != 0 {
						b.Fatal("due after the fire")
					}
					if i++; i%1000 == 0 { // the routers' keep-alives, off the clock
						b.StopTimer()
						for _, s := range tb.ordered {
							s.Renew(now)
						}
						b.StartTimer()
					}
				}
			})
		}
		// What the look costs once a lease, when the leases' bound comes
		// before the next deadline (and, with a lease run out, at it).
		b.Run(fmt.Sprintf("sessions=%d/lease-walk", n), func(b *testing.B) {
			tb, now := fireLookTable(b, n, phases)
			for b.Loop() {
				if len(tb.leasePass(now)) != 0 {
					b.Fatal("expired")
				}
			}
		})
	}
}

// fireLookTable is n routers at 1 s on phases phases, each had its first
// report at 0, and the moment just before the first fire of the next
// phase due (each phase's first deadline is at least half an interval
// after the first report).
func fireLookTable(b *testing.B, n, phases int) (*Table, time.Time) {
	tb := NewTable(Limits{MaxSessions: n, MinInterval: time.Millisecond, MaxInterval: time.Hour, MinLease: time.Second, MaxLease: time.Hour},
		Grid{Schedule: Aligned, PhaseSlots: phases}, epoch)
	for i := range n {
		mustAddB(b, tb, monitor(fmt.Sprint("r", i), time.Second, time.Hour), ms(0))
	}
	tb.Deliver(report(1), ms(0))
	return tb, ms(400)
}

func mustAddB(b *testing.B, tb *Table, o Options, now time.Time) {
	b.Helper()
	if _, _, err := tb.Add(o, now); err != nil {
		b.Fatal(err)
	}
}

// A fleet whose leases all run out at once (a partition), and a shutdown,
// end thousands of sessions in one look: one removal each against one pass
// over the order, side by side (`go test ./domain/session -run '^$' -bench
// MassEnd`).
func BenchmarkMassEnd(b *testing.B) {
	expired := func(s *Session) error {
		return domain.Errorf(domain.CodeLeaseExpired, "no keep_alive within the %d ms lease", s.cfg.Lease.Milliseconds())
	}
	for _, n := range []int{1000, 10000} {
		fill := func(b *testing.B) *Table {
			tb := NewTable(Limits{MaxSessions: n, MinInterval: time.Millisecond, MaxInterval: time.Hour, MinLease: time.Second, MaxLease: time.Hour},
				Grid{Schedule: Aligned}, epoch)
			for i := range n {
				mustAddB(b, tb, monitor(fmt.Sprint("r", i), time.Second, time.Second), ms(0))
			}
			return tb
		}
		for _, way := range []struct {
			name string
			end  func(tb *Table, all []*Session)
		}{
			{"one-removal-each", func(tb *Table, all []*Session) {
				for _, s := range all {
					tb.remove(s, expired(s))
				}
			}},
			{"one-pass", func(tb *Table, all []*Session) { tb.removeMany(all, expired) }},
		} {
			b.Run(fmt.Sprintf("sessions=%d/%s", n, way.name), func(b *testing.B) {
				for b.Loop() {
					b.StopTimer()
					tb := fill(b)
					all := slices.Clone(tb.ordered)
					b.StartTimer()
					way.end(tb, all)
				}
			})
		}
	}
}

// TestMassExpiryKeepsTheRestInOrder: half of a table's sessions, every
// other one, run out of lease in one look (more than are removed one at a
// time); the rest stay live, counted and served in registration order, and
// RemoveAll ends them all.
func TestMassExpiryKeepsTheRestInOrder(t *testing.T) {
	t.Parallel()
	tb := NewTable(Limits{MaxSessions: 100, MinInterval: time.Millisecond, MaxInterval: time.Hour, MinLease: time.Second, MaxLease: time.Hour},
		Grid{Schedule: Aligned, PhaseSlots: 4}, epoch)
	var kept []*Session
	for i := range 100 {
		lease := time.Second
		if i%2 == 1 {
			lease = time.Hour
		}
		s := mustAdd(t, tb, monitor(fmt.Sprint("r", i), time.Second, lease), ms(0))
		if i%2 == 1 {
			kept = append(kept, s)
		}
	}
	sw := tb.Sweep(ms(1500))
	if len(sw.Expired) != 50 || tb.Len() != 50 || tb.Count(KindMonitor) != 50 {
		t.Fatalf("%d expired, %d live (%d monitor), want 50 and 50", len(sw.Expired), tb.Len(), tb.Count(KindMonitor))
	}
	for _, s := range sw.Expired {
		if tb.Live(s) || domain.ErrorCode(s.Outbox().Err()) != domain.CodeLeaseExpired {
			t.Fatalf("expired session %s: live %v, ended with %v", s.RouterID(), tb.Live(s), s.Outbox().Err())
		}
	}
	if !slices.Equal(tb.ordered, kept) {
		t.Fatal("the sessions left are not the long-leased ones in registration order")
	}
	if n := sumOf(tb.SlotLoads()); n != 50 {
		t.Fatalf("phase slots hold %d sessions, want 50", n)
	}
	tb.RemoveAll(domain.Errorf(domain.CodeShuttingDown, "bye"))
	if tb.Len() != 0 || len(tb.ordered) != 0 || sumOf(tb.SlotLoads()) != 0 || domain.ErrorCode(kept[0].Outbox().Err()) != domain.CodeShuttingDown {
		t.Fatalf("after RemoveAll: %d live, %d ordered, slots %v", tb.Len(), len(tb.ordered), tb.SlotLoads())
	}
}

func sumOf(xs []int) (n int) {
	for _, x := range xs {
		n += x
	}
	return n
}
