package session

import (
	"cmp"
	"slices"
	"time"

	"github.com/loadreporter/loadreporter/domain"
)

// Kind is what a session serves.
type Kind int8

// Session kinds. Monitor and ORCA sessions count against
// Limits.MaxSessions; Watch and Poll sessions each against a bound of their
// own; History, which is internal, against none.
const (
	KindMonitor Kind = iota // a router on the Monitor stream
	KindWatch               // a browser on the Watch stream
	KindHistory             // the history recorder
	KindPoll                // a one-shot poller waiting for the next fire
	KindORCA                // an ORCA StreamCoreMetrics stream (no lease)
	numKinds
)

func (k Kind) String() string {
	switch k {
	case KindMonitor:
		return "monitor"
	case KindWatch:
		return "watch"
	case KindHistory:
		return "history"
	case KindPoll:
		return "poll"
	case KindORCA:
		return "orca"
	}
	return "unknown"
}

// PerKind counts something for each session kind, indexed by Kind.
type PerKind [numKinds]int

// Kinds lists every session kind, for metrics.
func Kinds() []Kind { return []Kind{KindMonitor, KindWatch, KindHistory, KindPoll, KindORCA} }

// Session is one registered consumer of reports.
type Session struct {
	id       uint64
	kind     Kind
	routerID string
	cfg      Config
	next     time.Time // next report deadline
	leased   bool      // false: lives until removed
	lease    lease     // the lease, when leased
	first    bool      // no report delivered yet
	oneShot  bool      // ends after its first report
	slot     int       // the session's phase slot (Grid.PhaseSlots)
	outbox   *Outbox
	bucket   *bucket // its deadline's in the index, nil while out of it
	gen      uint32  // its entry in bucket is current while it carries gen
}

// ID is unique among all sessions a table ever held.
func (s *Session) ID() uint64 { return s.id }

// Kind is what the session serves.
func (s *Session) Kind() Kind { return s.kind }

// RouterID is the router's id (Monitor sessions) or a generated name.
func (s *Session) RouterID() string { return s.routerID }

// Config is the session's granted interval and lease.
func (s *Session) Config() Config { return s.cfg }

// Next is the session's next report deadline.
func (s *Session) Next() time.Time { return s.next }

// Slot is the phase slot whose grid the session's deadlines lie on (0
// when the grid has a single phase).
func (s *Session) Slot() int { return s.slot }

// Outbox is where the session's reports arrive.
func (s *Session) Outbox() *Outbox { return s.outbox }

// Table holds the live sessions. It is not safe for concurrent use, but
// Session.Renew may run concurrently with any of its methods.
type Table struct {
	limits Limits
	grid   Grid
	epoch  time.Time
	lastID uint64
	byID   map[uint64]*Session
	// ordered holds the live sessions by ID, i.e. in registration order,
	// the order every fire serves a deadline's sessions in (the index
	// sorts by it): a router's place in the fan-out, and so its report
	// spacing, stays steady from fire to fire. Lease walks, RemoveAll and
	// DeliverBetween walk it.
	ordered  []*Session
	byRouter map[string]*Session // Monitor sessions by router_id
	counts   [numKinds]int
	inSlot   []int // live recurring sessions per phase slot
	// placed, with automatic phases, counts the routers' sessions
	// (Monitor and ORCA) per interval and slot: what placement weighs, so
	// that a browser or the history's session takes no router's room, and
	// a phase opens for an interval only when that interval's own routers
	// fill the ones open. An interval's phases lie on its own grid (a
	// fraction of it), so counting intervals together would open phases
	// of a minority interval on pull times of their own.
	placed map[time.Duration][]int
	// idx indexes the sessions by deadline, and leaseBound (an offset
	// from epoch, as leases keep expiries, or noLeaseBound) lies at or
	// before every live lease's expiry: a look finds what is due, and
	// whether a lease may have run out, without a walk (index.go).
	// boundHolder, when not nil, is the live session whose lease set the
	// bound: while that lease still expires at it, the bound is exact.
	idx         deadlines
	leaseBound  int64
	boundHolder *Session
	// visited counts the sessions Sweep and Deliver looked at, stale
	// index entries included: what the tests check a look costs.
	visited int
}

// NewTable returns an empty table whose aligned grid starts at epoch. The
// grid must be valid (Grid.Validate).
func NewTable(limits Limits, grid Grid, epoch time.Time) *Table {
	return &Table{
		limits: limits, grid: grid, epoch: epoch,
		byID: map[uint64]*Session{}, byRouter: map[string]*Session{},
		inSlot: make([]int, grid.slots()), placed: map[time.Duration][]int{},
		leaseBound: noLeaseBound,
	}
}

