package rpc

import (
	"context"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/loadreporter/loadreporter/domain"
	"github.com/loadreporter/loadreporter/domain/fireloop"
	"github.com/loadreporter/loadreporter/ports/porttest"
)

// countingJob records, when it runs, whether another goroutine had run.
type countingJob struct {
	ran      func() bool
	sawOther *bool
	done     *sync.WaitGroup
}

func (j countingJob) pumpOnce() {
	*j.sawOther = j.ran()
	j.done.Done()
}

// burstOnOneProcessor runs a burst of jobs through a pump of one
// goroutine on one processor, with a goroutine made ready just before it,
// and returns, per job, whether that goroutine had run, how often the
// pump asked behind and how often it yielded.
func burstOnOneProcessor(behind bool) (seen []bool, asked, yields int) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	p := &pump{size: 1, behind: func() bool { asked++; return behind }, yield: func() { yields++; runtime.Gosched() }}
	var mu sync.Mutex
	other := false
	ran := func() bool { mu.Lock(); defer mu.Unlock(); return other }
	var done sync.WaitGroup
	const burst = 4 * yieldEvery
	seen = make([]bool, burst)
	done.Add(burst)
	p.mu.Lock() // queued before the pump's goroutine starts
	for i := range burst {
		p.queue = append(p.queue, countingJob{ran: ran, sawOther: &seen[i], done: &done})
	}
	p.running = 1
	p.mu.Unlock()
	go func() { // ready before the pump: it runs only when the pump yields
		mu.Lock()
		other = true
		mu.Unlock()
	}()
	p.run()
	done.Wait()
	return seen, asked, yields
}

// TestThePumpYieldsToAFireLoopBehind: the pump asks every yieldEvery
// sends whether the fire loop is behind, and yields only then; on one
// processor, a goroutine made ready while it works through a burst (the
// fire loop, woken at its deadline) then runs before the burst ends. A
// yield otherwise would put the burst's last reports behind every writer
// it woke.
func TestThePumpYieldsToAFireLoopBehind(t *testing.T) {
	for _, behind := range []bool{true, false} {
		seen, asked, yields := burstOnOneProcessor(behind)
		asks := len(seen) / yieldEvery
		if asked != asks {
			t.Errorf("behind %v: the pump asked whether the fire loop is behind %d times in %d sends, want %d (every %d)", behind, asked, len(seen), asks, yieldEvery)
		}
		if want := map[bool]int{true: asks, false: 0}[behind]; yields != want {
			t.Errorf("behind %v: the pump yielded %d times, want %d", behind, yields, want)
		}
		if !behind {
			continue
		}
		if seen[0] {
			// Preempted before the burst began (a collection, the runtime's
			// own timers): no failure of the pump, nor a proof of it.
			t.Skip("the other goroutine ran before the burst started: this run shows nothing")
		}
		if !seen[len(seen)-1] {
			t.Errorf("a goroutine ready before a burst of %d sends had not run by its end, the fire loop behind", len(seen))
		}
	}
}

// TestTheMonitorsPumpAsksTheFireLoop: the Monitor over a fire loop gives
// its pump the loop's Behind, read on the Monitor's clock.
func TestTheMonitorsPumpAsksTheFireLoop(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	clk := porttest.NewClock(t0)
	loop, err := fireloop.New(fireloop.Options{Source: nopSource{}, Clock: clk, Builder: domain.ReportBuilder{StaleAfter: time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(testContext(t))
	done := make(chan struct{})
	go func() { defer close(done); _ = loop.Run(ctx) }()
	defer func() { cancel(); <-done }()
	if _, _, err := loop.Register("r1", 100, 60000); err != nil {
		t.Fatal(err)
	}
	mon := func(at time.Time) *Monitor {
		m, err := NewMonitorWithOptions(loop, MonitorOptions{Clock: porttest.NewClock(at)})
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	early, late := mon(t0), mon(t0.Add(time.Hour))
	// The loop may wake once more (the registration's poke) before it
	// waits for good; it is behind at an hour past once it does.
	waitFor(t, ctx, "the pump sees the fire loop behind, the Monitor's clock an hour past its timer", late.pump.behind)
	if early.pump.behind() {
		t.Error("the fire loop waits on its timer, the Monitor's clock reads before it: its pump sees the loop behind")
	}
}
