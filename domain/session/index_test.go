package session

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/loadreporter/loadreporter/domain"
)

// walkSweep is Sweep as a plain walk over the table, the algorithm the
// index replaced: the reference the indexed Sweep is checked against.
func (t *Table) walkSweep(now time.Time) Sweep {
	var out Sweep
	for _, s := range t.ordered {
		if s.leased && s.lease.sweep(now) {
			out.Expired = append(out.Expired, s)
			continue
		}
		if !s.next.After(now) && (!out.Due || s.next.Before(out.DueAt)) {
			out.Due, out.DueAt = true, s.next
		}
		if !out.HasWake || s.next.Before(out.Wake) {
			out.Wake, out.HasWake = s.next, true
		}
		if s.leased {
			if e := s.lease.expires(); e.Before(out.Wake) {
				out.Wake = e
			}
		}
	}
	t.removeMany(out.Expired, func(s *Session) error {
		return domain.Errorf(domain.CodeLeaseExpired, "no keep_alive within the %d ms lease", s.cfg.Lease.Milliseconds())
	})
	return out
}

// walkDeliver is Deliver as a plain walk in registration order, the
// reference of the indexed Deliver. It moves deadlines without the index:
// a table driven by the walks never uses its index.
func (t *Table) walkDeliver(r *domain.Report, at time.Time) (delivered, dropped PerKind) {
	var served []*Session
	for _, s := range t.ordered {
		if !s.next.After(at) && t.serve(s, r, at, &delivered, &dropped) {
			served = append(served, s)
		}
	}
	t.removeMany(served, func(*Session) error { return nil })
	return delivered, dropped
}

// outboxEvent is what an outbox told its Notify: a report offered, or
// the session's end.
type outboxEvent struct {
	id  uint64
	end bool
}

// twin is one table of an equivalence run and what its outboxes told.
type twin struct {
	tb       *Table
	sessions []*Session // every session added, live or not, in order
	events   []outboxEvent
}

func (w *twin) add(t *testing.T, o Options, now time.Time) error {
	t.Helper()
	s, _, err := w.tb.Add(o, now)
	if err != nil {
		return err
	}
	ob := s.Outbox()
	ob.Notify(func() {
		select {
		case <-ob.Done():
			w.events = append(w.events, outboxEvent{s.id, true})
		default:
			w.events = append(w.events, outboxEvent{s.id, false})
		}
	})
	w.sessions = append(w.sessions, s)
	return nil
}

// TestIndexMatchesTheWalk drives an indexed table (Sweep, Deliver) and a
// reference one (walkSweep, walkDeliver) through the same seeded random
// sessions' lives over a fake clock, on every kind of grid, and compares:
//   - every Sweep's result field by field (the same sessions Expired in the
//     same order; Due; DueAt, Wake by time.Equal; HasWake): exactly,
//     since the lease bound is made exact whenever it, not a deadline,
//     would be the wake;
//   - every Deliver's delivered and dropped counts per kind, and the order
//     the outboxes were offered the report and served one-shots ended in:
//     the reference's order, stably sorted by the deadline each session
//     was due at (the index serves the earliest deadline first, each
//     deadline's sessions in registration order, as the walk does);
//   - after every step, the outbox events of steps that deliver nothing
//     (ends by replacement, removal, expiry, RemoveAll) in the same order,
//     the reports read back, and the tables' state: the live sessions in
//     order with their deadlines, first-report flag, slot, config and
//     lease expiry, the counts per kind and per slot;
//   - and the index's own invariants (checkIndex).
func TestIndexMatchesTheWalk(t *testing.T) {
	t.Parallel()
	intervals := []time.Duration{20 * time.Millisecond, 50 * time.Millisecond, 100 * time.Millisecond, 300 * time.Millisecond, time.Second}
	leases := []time.Duration{80 * time.Millisecond, 250 * time.Millisecond, time.Second, 5 * time.Second}
	for _, r := range []equivalenceRun{
		{"anchored", Grid{Schedule: Anchored}, 40, intervals, leases, 30, 12},
		{"aligned", Grid{Schedule: Aligned}, 40, intervals, leases, 30, 12},
		{"aligned-4-phases", Grid{Schedule: Aligned, PhaseSlots: 4}, 40, intervals, leases, 30, 12},
		{"aligned-10-phases", Grid{Schedule: Aligned, PhaseSlots: 10}, 60, intervals, leases, 30, 12},
		// Phases open for an interval's hundred routers: mostly one
		// interval, long leases and more joins (a table ten times the
		// others', so fewer seeds).
		{"aligned-auto-phases", Grid{Schedule: Aligned, PhaseSlots: AutoPhaseSlots}, 400,
			[]time.Duration{100 * time.Millisecond, 100 * time.Millisecond, 100 * time.Millisecond, 300 * time.Millisecond},
			[]time.Duration{5 * time.Second, time.Hour}, 90, 3},
	} {
		for seed := range r.seeds {
			t.Run(fmt.Sprintf("%s/seed=%d", r.name, seed), func(t *testing.T) {
				t.Parallel()
				r.run(t, seed)
			})
		}
	}
}

