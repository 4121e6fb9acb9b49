package rpc

import (
	"runtime"
	"sync"
)

// The native stream's sends do not block (its writer holds one frame in
// grpc-go at a time, and grpc-go queues a frame at once), so they need no
// goroutine of their own: a fire's writers are queued to a pump, a few
// goroutines that send each one's next frame and go on. A fire of a
// hundred routers then wakes one or two goroutines, not a hundred, and the
// fire loop, which only queues, keeps its time. What can block (the last
// frame, which waits for the one in flight within FinalWriteTimeout) goes
// to the writer's own drain as on the connect way in.

// asyncStream is a stream whose frame, once queued, is in flight until
// the transport says it is written (the native one).
type asyncStream interface {
	stream
	// inFlight reports whether a frame is not written yet.
	inFlight() bool
	// expired reports whether the write deadline has passed.
	expired() bool
	// onWritten makes the stream call written when the frame in flight
	// is written, and expired when the write deadline passes; neither may
	// block.
	onWritten(written, expired func())
	// writtenCount is how many of its frames the transport has written.
	writtenCount() uint64
}

// pump runs the queued writers' sends on at most its size of goroutines,
// each running while the queue holds something.
type pump struct {
	mu sync.Mutex
	// joining goes first: a router's ack and first report, which behind a
	// phase's burst (a thousand writers at 10 000 routers) can reach
	// the router joining milliseconds after its ack.
	joining, queue jobQueue
	running        int
	size           int
	// behind says whether the fire loop waits for a processor: its timer
	// is due and it has not run since (nil: never). The pump then yields
	// its own.
	behind func() bool
	yield  func() // runtime.Gosched; a test counts the yields
}

// pumpJob is what the pump runs: a writer's next send.
type pumpJob interface{ pumpOnce() }

func newPump() *pump { return &pump{size: max(runtime.GOMAXPROCS(0), 1), yield: runtime.Gosched} }

// add queues w, starting a goroutine if fewer than size run; a joining
// w goes ahead of every writer queued but those joining before it.
func (p *pump) add(w pumpJob, joining bool) {
	p.mu.Lock()
	if joining {
		p.joining.push(w)
	} else {
		p.queue.push(w)
	}
	start := p.running < p.size
	if start {
		p.running++
	}
	p.mu.Unlock()
	if start {
		go p.run()
	}
}

// yieldEvery is how many sends a pump goroutine makes between two looks
// at whether the fire loop is behind: woken at its deadline, it waits for
// the processor a burst holds, and would otherwise wait until the burst
// ends or the runtime preempts it (10 ms). It yields only then: a yield
// puts the pump behind every runnable goroutine (over a thousand
// connections, a thousand writers), which the last routers' reports
// would wait for.
const yieldEvery = 16

func (p *pump) run() {
	for n := 1; ; n++ {
		if n%yieldEvery == 0 && p.behind != nil && p.behind() {
			p.yield()
		}
		w := p.next()
		if w == nil {
			return
		}
		w.pumpOnce()
	}
}

// next takes the first job queued, or, with none, ends the calling
// goroutine's turn (nil).
func (p *pump) next() pumpJob {
	p.mu.Lock()
	defer p.mu.Unlock()
	if w := p.joining.pop(); w != nil {
		return w
	}
	if w := p.queue.pop(); w != nil {
		return w
	}
	p.running--
	return nil
}

// jobQueue is a first-in first-out queue of pump jobs: jobs[head:] wait.
// Emptied, its array is kept for the next fire's burst unless it grew
// past keptQueue: a fire's writers are queued every fire, and growing the
// queue anew each time was a fifth of the server's garbage at 1 000
// routers.
type jobQueue struct {
	jobs []pumpJob
	head int
}

// keptQueue is the largest queue array a pump keeps once empty: a fire's
// writers at a few thousand routers a phase (16 B each).
const keptQueue = 4096

func (q *jobQueue) push(w pumpJob) {
	if n := len(q.jobs); n == cap(q.jobs) && q.head > 0 && 2*q.head >= n {
		// Full, and half of it taken: a queue that never empties (a pump
		// behind for good) moves down instead of growing for ever.
		live := copy(q.jobs, q.jobs[q.head:])
		clear(q.jobs[live:])
		q.jobs, q.head = q.jobs[:live], 0
	}
	q.jobs = append(q.jobs, w)
}

// pop takes the first job, or nil when q is empty.
func (q *jobQueue) pop() pumpJob {
	if q.head == len(q.jobs) {
		q.jobs, q.head = q.jobs[:0], 0
		if cap(q.jobs) > keptQueue {
			q.jobs = nil // an outsize burst's array goes with it
		}
		return nil
	}
	w := q.jobs[q.head]
	q.jobs[q.head] = nil
	q.head++
	return w
}

// waiting is how many jobs q holds.
func (q *jobQueue) waiting() int { return len(q.jobs) - q.head }

// pumpOnce sends w's next frame if it can without waiting, or hands w to
// its own drain where a wait is due.
func (w *writer) pumpOnce() {
	st := w.st.(asyncStream)
	w.mu.Lock()
	w.queued = false
	if w.closed || w.running {
		w.mu.Unlock()
		return
	}
	if st.expired() {
		// The router took nothing within the bound (the stall guard's,
		// or the last frame's). Claimed under mu: nothing else starts.
		// A frame written as the bound passed ends the stream too: the
		// guard has counted and logged it ended, and the deadline stays
		// passed.
		w.closed = true
		w.mu.Unlock()
		w.failed(errWriteDeadline)
		return
	}
	if w.sub.Ended() {
		// Its last frame, after a pending report: the drain bounds it.
		w.startDrain()
		return
	}
	if st.inFlight() {
		w.mu.Unlock()
		return // pending: written queues w again
	}
	ack, rep, _ := w.next()
	if ack == nil {
		w.pending = false // the outbox was taken; an offer after it kicks
	}
	if ack == nil && rep == nil {
		w.mu.Unlock()
		return
	}
	w.running = true
	w.drains.Add(1)
	w.sent++
	w.stall.Arm() // disarmed once written (written), both under mu
	w.mu.Unlock()
	defer w.drains.Done()
	f := ack
	if f == nil {
		f = w.m.frames.Get(rep)
	}
	if err := w.st.Send(f); err != nil {
		w.mu.Lock()
		w.stall.Disarm()
		w.mu.Unlock()
		w.failed(err)
		return
	}
	w.mu.Lock()
	w.running = false
	again := w.kicked
	w.kicked = false
	w.mu.Unlock()
	if again {
		w.kick()
	}
}

// written is the native stream's frame written.
func (w *writer) written() {
	st := w.st.(asyncStream)
	w.mu.Lock()
	if st.writtenCount() >= w.sent {
		// The pump's last frame is out; a later one would have counted
		// itself in sent and armed its own bound first.
		w.stall.Disarm()
	}
	again := w.pending
	w.mu.Unlock()
	if again {
		w.kick()
	}
}

// startDrain hands w's sends to a drain goroutine; called under mu, which
// it releases.
func (w *writer) startDrain() {
	w.running = true
	w.drains.Add(1)
	w.mu.Unlock()
	go w.drain()
}
