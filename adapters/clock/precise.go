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
// eats into the fine wait, short enough that a timer stopped early (a pull
// budget, a wake replaced because a router registered) never opens a file.
var fineLead = 2 * time.Millisecond // a variable only so tests can stretch the last stretch

// preciseTimer waits on Go's timer until fineLead before at, then on a
// timerfd (CLOCK_MONOTONIC, nanosecond resolution) registered with Go's
// netpoller. Without timerfd (seccomp, no file descriptors left) the last
// stretch is a plain sleep: as late as Go's timer, never early.
type preciseTimer struct {
	at time.Time
	c  chan time.Time

	mu      sync.Mutex
	stopped bool
	coarse  *time.Timer
	fine    *os.File // while the last stretch waits on a timerfd
}

func newPreciseTimer(at time.Time) ports.Timer {
	t := &preciseTimer{at: at, c: make(chan time.Time, 1)}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.coarse = time.AfterFunc(time.Until(at)-fineLead, t.waitFine)
	return t
}

func (t *preciseTimer) C() <-chan time.Time { return t.c }

// Stop prevents the timer from firing: once it returns, nothing more is
// sent on C, and a fine wait in progress ends (closing its timerfd).
func (t *preciseTimer) Stop() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.stopped = true
	t.coarse.Stop()
	if t.fine != nil {
		t.fine.Close() // the blocked Read returns os.ErrClosed
	}
}

// waitFine runs in the coarse timer's goroutine for the last stretch.
func (t *preciseTimer) waitFine() {
	t.mu.Lock()
	if t.stopped {
		t.mu.Unlock()
		return
	}
	d := time.Until(t.at)
	var f *os.File
	if d > 0 {
		f = openTimerfd(d)
		t.fine = f
	}
	t.mu.Unlock()

	switch {
	case f != nil:
		var expirations [8]byte
		_, err := f.Read(expirations[:])
		f.Close()
		if err != nil {
			return // closed by Stop
		}
	case d > 0:
		time.Sleep(d)
	}

	t.mu.Lock()
	defer t.mu.Unlock()
	t.fine = nil
	if !t.stopped {
		t.c <- time.Now() // buffered, and sent at most once
	}
}

// openTimerfd returns a non-blocking timerfd, in Go's netpoller, that
// expires once after d, or nil when the kernel refuses one.
func openTimerfd(d time.Duration) *os.File {
	fd, err := unix.TimerfdCreate(unix.CLOCK_MONOTONIC, unix.TFD_NONBLOCK|unix.TFD_CLOEXEC)
	if err != nil {
		return nil
	}
	spec := unix.ItimerSpec{Value: unix.NsecToTimespec(int64(d))}
	if err := unix.TimerfdSettime(fd, 0, &spec, nil); err != nil {
		unix.Close(fd)
		return nil
	}
	return os.NewFile(uintptr(fd), "timerfd")
}