// equivalenceRun is one grid's random sessions: how many may live, the
// intervals and leases they ask for, and how often one joins (against
// 100 for every other step).
type equivalenceRun struct {
	name              string
	grid              Grid
	maxSessions       int
	intervals, leases []time.Duration
	addWeight         int
	seeds             uint64
}

func (r equivalenceRun) run(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 0x5e55))
	grid, maxSessions, intervals, leases, addWeight := r.grid, r.maxSessions, r.intervals, r.leases, r.addWeight
	limits := Limits{MaxSessions: maxSessions, MaxWatchSessions: 4, MinInterval: time.Millisecond, MaxInterval: time.Hour, MinLease: time.Millisecond, MaxLease: time.Hour}
	ref := &twin{tb: NewTable(limits, grid, epoch)}
	idx := &twin{tb: NewTable(limits, grid, epoch)}
	pick := func(xs []time.Duration) time.Duration { return xs[rng.IntN(len(xs))] }
	now := ms(0)
	seq := uint64(0)
	steps := 2500
	for step := range steps {
		ref.events, idx.events = ref.events[:0], idx.events[:0]
		what := ""
		delivered := false
		var dueBefore map[uint64]time.Time // for a step that delivers: each session's deadline before it
		deliver := func(at time.Time) {
			// What the step's look ended, before the delivery's events.
			compareEvents(t, step, what, ref.events, idx.events, false, nil)
			ref.events, idx.events = ref.events[:0], idx.events[:0]
			dueBefore = map[uint64]time.Time{}
			for _, s := range ref.tb.ordered {
				dueBefore[s.id] = s.next
			}
			seq++
			r := report(seq)
			rd, rdr := ref.tb.walkDeliver(r, at)
			id, idr := idx.tb.Deliver(r, at)
			if rd != id || rdr != idr {
				t.Fatalf("step %d (%s): delivered %v dropped %v, the walk %v %v", step, what, id, idr, rd, rdr)
			}
			delivered = true
		}
		sweep := func() Sweep {
			rs, is := ref.tb.walkSweep(now), idx.tb.Sweep(now)
			compareSweeps(t, step, what, now, rs, is)
			return is
		}
		both := func(f func(w *twin) error) {
			re, ie := f(ref), f(idx)
			if (re == nil) != (ie == nil) || re != nil && re.Error() != ie.Error() {
				t.Fatalf("step %d (%s): %v, the reference %v", step, what, ie, re)
			}
		}
		pair := func() (*Session, *Session) {
			if len(ref.sessions) == 0 {
				return nil, nil
			}
			i := rng.IntN(len(ref.sessions))
			return ref.sessions[i], idx.sessions[i]
		}
		switch op := rng.IntN(100 + addWeight); {
		case op < addWeight: // a router joins, or one registers again
			o := monitor(fmt.Sprint("r", rng.IntN(maxSessions)), pick(intervals), pick(leases))
			if rng.IntN(6) == 0 {
				o.FirstDue = now.Add(time.Duration(rng.IntN(400)) * time.Millisecond)
			}
			what = fmt.Sprintf("add %s", o.Name)
			both(func(w *twin) error { return w.add(t, o, now) })
		case op < addWeight+5: // a stream without a lease
			kind := []Kind{KindWatch, KindHistory, KindORCA}[rng.IntN(3)]
			o := Options{Kind: kind, Name: kind.String(), Config: Config{Interval: pick(intervals)}, NoLease: true}
			what = "add " + kind.String()
			both(func(w *twin) error { return w.add(t, o, now) })
		case op < addWeight+12: // a poller waits for the next fire
			o := Options{Kind: KindPoll, Name: "poll", Config: Config{Interval: time.Second}, NoLease: true, OneShot: true}
			what = "poll"
			both(func(w *twin) error { return w.add(t, o, now) })
		case op < addWeight+18:
			what = "remove"
			if r, i := pair(); r != nil {
				if ref.tb.Remove(r, nil) != idx.tb.Remove(i, nil) {
					t.Fatalf("step %d: Remove disagrees", step)
				}
			}
		case op < addWeight+30:
			what = "keep-alive"
			if r, i := pair(); r != nil {
				if rng.IntN(2) == 0 {
					if ref.tb.KeepAlive(r, now) != idx.tb.KeepAlive(i, now) {
						t.Fatalf("step %d: KeepAlive disagrees", step)
					}
				} else if r.Renew(now) != i.Renew(now) {
					t.Fatalf("step %d: Renew disagrees", step)
				}
			}
		case op < addWeight+40:
			move := rng.IntN(3) != 0
			what = fmt.Sprintf("update (move %v)", move)
			if r, i := pair(); r != nil {
				cfg := Config{Interval: pick(intervals), Lease: pick(leases)}
				if ref.tb.Update(r, cfg, now, move) != idx.tb.Update(i, cfg, now, move) {
					t.Fatalf("step %d: Update disagrees", step)
				}
			}
		case op < addWeight+58:
			what = "time passes"
			now = now.Add(time.Duration(rng.IntN(120)) * time.Millisecond)
		case op < addWeight+66:
			what = "sweep"
			sweep()
		case op < addWeight+82: // the fire loop: look, fire when due, else sleep until the wake
			what = "fire"
			if sw := sweep(); sw.Due {
				at := now.Add(time.Duration(rng.IntN(8)) * time.Millisecond) // the pull
				deliver(at)
				now = at
			} else if sw.HasWake && sw.Wake.After(now) {
				now = sw.Wake
			}
		case op < addWeight+88:
			what = "deliver without a look"
			deliver(now)
		case op < addWeight+98:
			what = "read"
			if r, i := pair(); r != nil {
				compareReads(t, step, r, i)
			}
		default:
			if rng.IntN(4) == 0 && grid.PhaseSlots != AutoPhaseSlots || rng.IntN(40) == 0 {
				what = "remove all"
				err := domain.Errorf(domain.CodeShuttingDown, "bye")
				ref.tb.RemoveAll(err)
				idx.tb.RemoveAll(err)
			}
		}
		compareEvents(t, step, what, ref.events, idx.events, delivered, dueBefore)
		compareTables(t, step, what, ref.tb, idx.tb)
		checkIndex(t, step, what, idx.tb)
	}
}