// SlotLoads returns how many live recurring sessions each phase slot holds.
func (t *Table) SlotLoads() []int { return slices.Clone(t.inSlot) }

// Limits returns the table's limits.
func (t *Table) Limits() Limits { return t.limits }

// Len is the number of live sessions of every kind.
func (t *Table) Len() int { return len(t.byID) }

// Count is the number of live sessions of kind k.
func (t *Table) Count(k Kind) int { return t.counts[k] }

// Options describe a new session.
type Options struct {
	Kind Kind
	// Name is the router_id for KindMonitor (replacing any live session with
	// the same id) and a label otherwise.
	Name   string
	Config Config
	// NoLease makes the session live until removed (Watch, History, Poll,
	// ORCA).
	NoLease bool
	// OneShot ends the session after its first report (Poll).
	OneShot bool
	// FirstDue overrides the first deadline (default: now, due at once).
	FirstDue time.Time
}

// full says why one more session of kind k does not fit, or nil. Pollers
// and browsers wait in bounds of their own: a burst of polls while the
// engine is slow, or a thousand dashboards (or a client opening Watch
// streams it never reads), must never refuse a router.
func (t *Table) full(k Kind) error {
	switch k {
	case KindHistory:
		return nil
	case KindPoll:
		if n := t.counts[KindPoll]; n >= t.limits.MaxSessions {
			return domain.Errorf(domain.CodeResourceExhausted, "%d polls are waiting for the next report, the limit is %d", n, t.limits.MaxSessions)
		}
	case KindWatch:
		if n := t.counts[KindWatch]; n >= t.limits.MaxWatchSessions {
			return domain.Errorf(domain.CodeResourceExhausted, "%d Watch streams are live, the limit is %d (--max-watch-sessions)", n, t.limits.MaxWatchSessions)
		}
	default:
		if n := t.counts[KindMonitor] + t.counts[KindORCA]; n >= t.limits.MaxSessions {
			return domain.Errorf(domain.CodeResourceExhausted, "%d sessions are live, the limit is %d", n, t.limits.MaxSessions)
		}
	}
	return nil
}

// Add registers a session at now. A Monitor session whose router_id is live
// replaces that session, which is ended with REPLACED and returned. Adding
// beyond its kind's bound fails with RESOURCE_EXHAUSTED (see Kind).
func (t *Table) Add(o Options, now time.Time) (s, replaced *Session, err error) {
	if o.Kind == KindMonitor {
		replaced = t.byRouter[o.Name]
	}
	if replaced == nil {
		if err := t.full(o.Kind); err != nil {
			return nil, nil, err
		}
	}
	if replaced != nil {
		t.remove(replaced, domain.Errorf(domain.CodeReplaced,
			"router_id %q registered again on another stream", o.Name))
	}
	t.lastID++
	s = &Session{
		id: t.lastID, kind: o.Kind, routerID: o.Name, cfg: o.Config,
		next: now, first: true, oneShot: o.OneShot, outbox: NewOutbox(),
		leased: !o.NoLease, lease: lease{base: t.epoch},
	}
	if !o.OneShot { // a one-shot never reaches a grid: it holds no slot
		s.slot = t.place(s)
		t.inSlot[s.slot]++
	}
	if !o.FirstDue.IsZero() {
		s.next = o.FirstDue
	}
	if s.leased {
		s.lease.set(o.Config.Lease, now)
		t.lowerLeaseBound(s)
	}
	t.index(s)
	t.byID[s.id] = s
	t.ordered = append(t.ordered, s) // IDs only grow: stays sorted
	if o.Kind == KindMonitor {
		t.byRouter[o.Name] = s
	}
	t.counts[o.Kind]++
	return s, replaced, nil
}

// Live reports whether s is still in the table.
func (t *Table) Live(s *Session) bool { return s != nil && t.byID[s.id] == s }

// Remove ends s with err (nil: a clean end) if it is still live. It never
// touches another session, so a replaced session's cleanup cannot remove
// its replacement.
func (t *Table) Remove(s *Session, err error) bool {
	if !t.Live(s) {
		return false
	}
	t.remove(s, err)
	return true
}

func (t *Table) remove(s *Session, err error) {
	t.forget(s, err)
	if i, ok := slices.BinarySearchFunc(t.ordered, s.id, func(x *Session, id uint64) int { return cmp.Compare(x.id, id) }); ok {
		t.ordered = slices.Delete(t.ordered, i, i+1)
	}
}

