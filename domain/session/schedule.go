package session

import (
	"time"

	"github.com/loadreporter/loadreporter/domain"
)

// Schedule decides a session's report deadlines (SPEC §2.4).
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

// ParseSchedule reads the flag spelling of a schedule.
func ParseSchedule(s string) (Schedule, error) {
	switch s {
	case "aligned":
		return Aligned, nil
	case "anchored":
		return Anchored, nil
	}
	return 0, domain.Errorf(domain.CodeInvalidArgument, "schedule %q: want aligned or anchored", s)
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