func compareSweeps(t *testing.T, step int, what string, now time.Time, ref, got Sweep) {
	t.Helper()
	ids := func(ss []*Session) []uint64 {
		out := []uint64{}
		for _, s := range ss {
			out = append(out, s.id)
		}
		return out
	}
	if !slices.Equal(ids(ref.Expired), ids(got.Expired)) || ref.Due != got.Due || !ref.DueAt.Equal(got.DueAt) ||
		ref.HasWake != got.HasWake || !ref.Wake.Equal(got.Wake) {
		t.Fatalf("step %d (%s) at %v: expired %v due %v at %v, wake %v (%v); the walk: expired %v due %v at %v, wake %v (%v)",
			step, what, now.Sub(epoch), ids(got.Expired), got.Due, got.DueAt.Sub(epoch), got.Wake.Sub(epoch), got.HasWake,
			ids(ref.Expired), ref.Due, ref.DueAt.Sub(epoch), ref.Wake.Sub(epoch), ref.HasWake)
	}
}

// compareEvents checks the outbox events of one step: the same, or, for
// a step that delivered, the reference's stably sorted by the deadline
// each session was due at (offers and ends each).
func compareEvents(t *testing.T, step int, what string, ref, got []outboxEvent, delivered bool, dueBefore map[uint64]time.Time) {
	t.Helper()
	want := slices.Clone(ref)
	if delivered {
		slices.SortStableFunc(want, func(a, b outboxEvent) int {
			if a.end != b.end { // the ends of one-shots follow every offer
				if a.end {
					return 1
				}
				return -1
			}
			return dueBefore[a.id].Compare(dueBefore[b.id])
		})
		if i := slices.IndexFunc(ref, func(e outboxEvent) bool { return e.end }); i >= 0 && slices.ContainsFunc(ref[i:], func(e outboxEvent) bool { return !e.end }) {
			t.Fatalf("step %d (%s): the walk offered a report after a one-shot's end", step, what)
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("step %d (%s): outbox events %v, want %v (the walk's: %v)", step, what, got, want, ref)
	}
}

func compareReads(t *testing.T, step int, ref, got *Session) {
	t.Helper()
	read := func(s *Session) uint64 {
		select {
		case r := <-s.Outbox().Reports():
			return r.SequenceID
		default:
			return 0
		}
	}
	if r, g := read(ref), read(got); r != g {
		t.Fatalf("step %d: session %d read report %d, the reference's %d", step, got.id, g, r)
	}
	if ref.Outbox().Dropped() != got.Outbox().Dropped() || domain.ErrorCode(ref.Outbox().Err()) != domain.ErrorCode(got.Outbox().Err()) {
		t.Fatalf("step %d: session %d dropped %d, ended with %v; the reference %d, %v", step, got.id,
			got.Outbox().Dropped(), got.Outbox().Err(), ref.Outbox().Dropped(), ref.Outbox().Err())
	}
}

func compareTables(t *testing.T, step int, what string, ref, got *Table) {
	t.Helper()
	if ref.Len() != got.Len() || !slices.Equal(ref.SlotLoads(), got.SlotLoads()) || ref.counts != got.counts || len(ref.ordered) != len(got.ordered) {
		t.Fatalf("step %d (%s): %d live %v in slots %v, the reference %d %v in %v", step, what,
			got.Len(), got.counts, got.SlotLoads(), ref.Len(), ref.counts, ref.SlotLoads())
	}
	for i, r := range ref.ordered {
		g := got.ordered[i]
		if r.id != g.id || !r.next.Equal(g.next) || r.first != g.first || r.slot != g.slot || r.cfg != g.cfg ||
			r.leased != g.leased || r.leased && !r.lease.expires().Equal(g.lease.expires()) {
			t.Fatalf("step %d (%s): session %d next %v first %v slot %d cfg %+v lease %v; the reference's %d: %v %v %d %+v %v", step, what,
				g.id, g.next.Sub(epoch), g.first, g.slot, g.cfg, g.lease.expires().Sub(epoch),
				r.id, r.next.Sub(epoch), r.first, r.slot, r.cfg, r.lease.expires().Sub(epoch))
		}
	}
}

// checkIndex checks the index against the table: every live session is
// current in exactly one bucket, its deadline's; every bucket holds a live
// session, is where the map and the heap say, and holds at most about two
// entries a live one; the heap is ordered; the lease bound lies at or
// before every live lease's expiry.
func checkIndex(t *testing.T, step int, what string, tb *Table) {
	t.Helper()
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("step %d (%s): %s", step, what, fmt.Sprintf(format, args...))
	}
	x := &tb.idx
	if len(x.heap) != len(x.buckets) || len(x.heap) > tb.Len() {
		fail("%d buckets in the heap, %d in the map, %d live sessions", len(x.heap), len(x.buckets), tb.Len())
	}
	current := map[uint64]int{}
	for i, b := range x.heap {
		if b.pos != i || x.buckets[b.key] != b || !b.at.Equal(tb.epoch.Add(b.key)) {
			fail("bucket %v misplaced (pos %d of %d, mapped %v)", b.key, b.pos, i, x.buckets[b.key] == b)
		}
		if i > 0 && x.heap[(i-1)/2].key > b.key {
			fail("the heap is out of order at %d", i)
		}
		live := 0
		for _, e := range b.entries {
			if !e.current() {
				continue
			}
			live++
			current[e.s.id]++
			if !tb.Live(e.s) || e.s.bucket != b || tb.offset(e.s.next) != b.key {
				fail("bucket %v holds session %d (live %v) due at %v", b.key, e.s.id, tb.Live(e.s), e.s.next.Sub(epoch))
			}
		}
		if live != b.live || live == 0 || len(b.entries) > 2*live+compactSlack {
			fail("bucket %v: %d entries, %d current, counted %d", b.key, len(b.entries), live, b.live)
		}
	}
	for _, s := range tb.ordered {
		if current[s.id] != 1 {
			fail("session %d is current in %d buckets", s.id, current[s.id])
		}
		if s.leased && s.lease.expiry.Load() < tb.leaseBound {
			fail("session %d's lease expires at %v, before the bound %v", s.id, s.lease.expires().Sub(epoch), time.Duration(tb.leaseBound))
		}
	}
	if h := tb.boundHolder; h != nil && (!tb.Live(h) || !h.leased) {
		fail("the bound's holder, session %d, is gone or has no lease", h.id)
	}
}