// removeMany ends every session of list with errOf's error in one pass
// over the order from the first of them, where one remove each would
// shift it once each: a fleet whose leases all ran out together (a
// partition), a shutdown, or a burst of polls (the newest sessions: the
// pass covers little more than them).
func (t *Table) removeMany(list []*Session, errOf func(*Session) error) {
	if len(list) <= removeOneByOne { // a poll or two a fire: a search and a shift each beat a pass
		for _, s := range list {
			t.remove(s, errOf(s))
		}
		return
	}
	first := list[0].id
	for _, s := range list {
		first = min(first, s.id)
		t.forget(s, errOf(s))
	}
	i, _ := slices.BinarySearchFunc(t.ordered, first, func(x *Session, id uint64) int { return cmp.Compare(x.id, id) })
	kept := slices.DeleteFunc(t.ordered[i:], func(s *Session) bool { return t.byID[s.id] != s })
	t.ordered = t.ordered[:i+len(kept)]
}

// removeOneByOne is how many sessions removeMany removes one at a time
// rather than in a pass over the order.
const removeOneByOne = 16

// forget ends s and drops it from everything but the order.
func (t *Table) forget(s *Session, err error) {
	delete(t.byID, s.id)
	t.unindex(s)
	if len(t.byID) == 0 {
		t.leaseBound = noLeaseBound // the bound of leases that are gone
	}
	if t.boundHolder == s { // the bound stays one, no longer known exact
		t.boundHolder = nil
	}
	if t.byRouter[s.routerID] == s {
		delete(t.byRouter, s.routerID)
	}
	t.counts[s.kind]--
	if !s.oneShot {
		t.inSlot[s.slot]--
		t.unplace(s, s.cfg.Interval)
	}
	s.outbox.end(err)
}

// RemoveAll ends every session with err.
func (t *Table) RemoveAll(err error) {
	t.removeMany(slices.Clone(t.ordered), func(*Session) error { return err })
}

// KeepAlive renews s's lease to now + lease. It never moves a deadline.
// Session.Renew does the same without the table.
func (t *Table) KeepAlive(s *Session, now time.Time) bool {
	return t.Live(s) && s.Renew(now)
}

// Update applies a validated config at now (docs/routers.md): the lease is always
// re-anchored; when the request carried an interval (moveDeadline), even an
// unchanged one, the next deadline moves per the schedule. A session that
// has not had its first report stays due at once.
func (t *Table) Update(s *Session, cfg Config, now time.Time, moveDeadline bool) bool {
	if !t.Live(s) {
		return false
	}
	if !s.oneShot && cfg.Interval != s.cfg.Interval {
		// The session keeps its slot; with automatic phases its room
		// moves to its new interval's count.
		t.unplace(s, s.cfg.Interval)
		if t.countsAsRouter(s) {
			t.placedFor(cfg.Interval)[s.slot]++
		}
	}
	s.cfg = cfg
	if s.leased {
		s.lease.set(cfg.Lease, now)
		t.lowerLeaseBound(s)
	}
	if moveDeadline && !s.first {
		s.next = t.grid.Schedule.afterUpdate(t.sessionEpoch(s), cfg.Interval, now)
		t.index(s)
	}
	return true
}

// Sweep is what one pass over the table found.
type Sweep struct {
	Expired []*Session // ended by this pass with LEASE_EXPIRED
	Due     bool       // a live session's deadline is at or before now
	DueAt   time.Time  // when Due: the earliest of those deadlines
	Wake    time.Time  // the earliest deadline or lease expiry among live sessions
	HasWake bool       // false when no session lives
}

// Sweep looks at the table: it ends every session whose lease ran out at
// or before now, then reports, over the sessions left, whether one is due
// and when the next deadline or expiry is. It costs what it finds, not
// what the table holds: the deadlines are indexed (index.go), and the
// leases, which renew without the table, are walked only when a lower
// bound on their expiries says that one may have run out by now, or may
// run out before the next deadline and is not known to be the earliest
// expiry (boundExact); that walk makes the bound exact, so Wake is
// exactly the earliest deadline or expiry. The look before a fire, whose
// deadline is due, thus walks only when a lease may have run out, the
// look after one about once a lease (BenchmarkFireLook measures both
// against a walk; docs/performance.md has the figures), and the looks
// between fires only once the lease that set the bound moved.
func (t *Table) Sweep(now time.Time) Sweep {
	var out Sweep
	walked := false
	if t.mayExpire(now) {
		out.Expired, walked = t.leasePass(now), true
		t.removeMany(out.Expired, func(s *Session) error {
			return domain.Errorf(domain.CodeLeaseExpired, "no keep_alive within the %d ms lease", s.cfg.Lease.Milliseconds())
		})
	}
	b := t.earliest()
	if b == nil {
		return out
	}
	if !walked && t.leaseBound < int64(b.key) && !t.boundExact() {
		t.leasePass(now) // ends nothing: no lease ran out by now
	}
	out.Wake, out.HasWake = b.at, true
	if b.key <= t.offset(now) {
		out.Due, out.DueAt = true, b.at
	}
	if t.leaseBound != noLeaseBound {
		if e := t.epoch.Add(time.Duration(t.leaseBound)); e.Before(out.Wake) {
			out.Wake = e
		}
	}
	return out
}

