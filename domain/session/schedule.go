package session

import (
	"time"

	"github.com/loadreporter/loadreporter/domain"
)

// Schedule decides a session's report deadlines (docs/routers.md).
type Schedule int8

const (
	// Aligned puts deadlines on a process-wide grid epoch + k·interval, so
	// sessions that connect at different moments, or whose intervals divide
	// each other, share pulls.
	Aligned Schedule = iota
	// Anchored is SGLang's reporter: due at registration, then every
	// interval after the previous deadline.
	Anchored
)

func (s Schedule) String() string {
	if s == Anchored {
		return "anchored"
	}
	return "aligned"
}

// MaxPhaseSlots bounds Grid.PhaseSlots: more phases than this would only
// multiply pulls without shrinking a burst any further that matters.
const MaxPhaseSlots = 100

// Grid is how a table places report deadlines: the schedule and, for the
// aligned one, how many phases of their interval sessions spread over.
type Grid struct {
	Schedule Schedule
	// PhaseSlots (aligned only; 0 or 1: the single grid of docs/routers.md) puts each
	// session on one of n phases of its interval, epoch + slot·interval/n +
	// k·interval, the slot chosen least-loaded at registration and kept for
	// the session's life. A fire then serves about 1/n of the routers, so
	// its burst, and the wait of the router served last, shrink n-fold,
	// while pulls stay bounded by n per shortest interval, whatever the
	// number of routers. AutoPhaseSlots sizes the phases by the live
	// session count instead (see AutoPhaseSlots).
	PhaseSlots int
}

// AutoPhaseSlots, as Grid.PhaseSlots, chooses the phases from the live
// routers: up to AutoPhases phases of each interval, a session joining
// the first of them, in an order that keeps the open ones spread over the
// interval (autoOrder), whose routers of that interval number fewer than
// AutoPhaseSessions, and keeping it for its life. Under AutoPhaseSessions
// routers of an interval there is one phase of it, SGLang's single grid;
// each further AutoPhaseSessions opens one more, so pulls stay at most
// AutoPhases a grid the single grid would pull. Routers' streams (Monitor
// and ORCA) are counted; browsers and the history's session join a phase
// without taking room. A phase closes when its last router leaves; the
// routers that come next fill the open ones first. With the anchored
// schedule it is the single grid.
const AutoPhaseSlots = -1

// AutoPhases and AutoPhaseSessions size the automatic phases (see
// AutoPhaseSlots): ten, the pull bound of one interval, of a hundred
// routers each, what one fire serves within a millisecond or so here.
const (
	AutoPhases        = 10
	AutoPhaseSessions = 100
)

// autoOrder is the order the automatic phases open in: each next one
// about halfway between two open ones, so the fires of the open phases
// stay spread over the interval.
var autoOrder = [AutoPhases]int{0, 5, 2, 7, 4, 9, 1, 6, 3, 8}

// Validate checks g's phase slots against its schedule.
func (g Grid) Validate() error {
	if g.PhaseSlots == AutoPhaseSlots {
		return nil
	}
	if g.PhaseSlots < 0 || g.PhaseSlots > MaxPhaseSlots {
		return domain.InvalidOption("phase-slots", "%d: must be in [1, %d] (0: 1, one shared grid; or auto)", g.PhaseSlots, MaxPhaseSlots)
	}
	if g.PhaseSlots > 1 && g.Schedule != Aligned {
		return domain.InvalidOption("phase-slots", "%d needs the aligned schedule; %s deadlines follow each registration", g.PhaseSlots, g.Schedule)
	}
	return nil
}

// auto reports whether the phases are chosen from the session count.
func (g Grid) auto() bool { return g.PhaseSlots == AutoPhaseSlots && g.Schedule == Aligned }

// slots is the number of phases in force (at least 1).
func (g Grid) slots() int {
	switch {
	case g.auto():
		return AutoPhases
	case g.PhaseSlots == AutoPhaseSlots:
		return 1
	}
	return max(1, g.PhaseSlots)
}

// phase is where slot's grid starts within an interval.
func (g Grid) phase(slot int, interval time.Duration) time.Duration {
	return time.Duration(int64(interval) * int64(slot) / int64(g.slots()))
}

// ParseSchedule reads the flag spelling of a schedule.
func ParseSchedule(s string) (Schedule, error) {
	switch s {
	case "aligned":
		return Aligned, nil
	case "anchored":
		return Anchored, nil
	}
	return 0, domain.InvalidOption("schedule", "%q: want aligned or anchored", s)
}

// afterReport returns the deadline that follows a report delivered at
// deliveredAt for a session whose deadline was deadline. Missed deadlines
// are skipped: the result is always after deliveredAt.
func (s Schedule) afterReport(epoch time.Time, interval time.Duration, deadline, deliveredAt time.Time, first bool) time.Time {
	if s == Anchored {
		return nextAfter(deadline, interval, deliveredAt)
	}
	if first {
		return gridCeil(epoch, interval, deliveredAt.Add(interval/2))
	}
	return nextAfter(gridCeil(epoch, interval, deadline), interval, deliveredAt)
}

// afterUpdate returns the next deadline once the interval changed at now.
func (s Schedule) afterUpdate(epoch time.Time, interval time.Duration, now time.Time) time.Time {
	if s == Anchored {
		return now.Add(interval)
	}
	return gridCeil(epoch, interval, now.Add(interval/2))
}

// nextAfter returns the first base + k·interval (k ≥ 1) strictly after t.
func nextAfter(base time.Time, interval time.Duration, t time.Time) time.Time {
	next := base.Add(interval)
	if next.After(t) {
		return next
	}
	k := t.Sub(base)/interval + 1
	return base.Add(k * interval)
}

// gridCeil returns the first grid point epoch + k·interval at or after t.
func gridCeil(epoch time.Time, interval time.Duration, t time.Time) time.Time {
	d := t.Sub(epoch)
	k := d / interval
	if d%interval != 0 && d > 0 {
		k++
	}
	return epoch.Add(k * interval)
}