// TestALookCostsWhatIsDue: 10 000 routers at 1 s on ten phases, renewing
// their leases at every fire. A look between fires and the look that
// finds a fire due visit no session; a Deliver visits exactly the
// thousand it serves; only the look after a fire walks the leases, when
// their bound comes before the next deadline, about once a lease.
func TestALookCostsWhatIsDue(t *testing.T) {
	t.Parallel()
	const n, phases = 10000, 10
	lease := 2*time.Second + 50*time.Millisecond // the bound falls between two fires
	tb := NewTable(Limits{MaxSessions: n, MinInterval: time.Millisecond, MaxInterval: time.Hour, MinLease: time.Second, MaxLease: time.Hour},
		Grid{Schedule: Aligned, PhaseSlots: phases}, epoch)
	for i := range n {
		mustAdd(t, tb, monitor(fmt.Sprint("r", i), time.Second, lease), ms(0))
	}
	if d, _ := tb.Deliver(report(1), ms(0)); d[KindMonitor] != n || tb.visited != n {
		t.Fatalf("the first fire served %d, visited %d; want every session", d[KindMonitor], tb.visited)
	}
	cost := func(f func()) int {
		before := tb.visited
		f()
		return tb.visited - before
	}
	walks := 0
	for fire := range 60 {
		now := ms(500 + 100*fire) // phase 5's first deadline is the first fire's
		if c := cost(func() {
			if sw := tb.Sweep(now.Add(-50 * time.Millisecond)); sw.Due || !sw.Wake.Equal(now) {
				t.Fatalf("between fires: due %v, wake %v; want the next fire at %v", sw.Due, sw.Wake.Sub(epoch), now.Sub(epoch))
			}
		}); c != 0 {
			t.Fatalf("fire %d: a look between fires visited %d sessions", fire, c)
		}
		if c := cost(func() {
			if sw := tb.Sweep(now); !sw.Due || !sw.DueAt.Equal(now) {
				t.Fatalf("fire %d: due %v at %v", fire, sw.Due, sw.DueAt.Sub(epoch))
			}
		}); c != 0 {
			t.Fatalf("fire %d: the look before the fire visited %d sessions", fire, c)
		}
		var d PerKind
		if c := cost(func() { d, _ = tb.Deliver(report(uint64(fire+2)), now) }); d[KindMonitor] != n/phases || c != n/phases {
			t.Fatalf("fire %d: delivered %d, visited %d; want %d and %d", fire, d[KindMonitor], c, n/phases, n/phases)
		}
		for _, s := range tb.ordered { // the keep-alives: lock-free, no visit
			s.Renew(now)
		}
		switch c := cost(func() {
			if sw := tb.Sweep(now); sw.Due || len(sw.Expired) != 0 || !sw.Wake.Equal(now.Add(100*time.Millisecond)) {
				t.Fatalf("fire %d: after it: due %v, %d expired, wake %v", fire, sw.Due, len(sw.Expired), sw.Wake.Sub(epoch))
			}
		}); c {
		case 0:
		case n:
			walks++
		default:
			t.Fatalf("fire %d: the look after the fire visited %d sessions", fire, c)
		}
	}
	// 6 s of fires, the bound 2.05 s after the last walk's renewals: a
	// walk every 2 s.
	if walks != 3 {
		t.Fatalf("the leases were walked %d times in 6 s, want 3 (once per lease)", walks)
	}
}