// Deliver gives r to every session due at or before at (the pull-completion
// time, so sessions that registered during the pull share it), advances
// their deadlines, removes one-shot sessions, and returns how many sessions
// received r per kind and how many of them had to drop an unread report.
// It looks at the due sessions only: those of the earliest deadline first,
// the sessions of one deadline in registration order.
func (t *Table) Deliver(r *domain.Report, at time.Time) (delivered, dropped PerKind) {
	var served []*Session // one-shots, removed after the pass
	due := t.takeDue(at)
	for _, s := range due {
		if t.serve(s, r, at, &delivered, &dropped) {
			served = append(served, s)
			continue
		}
		t.index(s)
	}
	clear(due) // the table's scratch holds no session past the call
	t.removeMany(served, func(*Session) error { return nil })
	return delivered, dropped
}

// serve offers r to s, due at or before at, counts it, and moves s's
// deadline; it reports whether s was a one-shot, which the caller removes.
func (t *Table) serve(s *Session, r *domain.Report, at time.Time, delivered, dropped *PerKind) (oneShot bool) {
	if s.outbox.Offer(r) {
		dropped[s.kind]++
	}
	delivered[s.kind]++
	if s.oneShot {
		return true
	}
	s.next = t.grid.Schedule.afterReport(t.sessionEpoch(s), s.cfg.Interval, s.next, at, s.first)
	s.first = false
	return false
}

// DeliverBetween offers r to every Monitor session that has had its first
// report, between its deadlines: none moves, and a session that reads
// slowly keeps only the latest report in its outbox, as ever. It counts
// what it offered and what the offers replaced.
func (t *Table) DeliverBetween(r *domain.Report) (delivered, dropped PerKind) {
	for _, s := range t.ordered {
		if s.kind != KindMonitor || s.first {
			continue
		}
		if s.outbox.Offer(r) {
			dropped[s.kind]++
		}
		delivered[s.kind]++
	}
	return delivered, dropped
}

// sessionEpoch is where s's aligned grid starts: the table's epoch moved
// by s's phase within its interval.
func (t *Table) sessionEpoch(s *Session) time.Time {
	return t.epoch.Add(t.grid.phase(s.slot, s.cfg.Interval))
}

// place is the slot a new recurring session joins: with automatic phases
// the first of autoOrder whose routers of the session's interval number
// fewer than AutoPhaseSessions (the least loaded when all are full), else
// the least loaded slot.
func (t *Table) place(s *Session) int {
	if !t.grid.auto() {
		return leastLoaded(t.inSlot)
	}
	counts := t.placedFor(s.cfg.Interval)
	slot := -1
	for _, open := range autoOrder {
		if counts[open] < AutoPhaseSessions {
			slot = open
			break
		}
	}
	if slot < 0 {
		slot = leastLoaded(counts)
	}
	if t.countsAsRouter(s) {
		counts[slot]++
	}
	return slot
}

// unplace takes s out of the automatic phases' count of interval.
func (t *Table) unplace(s *Session, interval time.Duration) {
	if !t.countsAsRouter(s) {
		return
	}
	counts := t.placed[interval]
	if counts == nil {
		return
	}
	counts[s.slot]--
	if slices.IndexFunc(counts, func(n int) bool { return n != 0 }) < 0 {
		delete(t.placed, interval) // no interval the fleet left stays counted
	}
}

// countsAsRouter reports whether s weighs in the automatic phases: a
// router's stream (Monitor, ORCA).
func (t *Table) countsAsRouter(s *Session) bool {
	return t.grid.auto() && !s.oneShot && (s.kind == KindMonitor || s.kind == KindORCA)
}

// placedFor is the automatic phases' count of interval's routers per slot.
func (t *Table) placedFor(interval time.Duration) []int {
	counts := t.placed[interval]
	if counts == nil {
		counts = make([]int, t.grid.slots())
		t.placed[interval] = counts
	}
	return counts
}

// leastLoaded is the first slot holding the fewest sessions.
func leastLoaded(inSlot []int) int {
	best := 0
	for i, n := range inSlot {
		if n < inSlot[best] {
			best = i
		}
	}
	return best
}
