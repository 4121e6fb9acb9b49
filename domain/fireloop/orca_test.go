package fireloop

import (
	"testing"
	"time"

	"github.com/loadreporter/loadreporter/domain"
	"github.com/loadreporter/loadreporter/domain/session"
)

// TestORCASessionSharesPulls: an ORCA session is a session like any other.
// With a router of the same interval it shares every pull and receives the
// very report the router does; it holds no lease, so it outlives any lease
// length without a keep-alive; the observer counts it as "orca".
func TestORCASessionSharesPulls(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	hold := make(chan struct{}) // both join the first pull: it waits for the ORCA session
	h.engine.mu.Lock()
	h.engine.hold = hold
	h.engine.mu.Unlock()
	router := h.register("r", 100, 1000)
	h.waitIdle() // the first pull is running
	orca, err := h.loop.Subscribe(session.Options{
		Kind: session.KindORCA, Name: "orca test",
		Config: session.Config{Interval: h.loop.Limits().ClampInterval(100 * time.Millisecond)}, NoLease: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	close(hold)
	first := report(t, router)
	if got := report(t, orca); got != first {
		t.Fatalf("orca got report %d, the router %d: want the same report", got.SequenceID, first.SequenceID)
	}
	h.fires.next(t)
	for i := 1; i <= 20; i++ { // 2 s: twice the router's lease
		h.advanceTo(time.Duration(i) * 100 * time.Millisecond)
		f := h.fires.next(t)
		if i < 10 { // the router's lease runs out at 1 s, before that fire
			if r := report(t, router); r != f.Report {
				t.Fatalf("fire %d: the router got %d, want %d", i, r.SequenceID, f.Report.SequenceID)
			}
		}
		if r := report(t, orca); r != f.Report || f.Delivered["orca"] != 1 {
			t.Fatalf("fire %d: orca got %d (delivered %v), want %d", i, r.SequenceID, f.Delivered, f.Report.SequenceID)
		}
	}
	if got := ended(t, router); got != domain.CodeLeaseExpired {
		t.Fatalf("router ended with %q", got)
	}
	if pulls := h.engine.count(); pulls != 21 {
		t.Fatalf("%d pulls for 21 fires", pulls)
	}
	if h.loop.Count(session.KindORCA) != 1 {
		t.Fatal("the ORCA session did not outlive the lease")
	}
	orca.Close()
	if got := ended(t, orca); got != "" {
		t.Fatalf("a closed ORCA session ended with %q", got)
	}
}