// TestLooksBeforeAnExactBoundDoNotWalk: routers at 10 s on 2 s leases,
// the leases' bound before the next deadline. The looks before the bound
// (joins, early wakes) walk the leases only when the lease that set the
// bound moved (renewed, updated, ended), once; renewals of the others
// leave it exact. Every look's result is the plain walk's.
func TestLooksBeforeAnExactBoundDoNotWalk(t *testing.T) {
	t.Parallel()
	const n = 100
	tb := NewTable(Limits{MaxSessions: n, MinInterval: time.Millisecond, MaxInterval: time.Hour, MinLease: time.Millisecond, MaxLease: time.Hour},
		Grid{Schedule: Anchored}, epoch)
	ss := make([]*Session, n)
	for i := range n { // session i's lease runs out at i ms + 2 s
		ss[i] = mustAdd(t, tb, monitor(fmt.Sprint("r", i), 10*time.Second, 2*time.Second), ms(i))
	}
	tb.Deliver(report(1), ms(n))
	step := 0
	look := func(what string, now time.Time, wantWake time.Time, wantWalks int) {
		t.Helper()
		step++
		walks := 0
		for range 5 {
			before := tb.visited
			got := tb.Sweep(now)
			switch c := tb.visited - before; c {
			case 0:
			case tb.Len():
				walks++
			default:
				t.Fatalf("%s: a look visited %d of %d sessions", what, c, tb.Len())
			}
			compareSweeps(t, step, what, now, tb.walkSweep(now), got) // nothing runs out: the walk changes nothing
			if got.Due || !got.Wake.Equal(wantWake) {
				t.Fatalf("%s: due %v, wake %v; want the lease expiry at %v", what, got.Due, got.Wake.Sub(epoch), wantWake.Sub(epoch))
			}
		}
		if walks != wantWalks {
			t.Fatalf("%s: five looks walked the leases %d times, want %d", what, walks, wantWalks)
		}
	}
	look("the bound set by the joins", ms(200), ms(2000), 0)
	for _, s := range ss[1:] {
		s.Renew(ms(1000))
	}
	look("the others renewed", ms(1000), ms(2000), 0)
	ss[0].Renew(ms(1100))
	look("the bound's lease renewed", ms(1100), ms(3000), 1) // the others', renewed at 1 s
	tb.Remove(ss[1], nil)
	look("the bound's session removed", ms(1200), ms(3000), 1)
	tb.Update(ss[2], Config{Interval: 10 * time.Second, Lease: 5 * time.Second}, ms(1300), false)
	look("the bound's lease updated", ms(1300), ms(3000), 1)
	tb.Update(ss[3], Config{Interval: 10 * time.Second, Lease: 500 * time.Millisecond}, ms(1400), false)
	look("a lease shortened below the bound", ms(1400), ms(1900), 0)
	late := monitor("late", 10*time.Second, 300*time.Millisecond)
	late.FirstDue = ms(5000)
	mustAdd(t, tb, late, ms(1500))
	look("a join with a shorter lease", ms(1500), ms(1800), 0)
}

