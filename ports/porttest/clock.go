package porttest

import (
	"context"
	"sort"
	"sync"
	"time"

	"github.com/loadreporter/loadreporter/ports"
)

// Clock is a manually advanced clock.
type Clock struct {
	mu      sync.Mutex
	now     time.Time
	timers  []*timer
	changed chan struct{} // closed and replaced whenever timers change
}

var _ ports.Clock = (*Clock)(nil)

// NewClock returns a fake clock reading start.
func NewClock(start time.Time) *Clock {
	return &Clock{now: start, changed: make(chan struct{})}
}

// Now returns the fake time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// NewTimer returns a timer that fires when the fake time reaches at; one
// whose time has come fires at once.
func (c *Clock) NewTimer(at time.Time) ports.Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &timer{c: c, at: at, ch: make(chan time.Time, 1)}
	if !at.After(c.now) {
		t.ch <- c.now
		return t
	}
	c.timers = append(c.timers, t)
	c.notify()
	return t
}

// Advance moves the fake time forward by d and fires every timer due by
// then, earliest first.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	sort.SliceStable(c.timers, func(i, j int) bool { return c.timers[i].at.Before(c.timers[j].at) })
	kept := c.timers[:0]
	for _, t := range c.timers {
		if t.at.After(c.now) {
			kept = append(kept, t)
			continue
		}
		t.ch <- c.now
	}
	clear(c.timers[len(kept):])
	c.timers = kept
	c.notify()
}

// Pending is the number of timers waiting to fire.
func (c *Clock) Pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.timers)
}

// Next is the earliest pending timer's time; ok is false when none waits.
func (c *Clock) Next() (at time.Time, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, t := range c.timers {
		if !ok || t.at.Before(at) {
			at, ok = t.at, true
		}
	}
	return at, ok
}

// WaitPending blocks until at least n timers wait, or ctx ends.
func (c *Clock) WaitPending(ctx context.Context, n int) error {
	for {
		c.mu.Lock()
		got, changed := len(c.timers), c.changed
		c.mu.Unlock()
		if got >= n {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// WaitTimerAt blocks until a timer due exactly at at waits, or ctx ends.
func (c *Clock) WaitTimerAt(ctx context.Context, at time.Time) error {
	for {
		c.mu.Lock()
		changed, found := c.changed, false
		for _, t := range c.timers {
			found = found || t.at.Equal(at)
		}
		c.mu.Unlock()
		if found {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Changed returns a channel closed at the next change of the timers.
func (c *Clock) Changed() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.changed
}

func (c *Clock) notify() {
	close(c.changed)
	c.changed = make(chan struct{})
}

type timer struct {
	c  *Clock
	at time.Time
	ch chan time.Time
}

func (t *timer) C() <-chan time.Time { return t.ch }

func (t *timer) Stop() {
	c := t.c
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, o := range c.timers {
		if o == t {
			c.timers = append(c.timers[:i], c.timers[i+1:]...)
			c.notify()
			return
		}
	}
}
