//go:build linux

package clock

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// These tests run one at a time (no t.Parallel): they count the process's
// timerfds, and the ones kept for the next wait.

// timerfds counts this process's open timerfds.
func timerfds(t *testing.T) int {
	t.Helper()
	links, err := filepath.Glob("/proc/self/fd/*")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, l := range links {
		if dst, err := os.Readlink(l); err == nil && strings.Contains(dst, "timerfd") {
			n++
		}
	}
	return n
}

// waitFor polls cond for up to 5 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("after 5 s: %s", what)
}

// watched is a fine wait that lasts all of its timer's time, so that it
// can be watched.
var watched = fineWait{lead: time.Hour}

// closeIdleTimerfds closes the timerfds kept for later waits, so a test
// counts only what its timers hold.
func closeIdleTimerfds() {
	idleTimerfds.Lock()
	defer idleTimerfds.Unlock()
	for _, f := range idleTimerfds.free {
		f.f.Close()
	}
	idleTimerfds.free = nil
}

// kept is how many timerfds wait for the next fine wait.
func kept() int {
	idleTimerfds.Lock()
	defer idleTimerfds.Unlock()
	return len(idleTimerfds.free)
}

func TestTheLastStretchWaitsOnATimerfdThatStopCloses(t *testing.T) {
	closeIdleTimerfds()
	before := timerfds(t)
	tm := watched.newTimer(time.Now().Add(30 * time.Minute))
	waitFor(t, "a timerfd open for the fine wait", func() bool { return timerfds(t) == before+1 })
	tm.Stop()
	waitFor(t, "the timerfd kept by Stop", func() bool { return kept() == 1 })
	if n := timerfds(t); n != before+1 {
		t.Fatalf("timerfds: %d, want the one kept (%d)", n, before+1)
	}
	select {
	case v := <-tm.C():
		t.Fatalf("a stopped timer fired at %v", v)
	case <-time.After(20 * time.Millisecond):
	}
}

func TestAFineWaitFiresOnceAtItsTimeAndKeepsItsTimerfd(t *testing.T) {
	closeIdleTimerfds()
	before := timerfds(t)
	at := time.Now().Add(30 * time.Millisecond)
	tm := watched.newTimer(at)
	got := <-tm.C()
	if got.Before(at) {
		t.Fatalf("fired %v early", at.Sub(got))
	}
	waitFor(t, "the timerfd kept after firing", func() bool { return kept() == 1 && timerfds(t) == before+1 })
	tm.Stop() // after firing: a no-op
	select {
	case v := <-tm.C():
		t.Fatalf("fired a second time at %v", v)
	case <-time.After(20 * time.Millisecond):
	}
}