// TestIndexStaysBounded: a router that sends update_config in a loop, a
// full deadline's sessions leaving one by one, and sessions bouncing
// between two deadlines leave the index about two entries a live session
// and one bucket a deadline, however long they go on.
func TestIndexStaysBounded(t *testing.T) {
	t.Parallel()
	for _, sch := range []Schedule{Anchored, Aligned} {
		tb := NewTable(DefaultLimits(), Grid{Schedule: sch}, epoch)
		var ss []*Session
		for i := range 1000 {
			ss = append(ss, mustAdd(t, tb, monitor(fmt.Sprint("r", i), time.Second, time.Minute), ms(0)))
		}
		tb.Deliver(report(1), ms(0)) // all at one deadline
		// update_config in a loop, two routers hopping over seven
		// intervals, back to the fleet's deadline and away again.
		for i := range 20000 {
			now := ms(i / 100)
			tb.Update(ss[i%2], Config{Interval: time.Duration(1+i%7) * 100 * time.Millisecond, Lease: time.Minute}, now, true)
			if i%97 == 0 {
				checkIndex(t, i, sch.String()+" update loop", tb)
			}
		}
		for i, s := range ss[:999] { // leaving one by one
			tb.Remove(s, nil)
			checkIndex(t, i, sch.String()+" leaving", tb)
		}
		if entries := indexEntries(tb); entries > 1+compactSlack || len(tb.idx.heap) != 1 {
			t.Fatalf("%v: one session left, the index holds %d entries in %d buckets", sch, entries, len(tb.idx.heap))
		}
		tb.Remove(ss[999], nil)
		if entries := indexEntries(tb); entries != 0 || len(tb.idx.heap) != 0 || len(tb.idx.buckets) != 0 || tb.leaseBound != noLeaseBound {
			t.Fatalf("%v: an empty table's index holds %d entries in %d buckets, bound %d", sch, entries, len(tb.idx.heap), tb.leaseBound)
		}
	}
}

