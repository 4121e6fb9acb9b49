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
// Offer has a single caller (the fire loop); Reports and Done are read by the
// session's own stream.
type Outbox struct {
	reports chan *domain.Report
	done    chan struct{}
	endOnce sync.Once
	endErr  error
	dropped atomic.Uint64
	notify  atomic.Pointer[func()]
}

// Notify makes every Offer and the outbox's end call f once the report is
// readable or Done is closed, so a transport can start writing only when
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
func NewOutbox() *Outbox {
	return &Outbox{reports: make(chan *domain.Report, 1), done: make(chan struct{})}
}

// Offer puts r in the outbox, replacing a report the reader has not taken
// yet. It reports whether one was replaced (dropped). It never blocks.
func (o *Outbox) Offer(r *domain.Report) (dropped bool) {
	select {
	case o.reports <- r:
		o.wake()
		return false
	default:
	}
	select {
	case <-o.reports:
		dropped = true
		o.dropped.Add(1)
	default: // the reader took it meanwhile
	}
	// Single producer: the buffer is empty now.
	o.reports <- r
	o.wake()
	return dropped
}

// Reports yields the latest undelivered report.
func (o *Outbox) Reports() <-chan *domain.Report { return o.reports }

// Done is closed once the session ended; Err then says why.
func (o *Outbox) Done() <-chan struct{} { return o.done }

// Err is why the session ended (a *domain.Error), or nil while it lives or
// when it ended without error.
func (o *Outbox) Err() error {
	select {
	case <-o.done:
		return o.endErr
	default:
		return nil
	}
}

// Dropped counts reports replaced before the reader took them.
func (o *Outbox) Dropped() uint64 { return o.dropped.Load() }

// end closes the outbox with err; only the first call counts.
func (o *Outbox) end(err error) {
	o.endOnce.Do(func() {
		o.endErr = err
		close(o.done)
		o.wake()
	})
}
