package fireloop

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/loadreporter/loadreporter/domain"
	"github.com/loadreporter/loadreporter/domain/session"
)

func TestPollServesAFreshReportWithoutPulling(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	sub := h.register("r", 1000, 60000)
	first := report(t, sub)
	h.fires.next(t)
	h.clock.Advance(999 * ms)
	got, err := h.loop.Poll(context.Background(), time.Second)
	if err != nil || got != first {
		t.Fatalf("got %v, %v; want the latest report", got, err)
	}
	if h.engine.count() != 1 {
		t.Fatalf("a poll of a fresh report pulled (pulls = %d)", h.engine.count())
	}
}

func TestPollJoinsTheNextFireWhenStale(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	got, err := h.loop.Poll(context.Background(), time.Second)
	if err != nil || got.SequenceID != 1 || got.Status != domain.StatusHealthy {
		t.Fatalf("got %+v, %v", got, err)
	}
	h.fires.next(t)
	h.clock.Advance(time.Second) // now exactly max age: no longer fresh
	got, err = h.loop.Poll(context.Background(), time.Second)
	if err != nil || got.SequenceID != 2 {
		t.Fatalf("got %+v, %v; want a new report", got, err)
	}
	if n := h.loop.Count(session.KindPoll); n != 0 {
		t.Fatalf("%d poll sessions left behind", n)
	}
}

func TestConcurrentPollsShareOnePull(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	hold := make(chan struct{})
	h.engine.mu.Lock()
	h.engine.hold = hold
	h.engine.mu.Unlock()
	results := make(chan *domain.Report, 50)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // the first poll starts the pull, which is held
		defer wg.Done()
		r, _ := h.loop.Poll(context.Background(), time.Second)
		results <- r
	}()
	h.waitIdle() // the pull is running
	for range 49 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, _ := h.loop.Poll(context.Background(), time.Second)
			results <- r
		}()
	}
	// Wait until every poller has joined (registered) before releasing.
	deadline := time.After(5 * time.Second)
	for h.loop.Count(session.KindPoll) < 50 {
		select {
		case <-deadline:
			t.Fatalf("only %d pollers joined", h.loop.Count(session.KindPoll))
		case <-time.After(time.Millisecond):
		}
	}
	close(hold)
	wg.Wait()
	close(results)
	for r := range results {
		if r == nil || r.SequenceID != 1 {
			t.Fatalf("a poller got %v, want report 1", r)
		}
	}
	if h.engine.count() != 1 {
		t.Fatalf("50 concurrent polls made %d pulls, want 1", h.engine.count())
	}
}

func TestPollGivesUpWithItsContext(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(ctx context.Context, e *engine, n int) (domain.Snapshot, error) {
		<-ctx.Done()
		return domain.Snapshot{}, ctx.Err()
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { _, err := h.loop.Poll(ctx, time.Second); done <- err }()
	h.waitIdle()
	cancel()
	if err := recv(t, done); err == nil {
		t.Fatal("a cancelled poll returned no error")
	}
}

// TestPollSaysShuttingDownEvenWithAFreshReport: once the loop shuts down,
// a poller learns it rather than the latest numbers of a worker about to
// go.
func TestPollSaysShuttingDownEvenWithAFreshReport(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	sub := h.register("r", 1000, 60000)
	_ = report(t, sub)
	h.loop.Shutdown()
	if _, err := h.loop.Poll(context.Background(), time.Hour); domain.ErrorCode(err) != domain.CodeShuttingDown {
		t.Fatalf("poll after shutdown: %v, want SHUTTING_DOWN", err)
	}
}