func indexEntries(tb *Table) (n int) {
	for _, b := range tb.idx.heap {
		n += len(b.entries)
	}
	return n
}

// A bucket's sessions, mixed by an update_config into an earlier
// deadline, are still served in registration order.
func TestDeliverSortsAMixedDeadline(t *testing.T) {
	t.Parallel()
	tb := NewTable(DefaultLimits(), Grid{Schedule: Anchored}, epoch)
	var ss []*Session
	for i := range 5 {
		ss = append(ss, mustAdd(t, tb, monitor(fmt.Sprint("r", i), 100*time.Millisecond, time.Minute), ms(0)))
	}
	tb.Deliver(report(1), ms(0)) // all due at 100 ms
	// The first two leave for 200 ms and come back (anchored: now +
	// interval), after the others in the bucket.
	for _, s := range []*Session{ss[1], ss[0]} {
		tb.Update(s, Config{Interval: 150 * time.Millisecond, Lease: time.Minute}, ms(50), true)
	}
	for _, s := range []*Session{ss[1], ss[0]} {
		tb.Update(s, Config{Interval: 40 * time.Millisecond, Lease: time.Minute}, ms(60), true)
	}
	if b := ss[0].bucket; b != ss[4].bucket || slices.IsSortedFunc(b.entries, func(a, b entry) int { return cmp.Compare(a.s.id, b.s.id) }) {
		t.Fatal("the deadline's sessions are not mixed: the test does not test")
	}
	var order []uint64
	for _, s := range ss {
		<-s.Outbox().Reports()
		s.Outbox().Notify(func() { order = append(order, s.ID()) })
	}
	tb.Deliver(report(2), ms(100))
	if !slices.IsSortedFunc(order, cmp.Compare) || len(order) != 5 {
		t.Fatalf("served in order %v, want registration order", order)
	}
}