// TestAFineWaitAlsoEndsAtItsReadDeadline: the last stretch ends at its
// time even if the timerfd says nothing, as when the netpoller is not
// looked at (every processor busy): the read deadline, one of Go's
// timers, ends the wait then.
func TestAFineWaitAlsoEndsAtItsReadDeadline(t *testing.T) {
	closeIdleTimerfds()
	at := time.Now().Add(30 * time.Millisecond)
	tm := fineWait{lead: time.Hour, timerfdLate: time.Hour}.newTimer(at)
	select {
	case got := <-tm.C():
		if got.Before(at) {
			t.Fatalf("fired %v early", at.Sub(got))
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a fine wait whose timerfd had not expired never ended at its deadline")
	}
	waitFor(t, "the timerfd kept, disarmed", func() bool { return kept() == 1 })
	// The timerfd kept is disarmed: the next wait on it is its own.
	at = time.Now().Add(10 * time.Millisecond)
	next := watched.newTimer(at)
	if got := <-next.C(); got.Before(at) {
		t.Fatalf("the next timer on the kept timerfd fired %v early", at.Sub(got))
	}
}

func TestATimerStoppedBeforeItsLastStretchNeverOpensATimerfd(t *testing.T) {
	before := timerfds(t)
	tm := Precise{}.NewTimer(time.Now().Add(time.Hour))
	tm.Stop()
	if n := timerfds(t); n != before {
		t.Fatalf("timerfds: %d, want %d", n, before)
	}
	select {
	case v := <-tm.C():
		t.Fatalf("a stopped timer fired at %v", v)
	case <-time.After(20 * time.Millisecond):
	}
}

// TestATimerDueWithinTheSpanWaitsOnItsTimerfdFromTheStart: a fire loop's
// wait between phases is short, and handing over from Go's timer would
// wake the idle process a second time for each fire.
func TestATimerDueWithinTheSpanWaitsOnItsTimerfdFromTheStart(t *testing.T) {
	closeIdleTimerfds()
	before := timerfds(t)
	start := time.Now()
	at := start.Add(fineSpan)
	tm := Precise{}.NewTimer(at)
	defer tm.Stop()
	// Go's timer would hand over only fineLead before at.
	for handOver := at.Add(-fineLead - 10*time.Millisecond); timerfds(t) != before+1; time.Sleep(time.Millisecond) {
		if time.Now().After(handOver) {
			t.Fatalf("no timerfd open %v after the start of a wait of %v", time.Since(start), fineSpan)
		}
	}
	if got := <-tm.C(); got.Before(at) {
		t.Fatalf("fired %v early", at.Sub(got))
	}
}

func TestTimersFireNeverEarlyAndEachOnce(t *testing.T) {
	start := time.Now()
	var timers []*struct {
		at time.Time
		c  <-chan time.Time
	}
	for i := range 200 {
		at := start.Add(time.Duration(i%20) * time.Millisecond) // some already past, some in Go's part, some in the fine one
		timers = append(timers, &struct {
			at time.Time
			c  <-chan time.Time
		}{at, Precise{}.NewTimer(at).C()})
	}
	for i, tm := range timers {
		select {
		case got := <-tm.c:
			if got.Before(tm.at) {
				t.Fatalf("timer %d fired %v early", i, tm.at.Sub(got))
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("timer %d (due %v after start) never fired", i, tm.at.Sub(start))
		}
	}
	time.Sleep(20 * time.Millisecond)
	for i, tm := range timers {
		select {
		case <-tm.c:
			t.Fatalf("timer %d fired twice", i)
		default:
		}
	}
}

func TestStopRacingTheFineWaitNeverLeaksAFileOrFiresAfterwards(t *testing.T) {
	closeIdleTimerfds()
	before := timerfds(t)
	type stopped struct {
		c   <-chan time.Time
		end time.Time // when Stop returned
	}
	var all []stopped
	for i := range 300 {
		tm := Precise{}.NewTimer(time.Now().Add(time.Duration(i%4) * time.Millisecond))
		time.Sleep(time.Duration(i%5) * 500 * time.Microsecond)
		tm.Stop()
		all = append(all, stopped{tm.C(), time.Now()})
	}
	waitFor(t, "every timerfd closed or kept", func() bool { return timerfds(t) <= before+maxIdleTimerfds })
	time.Sleep(10 * time.Millisecond)
	for i, s := range all {
		select {
		case v := <-s.c: // fired before Stop: allowed, once
			if !v.Before(s.end) {
				t.Fatalf("timer %d sent at %v, after Stop returned at %v", i, v, s.end)
			}
		default:
		}
		select {
		case v := <-s.c:
			t.Fatalf("timer %d sent twice (%v)", i, v)
		default:
		}
	}
}

// BenchmarkTimerLateness prints how late System's timers (Go's) and
// Precise's fire, side by side, in the fire loop's situation: an otherwise
// idle process waking on a 50 ms grid, the two kinds taking turns (`go test
// ./adapters/clock -run '^$' -bench TimerLateness -benchtime 400x`, 20 s).
func BenchmarkTimerLateness(b *testing.B) {
	const grid = 100 * time.Millisecond
	var goLate, preciseLate []time.Duration
	next := time.Now().Truncate(grid).Add(grid)
	for i := 0; b.Loop(); i++ {
		var c <-chan time.Time
		if i%2 == 0 {
			c = System{}.NewTimer(next).C()
		} else {
			c = Precise{}.NewTimer(next).C()
		}
		<-c
		late := time.Since(next) // not the value received: Go's timer sends the time it was due
		if i%2 == 0 {
			goLate = append(goLate, late)
		} else {
			preciseLate = append(preciseLate, late)
		}
		next = next.Add(grid)
	}
	if len(preciseLate) == 0 {
		return
	}
	p := func(late []time.Duration, q float64) float64 {
		slices.Sort(late)
		return float64(late[int(q*float64(len(late)-1))].Microseconds())
	}
	for _, q := range []float64{0.5, 0.9, 0.99} {
		b.ReportMetric(p(goLate, q), fmt.Sprintf("system-p%.0f-µs", q*100))
		b.ReportMetric(p(preciseLate, q), fmt.Sprintf("precise-p%.0f-µs", q*100))
	}
	b.ReportMetric(p(goLate, 0.9)/max(1, p(preciseLate, 0.9)), "p90-ratio")
}

// TestAKeptTimerfdNeverFiresEarly: a timerfd whose wait was stopped just
// before it expired goes back disarmed and drained, so the next timer to
// take it waits its own time.
func TestAKeptTimerfdNeverFiresEarly(t *testing.T) {
	closeIdleTimerfds()
	for i := range 40 {
		tm := watched.newTimer(time.Now().Add(2 * time.Millisecond))
		time.Sleep(time.Duration(i%5) * 500 * time.Microsecond) // before, around and after its expiry
		tm.Stop()
		at := time.Now().Add(10 * time.Millisecond)
		next := watched.newTimer(at)
		select {
		case got := <-next.C():
			if got.Before(at) {
				t.Fatalf("round %d: a timer on a kept timerfd fired %v early", i, at.Sub(got))
			}
		case <-time.After(2 * time.Second):
			t.Fatalf("round %d: a timer on a kept timerfd never fired", i)
		}
	}
}

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
