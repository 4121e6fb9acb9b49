package session

import (
	"sync"
	"testing"

	"github.com/loadreporter/loadreporter/domain"
)

// A reader that takes (a Monitor stream, woken by Notify) gets the latest
// report and the end without the outbox ever making a channel: an open
// outbox is one allocation, and offering and taking allocate nothing.
func TestAnOutboxReadByTakeMakesNoChannel(t *testing.T) {
	var keep *Outbox
	if n := testing.AllocsPerRun(100, func() { keep = NewOutbox() }); n != 1 || keep == nil {
		t.Errorf("NewOutbox allocates %v times, want 1", n)
	}
	o := NewOutbox()
	r1, r2 := &domain.Report{SequenceID: 1}, &domain.Report{SequenceID: 2}
	if n := testing.AllocsPerRun(100, func() { o.Offer(r1); o.Take() }); n != 0 {
		t.Errorf("an offer and a take allocate %v times, want 0", n)
	}
	if o.Take() != nil {
		t.Fatal("Take on an empty outbox returned a report")
	}
	woken := 0
	o.Notify(func() { woken++ })
	if o.Offer(r1) || !o.Offer(r2) {
		t.Error("the second offer before a take did not report the first dropped")
	}
	if got := o.Take(); got != r2 || o.Take() != nil || o.Dropped() != 1 {
		t.Errorf("took %v then more; dropped %d; want report 2 once, 1 dropped", got, o.Dropped())
	}
	if o.Ended() || o.Err() != nil {
		t.Error("an open outbox says it ended")
	}
	end := domain.Errorf(domain.CodeLeaseExpired, "lease expired")
	o.end(end)
	o.end(domain.Errorf(domain.CodeReplaced, "replaced"))
	if !o.Ended() || o.Err() != end || woken != 3 {
		t.Errorf("after end: ended %v, err %v, woken %d; want true, the first cause, 3", o.Ended(), o.Err(), woken)
	}
	if o.reports.Load() != nil || o.done.Load() != nil {
		t.Error("a channel was made though no reader asked for one")
	}
	select {
	case <-o.Done(): // made after the end: closed already
	default:
		t.Error("Done made after the end is open")
	}
}

// A reader that waits on Reports gets the report offered before it asked,
// and every later one, latest first; Done made before the end closes at
// the end.
func TestAnOutboxMakesItsChannelsWhenFirstAskedFor(t *testing.T) {
	o := NewOutbox()
	r1, r2, r3 := &domain.Report{SequenceID: 1}, &domain.Report{SequenceID: 2}, &domain.Report{SequenceID: 3}
	o.Offer(r1)
	if got := <-o.Reports(); got != r1 {
		t.Fatalf("Reports gave %v, want the report offered before it was made", got)
	}
	o.Offer(r2)
	if !o.Offer(r3) {
		t.Error("an offer over an unread report on the channel did not report a drop")
	}
	if got := o.Take(); got != r3 {
		t.Errorf("Take over the channel gave %v, want report 3", got)
	}
	done := o.Done()
	var wg sync.WaitGroup
	wg.Go(func() { <-done })
	o.end(nil)
	wg.Wait() // hangs if end does not close the channel Done made
	if !o.Ended() || o.Err() != nil {
		t.Errorf("ended %v err %v; want true, nil", o.Ended(), o.Err())
	}
}

// Offers racing the reader's first Reports lose nothing: the reader ends
// up with the last report offered.
func TestOffersRacingTheFirstReportsLoseNothing(t *testing.T) {
	for range 200 {
		o := NewOutbox()
		last := &domain.Report{SequenceID: 100}
		var wg sync.WaitGroup
		wg.Go(func() {
			for i := range uint64(99) {
				o.Offer(&domain.Report{SequenceID: i + 1})
			}
			o.Offer(last)
		})
		ch := o.Reports()
		wg.Wait()
		var got *domain.Report
		for got != last {
			select {
			case got = <-ch:
			default:
				t.Fatalf("the channel is empty after report %v; want report 100 there", got)
			}
		}
	}
}
