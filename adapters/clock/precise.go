//go:build linux

package clock

import (
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/loadreporter/loadreporter/ports"
)

// fineLead is how long before its time a precise timer hands over from
// Go's timer (late by up to ~1 ms when the process is idle) to a timerfd,
// whose expiry wakes the netpoller at once: enough that Go's lateness never
// eats into the fine wait.
const fineLead = 2 * time.Millisecond

// fineSpan: a timer due within it waits on its timerfd from the start.
// Handing over from Go's timer wakes an idle process a second time for
// every timer that fires, which a fire loop with phases (a wait of about
// ten milliseconds between fires) paid on every fire: a quarter of its
// CPU at a hundred routers. A timer stopped early then costs its goroutine
// a wake and its timerfd a trip back to the pool (a few µs: the fire loop
// replaces its timer whenever a router registers), and a pull budget set
// under fineSpan pays that every fire; the default budget (1 s) and later
// timers keep Go's timer until fineLead before, holding nothing meanwhile.
const fineSpan = 250 * time.Millisecond

// fineWait is how a precise timer's last stretch goes: it starts lead
// before the timer's time, or at once for a timer due within span, on a
// timerfd that expires timerfdLate after it. Precise's timers start it
// fineLead before, or at once within fineSpan, on a timerfd that expires
// on time; a test gives its own timers a wait on the timerfd for all of
// their time, to watch it, or one that only the read deadline ends.
type fineWait struct{ lead, span, timerfdLate time.Duration }

// preciseTimer waits on Go's timer until wait.lead before at (unless at
// is within wait.span), then on a timerfd (CLOCK_MONOTONIC, nanosecond
// resolution) registered with Go's netpoller, and on a read deadline at
// the same time, whichever is first.
// An idle process wakes on the timerfd: its netpoller sleeps in whole
// milliseconds, but a timerfd's expiry ends that sleep. A busy one wakes
// on the deadline: its processors, with goroutines to run, look at the
// netpoller only when they run out of work (or every 10 ms, from the
// runtime's monitor), but at Go's timers each time they switch goroutines.
// Without timerfd (seccomp, no file descriptors left) the last stretch is
// a plain sleep: as late as Go's timer, never early.
type preciseTimer struct {
	at   time.Time
	c    chan time.Time
	wait fineWait

	mu      sync.Mutex
	stopped bool
	coarse  *time.Timer // nil when the fine wait started at once
	fine    *timerfd    // while the last stretch waits on it
}

func newPreciseTimer(at time.Time) ports.Timer {
	return fineWait{lead: fineLead, span: fineSpan}.newTimer(at)
}

// newTimer starts a precise timer for at whose last stretch goes as w says.
func (w fineWait) newTimer(at time.Time) *preciseTimer {
	t := &preciseTimer{at: at, c: make(chan time.Time, 1), wait: w}
	t.mu.Lock()
	defer t.mu.Unlock()
	if d := time.Until(at); d <= max(w.span, w.lead) {
		go t.waitFine() // it takes mu once newTimer returns
	} else {
		t.coarse = time.AfterFunc(d-w.lead, t.waitFine)
	}
	return t
}

func (t *preciseTimer) C() <-chan time.Time { return t.c }

// Stop prevents the timer from firing: once it returns, nothing more is
// sent on C, and a fine wait in progress ends (its timerfd goes back to
// the pool).
func (t *preciseTimer) Stop() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.stopped = true
	if t.coarse != nil {
		t.coarse.Stop()
	}
	if t.fine != nil {
		t.fine.interrupt() // the blocked read returns
	}
}

// waitFine runs in a goroutine of its own (the coarse timer's) for the
// last stretch.
func (t *preciseTimer) waitFine() {
	t.mu.Lock()
	if t.stopped {
		t.mu.Unlock()
		return
	}
	d := time.Until(t.at)
	var f *timerfd
	if d > 0 {
		f = takeTimerfd(d + t.wait.timerfdLate)
	}
	if f != nil {
		// Set under mu: a Stop from now on moves it to the past.
		_ = f.f.SetReadDeadline(t.at)
		t.fine = f
	}
	t.mu.Unlock()

	if f != nil {
		f.wait() // expired, the deadline passed, or Stop
	}

	t.mu.Lock()
	defer t.mu.Unlock()
	if f != nil {
		t.fine = nil // Stop touches it no more: it may go back
		f.release()
	}
	for !t.stopped {
		rest := time.Until(t.at)
		if rest <= 0 {
			t.c <- time.Now() // buffered, and sent at most once
			return
		}
		// No timerfd, or a read that failed early: never fire early.
		t.mu.Unlock()
		time.Sleep(rest)
		t.mu.Lock()
	}
}

// timerfd is a non-blocking timerfd in Go's netpoller. A fire loop with
// phases waits on one several times an interval, so they are kept for
// the next wait rather than opened and closed each time (opening one is a
// tenth of the CPU of a fire of a hundred routers).
type timerfd struct {
	f  *os.File
	fd int // f's, for the timer calls (f.Fd would make it blocking)
}

// The timerfds kept: one per concurrent fine wait, and there are few.
var idleTimerfds = struct {
	sync.Mutex
	free []*timerfd
}{}

const maxIdleTimerfds = 2

// takeTimerfd returns a timerfd that expires once after d, kept or new,
// or nil when the kernel refuses one.
func takeTimerfd(d time.Duration) *timerfd {
	idleTimerfds.Lock()
	var t *timerfd
	if n := len(idleTimerfds.free); n > 0 {
		t = idleTimerfds.free[n-1]
		idleTimerfds.free = idleTimerfds.free[:n-1]
	}
	idleTimerfds.Unlock()
	if t == nil {
		fd, err := unix.TimerfdCreate(unix.CLOCK_MONOTONIC, unix.TFD_NONBLOCK|unix.TFD_CLOEXEC)
		if err != nil {
			return nil
		}
		t = &timerfd{f: os.NewFile(uintptr(fd), "timerfd"), fd: fd}
	}
	spec := unix.ItimerSpec{Value: unix.NsecToTimespec(int64(d))}
	if err := unix.TimerfdSettime(t.fd, 0, &spec, nil); err != nil {
		t.f.Close()
		return nil
	}
	return t
}

// wait blocks until the timerfd expires, its read deadline passes or
// interrupt ends it.
func (t *timerfd) wait() {
	var expirations [8]byte
	_, _ = t.f.Read(expirations[:])
}

// interrupt ends a wait in progress, and the next one, at once.
func (t *timerfd) interrupt() { _ = t.f.SetReadDeadline(time.Unix(1, 0)) }

// release disarms the timerfd, drops an expiry nobody read, and keeps it
// for the next wait (or closes it when enough are kept).
func (t *timerfd) release() {
	_ = unix.TimerfdSettime(t.fd, 0, &unix.ItimerSpec{}, nil)
	var expirations [8]byte
	_, _ = unix.Read(t.fd, expirations[:]) // EAGAIN when none: non-blocking
	_ = t.f.SetReadDeadline(time.Time{})
	idleTimerfds.Lock()
	defer idleTimerfds.Unlock()
	if len(idleTimerfds.free) < maxIdleTimerfds {
		idleTimerfds.free = append(idleTimerfds.free, t)
		return
	}
	t.f.Close()
}
