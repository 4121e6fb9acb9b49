package session

import (
	"sync"
	"testing"
	"time"

	"github.com/loadreporter/loadreporter/domain"
)

// TestRenewWithoutTheTable: Renew does what Table.KeepAlive does, and once
// the table swept the lease or removed the session, no renewal revives it.
func TestRenewWithoutTheTable(t *testing.T) {
	t.Parallel()
	tb := NewTable(DefaultLimits(), Grid{Schedule: Anchored}, epoch)
	s := mustAdd(t, tb, monitor("r", 100*time.Millisecond, time.Second), ms(0))
	if !s.Renew(ms(900)) {
		t.Fatal("a live session refused a renewal")
	}
	if got := tb.Sweep(ms(1800)).Expired; len(got) != 0 {
		t.Fatal("the lease expired despite the renewal at 900 ms")
	}
	if w := tb.Sweep(ms(1800)).Wake; !w.Equal(ms(0)) {
		t.Fatalf("wake %v, want the first deadline", w.Sub(epoch))
	}
	tb.Deliver(report(1), ms(0))
	if w := tb.Sweep(ms(1800)).Wake; !w.Equal(ms(100)) {
		t.Fatalf("wake %v, want 100 ms", w.Sub(epoch))
	}
	if got := tb.Sweep(ms(1900)).Expired; len(got) != 1 || domain.ErrorCode(s.Outbox().Err()) != domain.CodeLeaseExpired {
		t.Fatalf("expired %d, err %v", len(got), s.Outbox().Err())
	}
	if s.Renew(ms(1900)) || tb.KeepAlive(s, ms(1900)) {
		t.Fatal("an expired session was renewed")
	}

	replaced := mustAdd(t, tb, monitor("q", 100*time.Millisecond, time.Second), ms(0))
	mustAdd(t, tb, monitor("q", 100*time.Millisecond, time.Second), ms(10))
	if replaced.Renew(ms(20)) {
		t.Fatal("a replaced session was renewed")
	}
	watch := mustAdd(t, tb, Options{Kind: KindWatch, Name: "w", Config: Config{Interval: time.Second}, NoLease: true}, ms(0))
	if !watch.Renew(ms(5000)) || len(tb.Sweep(ms(1<<30)).Expired) != 1 { // only q's lease runs out
		t.Fatal("a session without a lease was refused or expired")
	}
}

// TestRenewRacesTheSweep runs renewals against the table's sweeps (the
// race detector checks the sharing): every renewal either lands before the
// sweep, and the session lives on, or finds the session ended.
func TestRenewRacesTheSweep(t *testing.T) {
	t.Parallel()
	tb := NewTable(DefaultLimits(), Grid{Schedule: Anchored}, epoch)
	s := mustAdd(t, tb, monitor("r", time.Second, time.Second), ms(0))
	var wg sync.WaitGroup
	results := make(chan bool, 1000)
	wg.Go(func() {
		for i := range 1000 {
			results <- s.Renew(ms(i))
		}
	})
	var expired bool
	for i := 0; i < 4000 && !expired; i += 7 {
		expired = len(tb.Sweep(ms(i)).Expired) == 1
	}
	wg.Wait()
	close(results)
	sawFalse := false
	for ok := range results {
		if ok && sawFalse {
			t.Fatal("a renewal succeeded after one found the session ended")
		}
		sawFalse = sawFalse || !ok
	}
	if !expired {
		t.Fatal("the lease never expired")
	}
}

// TestRenewNeverShortensTheLease: a renewal that lands after a later one
// (two goroutines, each with its own now) keeps the later expiry. The
// table watches leases through a lower bound on their expiries that only
// Add and Update lower; a renewal that moved an expiry earlier would run
// out unseen until the bound.
func TestRenewNeverShortensTheLease(t *testing.T) {
	t.Parallel()
	tb := NewTable(DefaultLimits(), Grid{Schedule: Anchored}, epoch)
	s := mustAdd(t, tb, monitor("r", time.Minute, time.Second), ms(0))
	tb.Deliver(report(1), ms(0))
	if !s.Renew(ms(900)) || !s.Renew(ms(500)) {
		t.Fatal("a live session refused a renewal")
	}
	if sw := tb.Sweep(ms(1600)); len(sw.Expired) != 0 || !sw.Wake.Equal(ms(1900)) {
		t.Fatalf("at 1.6 s: %d expired, wake %v; want the lease to 1.9 s kept", len(sw.Expired), sw.Wake.Sub(epoch))
	}
	if got := tb.Sweep(ms(1900)).Expired; len(got) != 1 {
		t.Fatalf("at 1.9 s: %d expired, want the session", len(got))
	}
}
