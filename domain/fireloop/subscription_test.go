package fireloop

import (
	"context"
	"testing"
	"time"

	"github.com/loadreporter/loadreporter/domain"
)

// TestKeepAliveTakesNoLock: a keep-alive completes while the loop holds
// its lock (as during a fire's pass over the table), so a flood of
// keep-alives never queues in front of the loop; the renewal still counts.
func TestKeepAliveTakesNoLock(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	sub := h.register("r", 100, 1000)
	report(t, sub)
	h.fires.next(t)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()

	h.loop.mu.Lock()
	h.clock.Advance(900 * time.Millisecond)
	done := make(chan error, 1)
	go func() {
		var err error
		for range 1000 {
			err = sub.KeepAlive()
		}
		done <- err
	}()
	select {
	case err := <-done:
		h.loop.mu.Unlock()
		if err != nil {
			t.Fatal(err)
		}
	case <-ctx.Done():
		h.loop.mu.Unlock()
		t.Fatal("KeepAlive waited for the loop's lock")
	}
	// Renewed at 900 ms: the lease runs to 1900 ms, not 1000 ms.
	h.loop.mu.Lock()
	expired := len(h.loop.table.Sweep(t0.Add(1899 * time.Millisecond)).Expired)
	h.loop.mu.Unlock()
	if expired != 0 {
		t.Fatal("the keep-alive did not renew the lease")
	}
	h.loop.Shutdown()
	if err := sub.KeepAlive(); domain.ErrorCode(err) != domain.CodeShuttingDown {
		t.Fatalf("KeepAlive after shutdown: %v, want SHUTTING_DOWN", err)
	}
}
