package rpc

import (
	"context"
	"io"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/loadreporter/loadreporter/domain"
	"github.com/loadreporter/loadreporter/domain/fireloop"
	pb "github.com/loadreporter/loadreporter/gen/sglang/router/loadmonitor/v1"
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
		p.queue.push(countingJob{ran: ran, sawOther: &seen[i], done: &done})
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

// heldStream is a native-like stream whose frame in flight and write
// deadline the test sets.
type heldStream struct {
	flight, past bool
}

func (s *heldStream) Receive() (*pb.RouterFrame, error) { return nil, io.EOF }
func (s *heldStream) Send(*outFrame) error              { s.flight = true; return nil }
func (s *heldStream) peerAddr() string                  { return "127.0.0.1:1" }
func (s *heldStream) inFlight() bool                    { return s.flight }
func (s *heldStream) expired() bool                     { return s.past }
func (s *heldStream) onWritten(func(), func())          {}
func (s *heldStream) writtenCount() uint64              { return 0 }

// TestAFrameWrittenWithNothingBehindItWakesNoPump: written queues the
// writer again only when it was kicked since the pump last took its
// outbox (a report behind the ack, or one offered while a frame was in
// flight); a frame written with
// nothing behind it, the usual case, would otherwise start a pump
// goroutine for nothing at every report.
func TestAFrameWrittenWithNothingBehindItWakesNoPump(t *testing.T) {
	p := &pump{size: 0} // queues, and runs nothing
	st := &heldStream{}
	sess := newFakeSession("r")
	w := newWriter(&Monitor{pump: p}, st, nil, "r", sess, newOutFrame(ackFrame(testConfig)), nil)
	queued := func() int { p.mu.Lock(); defer p.mu.Unlock(); return p.joining.waiting() + p.queue.waiting() }
	taken := func() { // what the pump's goroutine would do: take w, run it
		p.mu.Lock()
		p.queue, p.joining = jobQueue{}, jobQueue{}
		p.mu.Unlock()
		w.pumpOnce()
	}

	w.kick()                         // registered: the ack
	sess.reports <- &domain.Report{} // the first report, offered before the pump ran
	w.kick()                         // absorbed: w is queued already
	if n := queued(); n != 1 {
		t.Fatalf("queued %d time(s), want 1", n)
	}
	taken() // sends the ack only: one frame at a time
	if !st.flight {
		t.Fatal("the ack was not sent")
	}
	st.flight = false
	w.written()
	if n := queued(); n != 1 {
		t.Fatalf("the ack written with a report behind it queued the writer %d time(s), want 1", n)
	}
	w.m.frames = newReportFrames()
	taken() // sends the report
	if len(sess.reports) != 0 || !st.flight {
		t.Fatal("the report behind the ack was not sent")
	}
	st.flight = false
	w.written()
	if n := queued(); n != 0 {
		t.Fatalf("a frame written with nothing behind it queued the writer %d time(s)", n)
	}

	st.flight = true
	sess.reports <- &domain.Report{}
	w.kick() // offered while a frame is in flight
	taken()  // finds it in flight: left for written
	if n := queued(); n != 0 {
		t.Fatalf("pumpOnce queued the writer itself (%d)", n)
	}
	st.flight = false
	w.written()
	if n := queued(); n != 1 {
		t.Fatalf("a frame written with a kick behind it queued the writer %d time(s), want 1", n)
	}
	taken()
	st.flight = false
	w.written()
	if n := queued(); n != 0 {
		t.Fatalf("the kick was answered, yet the next frame written queued the writer %d time(s)", n)
	}

	st.flight, st.past = true, true
	w.written() // the deadline is the stream's expired callback's (kick), not written's
	if n := queued(); n != 0 {
		t.Fatalf("a frame written with nothing behind it queued the writer %d time(s)", n)
	}
}

// noJob is a pump job that only counts its runs (a pointer: queuing it
// allocates nothing of its own).
type noJob struct{ runs int }

func (j *noJob) pumpOnce() { j.runs++ }

// TestThePumpKeepsItsQueueFromFireToFire: a fire queues its writers every
// fire; once the pump has held a burst, the next bursts of that size
// allocate nothing.
func TestThePumpKeepsItsQueueFromFireToFire(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates for what it watches")
	}
	p := &pump{size: 0} // add queues and starts nothing; the test runs it
	job := &noJob{}
	const burst = 100
	fire := func() {
		for range burst {
			p.add(job, false)
		}
		p.running = 1
		p.run()
	}
	fire()
	if allocs := testing.AllocsPerRun(20, fire); allocs != 0 {
		t.Errorf("a burst of %d writers allocates %v times once the pump has held one, want 0", burst, allocs)
	}
	if want := 21*burst + burst; job.runs != want {
		t.Errorf("the pump ran %d jobs, want %d", job.runs, want)
	}

	p.mu.Lock()
	p.queue.jobs = make([]pumpJob, 0, keptQueue+1)
	p.mu.Unlock()
	fire()
	if p.queue.jobs != nil {
		t.Errorf("an array of %d writers was kept once empty, want it dropped (over keptQueue %d)", cap(p.queue.jobs), keptQueue)
	}
}

