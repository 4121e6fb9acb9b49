package session

import (
	"slices"
	"time"
)

// With automatic phases, the routers arriving on one connection (Options.Conn)
// share a phase where they can: the connection's home, one per interval.
// A fire then writes many frames to a few connections instead of a few
// frames to every one, and each connection a fire touches costs a write,
// a wakeup of its writer and, with most clients, a PING to answer.
//
// A connection's first router joins the open phases as any router does
// (place), and that phase becomes its home. Its later routers join the
// home while it has room. Once it is full the connection moves home: to a
// phase with room no other connection calls home, in the order the
// phases open, else to the one with room fewest call home, else to the
// least loaded. Once every phase is full, a home has room while it holds
// fewer than homeSlack routers more than the least loaded phase, so the
// phases stay within that of each other as the fleet grows. Sessions keep
// their slot whatever their connection's home does.
type home struct {
	key  homeKey
	slot int
	n    int // the connection's live routers of the interval
}

type homeKey struct {
	interval time.Duration
	conn     string
}

// homeSlack is how far past the least loaded phase a full phase may grow
// while it is a connection's home.
const homeSlack = AutoPhaseSessions / 4

// roomy reports whether slot has room for one more router of the
// interval whose per-slot counts are counts.
func roomy(counts []int, slot int) bool {
	if counts[slot] < AutoPhaseSessions {
		return true
	}
	least := slices.Min(counts)
	return least >= AutoPhaseSessions && counts[slot] < least+homeSlack
}

// placeHome is the slot for router s arriving on a connection: its home's
// while that has room, else a new home's; it records the choice.
func (t *Table) placeHome(s *Session, conn string, counts []int) int {
	key := homeKey{s.cfg.Interval, conn}
	h := t.homes[key]
	homed := t.homedFor(s.cfg.Interval)
	var slot int
	switch {
	case h == nil:
		slot = firstOpen(counts)
		h = &home{key: key, slot: slot}
		t.homes[key] = h
		homed[slot]++
	case roomy(counts, h.slot):
		slot = h.slot
	default:
		homed[h.slot]--
		slot = rehome(counts, homed)
		h.slot = slot
		homed[slot]++
	}
	h.n++
	s.home = h
	return slot
}

// rehome is the new home of a connection whose home is full.
func rehome(counts, homed []int) int {
	best := -1
	for _, slot := range autoOrder {
		if !roomy(counts, slot) {
			continue
		}
		if homed[slot] == 0 {
			return slot
		}
		if best < 0 || homed[slot] < homed[best] {
			best = slot
		}
	}
	if best >= 0 {
		return best
	}
	return leastLoaded(counts)
}

// leaveHome takes s out of its connection's home, which goes once the
// connection has no router of the interval left.
func (t *Table) leaveHome(s *Session) {
	h := s.home
	if h == nil {
		return
	}
	s.home = nil
	if h.n--; h.n > 0 {
		return
	}
	delete(t.homes, h.key)
	homed := t.homed[h.key.interval]
	homed[h.slot]--
	if slices.IndexFunc(homed, func(n int) bool { return n != 0 }) < 0 {
		delete(t.homed, h.key.interval)
	}
}

// homedFor counts, per slot, the connections whose home of interval it is.
func (t *Table) homedFor(interval time.Duration) []int {
	homed := t.homed[interval]
	if homed == nil {
		homed = make([]int, t.grid.slots())
		t.homed[interval] = homed
	}
	return homed
}
