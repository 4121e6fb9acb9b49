package session

import (
	"sync"
	"sync/atomic"

	"github.com/loadreporter/loadreporter/domain"
)

// Outbox is a session's capacity-1, latest-wins mailbox (docs/routers.md): a slow
// reader misses intermediate reports but never holds more than one, and never
// delays the fire loop or other sessions.
//
// Offer has a single caller (the fire loop); the session's own stream reads
// it, either by waiting on the channels Reports and Done or, woken by
// Notify, with Take and Ended. The channels are made only when first
// asked for: a Monitor stream, which takes, holds a pointer and a flag
// instead of two channels.
type Outbox struct {
	latest  atomic.Pointer[domain.Report]       // the report waiting, while there is no channel
	reports atomic.Pointer[chan *domain.Report] // made by Reports; then it holds the report
	done    atomic.Pointer[chan struct{}]       // made by Done; closed at the end
	ended   atomic.Bool                         // set at the end, after endErr
	mu      sync.Mutex                          // orders making a channel against Offer and end
	endErr  error
	dropped atomic.Uint64
	notify  atomic.Pointer[func()]
}

// Notify makes every Offer and the outbox's end call f once the report is
// readable or the outbox ended, so a transport can start writing only when
// there is something to write instead of keeping a goroutine waiting.
// f runs on the fire loop's goroutine, with its lock held: it must not
// block. A later call replaces f.
func (o *Outbox) Notify(f func()) { o.notify.Store(&f) }

func (o *Outbox) wake() {
	if f := o.notify.Load(); f != nil {
		(*f)()
	}
}

// NewOutbox returns an empty, open outbox.
func NewOutbox() *Outbox { return &Outbox{} }

// Offer puts r in the outbox, replacing a report the reader has not taken
// yet. It reports whether one was replaced (dropped). It never blocks.
func (o *Outbox) Offer(r *domain.Report) (dropped bool) {
	ch := o.reports.Load()
	if ch == nil {
		o.mu.Lock()
		if ch = o.reports.Load(); ch == nil {
			dropped = o.latest.Swap(r) != nil
			o.mu.Unlock()
			return o.offered(dropped)
		}
		o.mu.Unlock()
	}
	select {
	case *ch <- r:
		return o.offered(false)
	default:
	}
	select {
	case <-*ch:
		dropped = true
	default: // the reader took it meanwhile
	}
	// Single producer: the buffer is empty now.
	*ch <- r
	return o.offered(dropped)
}

func (o *Outbox) offered(dropped bool) bool {
	if dropped {
		o.dropped.Add(1)
	}
	o.wake()
	return dropped
}

// Take returns the latest undelivered report and empties the outbox, or
// nil when none waits.
func (o *Outbox) Take() *domain.Report {
	if ch := o.reports.Load(); ch != nil {
		select {
		case r := <-*ch:
			return r
		default:
			return nil
		}
	}
	return o.latest.Swap(nil)
}

// Reports yields the latest undelivered report.
func (o *Outbox) Reports() <-chan *domain.Report {
	if ch := o.reports.Load(); ch != nil {
		return *ch
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if ch := o.reports.Load(); ch != nil {
		return *ch
	}
	ch := make(chan *domain.Report, 1)
	if r := o.latest.Swap(nil); r != nil {
		ch <- r
	}
	o.reports.Store(&ch)
	return ch
}

// Done is closed once the session ended; Err then says why.
func (o *Outbox) Done() <-chan struct{} {
	if ch := o.done.Load(); ch != nil {
		return *ch
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if ch := o.done.Load(); ch != nil {
		return *ch
	}
	ch := make(chan struct{})
	if o.ended.Load() {
		close(ch)
	}
	o.done.Store(&ch)
	return ch
}

// Ended says whether the session ended.
func (o *Outbox) Ended() bool { return o.ended.Load() }

// Err is why the session ended (a *domain.Error), or nil while it lives or
// when it ended without error.
func (o *Outbox) Err() error {
	if !o.ended.Load() {
		return nil
	}
	return o.endErr
}

// Dropped counts reports replaced before the reader took them.
func (o *Outbox) Dropped() uint64 { return o.dropped.Load() }

// end closes the outbox with err; only the first call counts.
func (o *Outbox) end(err error) {
	o.mu.Lock()
	if o.ended.Load() {
		o.mu.Unlock()
		return
	}
	o.endErr = err
	o.ended.Store(true)
	if ch := o.done.Load(); ch != nil {
		close(*ch)
	}
	o.mu.Unlock()
	o.wake()
}
