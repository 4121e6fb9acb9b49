package rpc

import (
	"runtime"
	"sync"
	"testing"
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

// TestThePumpLetsAWaitingGoroutineRunDuringABurst: on one processor, a
// goroutine made ready while the pump works through a burst (the fire
// loop, woken at its deadline) runs before the burst ends, not after.
func TestThePumpLetsAWaitingGoroutineRunDuringABurst(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	p := &pump{size: 1}
	var mu sync.Mutex
	other := false
	ran := func() bool { mu.Lock(); defer mu.Unlock(); return other }
	var done sync.WaitGroup
	const burst = 4 * yieldEvery
	seen := make([]bool, burst)
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
	if !seen[burst-1] {
		t.Fatalf("a goroutine ready before a burst of %d sends had not run when the burst ended", burst)
	}
	if seen[0] {
		// Preempted before the burst began (a collection, the runtime's
		// own timers): no failure of the pump, nor a proof of it.
		t.Skip("the other goroutine ran before the burst started: this run shows nothing")
	}
}