// TestAPumpThatNeverEmptiesHoldsWhatWaitsNotWhatPassed: a queue that a
// pump always has something in (writers queued as fast as it sends)
// moves down as it fills instead of growing with every job that passed.
func TestAPumpThatNeverEmptiesHoldsWhatWaitsNotWhatPassed(t *testing.T) {
	p := &pump{size: 0}
	job := &noJob{}
	for range 10 {
		p.add(job, false)
	}
	p.running = 1 // a goroutine's turn that never ends: next never finds it empty
	for range 100_000 {
		p.add(job, false)
		if w := p.next(); w == nil {
			t.Fatal("the queue ran empty")
		}
	}
	if live := p.queue.waiting(); live != 10 {
		t.Fatalf("%d jobs wait, want 10", live)
	}
	if c := cap(p.queue.jobs); c > 64 {
		t.Errorf("the queue's array holds %d jobs for 10 waiting after 100 000 passed, want it to stay small", c)
	}
}

// TestAJoiningRoutersFramesGoAheadOfABurst: a writer's ack and first
// report are queued ahead of a phase's burst, in the order they came;
// every later frame waits its turn behind the burst.
func TestAJoiningRoutersFramesGoAheadOfABurst(t *testing.T) {
	p := &pump{size: 0}
	burst := make([]*noJob, 100)
	for i := range burst {
		burst[i] = &noJob{}
		p.add(burst[i], false)
	}
	first, second := &noJob{}, &noJob{}
	p.add(first, true)
	p.add(second, true)
	p.running = 1
	for i, want := range append([]*noJob{first, second}, burst...) {
		if got := p.next(); got != want {
			t.Fatalf("job %d taken out of order: a joining router's frame queued behind the burst, or the burst reordered", i)
		}
	}
	if w := p.next(); w != nil {
		t.Fatal("the pump ran more than was queued")
	}

	st := &heldStream{}
	sess := newFakeSession("r")
	w := newWriter(&Monitor{pump: p, frames: newReportFrames()}, st, nil, "r", sess, newOutFrame(ackFrame(testConfig)), nil)
	joining := func() (ahead, behind int) {
		p.mu.Lock()
		defer p.mu.Unlock()
		ahead, behind = p.joining.waiting(), p.queue.waiting()
		p.queue, p.joining = jobQueue{}, jobQueue{}
		return ahead, behind
	}
	for i, what := range []string{"the ack", "the first report", "the second report"} {
		sess.reports <- &domain.Report{}
		w.kick()
		ahead, behind := joining()
		if wantAhead := i < 2; (ahead == 1) != wantAhead || ahead+behind != 1 {
			t.Fatalf("%s: queued %d ahead of the burst and %d behind it, want ahead %v", what, ahead, behind, wantAhead)
		}
		w.pumpOnce()
		if !st.flight {
			t.Fatalf("%s was not sent", what)
		}
		st.flight = false
		if i == 0 {
			<-sess.reports // sent after the ack, below; the outbox holds one
		}
	}
}

// TestAFrameWrittenAsTheBoundPassedStillEndsTheStream: the stall guard's
// bound passed just as the frame in flight was written. The guard has
// counted the stream ended and logged it, and the deadline stays passed,
// so the pump ends the stream there instead of sending on.
func TestAFrameWrittenAsTheBoundPassedStillEndsTheStream(t *testing.T) {
	p := &pump{size: 0}
	st := &heldStream{}
	sess := newFakeSession("r")
	w := newWriter(&Monitor{pump: p, frames: newReportFrames()}, st, nil, "r", sess, newOutFrame(ackFrame(testConfig)), nil)
	w.kick()
	w.pumpOnce() // the ack
	if !st.flight {
		t.Fatal("the ack was not sent")
	}
	st.flight, st.past = false, true // written, and the bound passed
	sess.reports <- &domain.Report{}
	w.kick() // the stream's expired callback, or the next report
	w.pumpOnce()
	if st.flight {
		t.Fatal("a report was sent on a stream whose write bound had passed")
	}
	select {
	case <-w.finishedChan():
	default:
		t.Fatal("the stream did not end once its write bound had passed")
	}
	if w.result != errWriteDeadline {
		t.Errorf("the stream ended with %v, want %v", w.result, errWriteDeadline)
	}
}
