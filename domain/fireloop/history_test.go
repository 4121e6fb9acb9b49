package fireloop

import (
	"context"
	"testing"
	"time"

	"github.com/loadreporter/loadreporter/domain"
	"github.com/loadreporter/loadreporter/domain/session"
)

// sink is a fake history sink.
type sink struct{ ch chan *domain.Report }

func (s sink) Record(r *domain.Report) { s.ch <- r }

func withHistory(s sink, every time.Duration) option {
	return func(o *Options) { o.History, o.HistoryInterval = s, every }
}

func TestHistoryIsDueWithoutRouters(t *testing.T) {
	t.Parallel()
	s := sink{ch: make(chan *domain.Report, 100)}
	h := newHarness(t, nil, withHistory(s, time.Second))
	if r := recv(t, s.ch); r.SequenceID != 1 {
		t.Fatalf("first recorded %d", r.SequenceID)
	}
	h.fires.next(t)
	for i := 1; i <= 3; i++ {
		h.advanceTo(time.Duration(i) * time.Second)
		if r := recv(t, s.ch); r.SequenceID != uint64(i+1) {
			t.Fatalf("recorded %d at %ds", r.SequenceID, i)
		}
		h.fires.next(t)
	}
	if h.engine.count() != 4 || h.loop.Count(session.KindHistory) != 1 {
		t.Fatalf("pulls %d", h.engine.count())
	}
}

func TestHistoryRecordsEveryStatusChangeOnce(t *testing.T) {
	t.Parallel()
	s := sink{ch: make(chan *domain.Report, 100)}
	h := newHarness(t, func(ctx context.Context, e *engine, n int) (domain.Snapshot, error) {
		if n == 4 || n == 5 {
			return domain.Snapshot{}, domain.Errorf(domain.CodeSourceFailed, "down")
		}
		return e.snapshot(4), nil
	}, withHistory(s, time.Second))
	// History fires first (due at once at start), then the router joins.
	if r := recv(t, s.ch); r.SequenceID != 1 {
		t.Fatalf("recorded %d", r.SequenceID)
	}
	h.fires.next(t)
	sub := h.register("a", 100, 60000)
	report(t, sub)
	h.fires.next(t)
	var recorded []uint64
	for i := 1; i <= 9; i++ {
		h.advanceTo(time.Duration(i) * 100 * ms)
		h.fires.next(t)
		report(t, sub)
		select {
		case r := <-s.ch:
			recorded = append(recorded, r.SequenceID)
		default:
		}
	}
	// Reports 2–3 healthy (not due), 4 UNREACHABLE (change), 5 still
	// UNREACHABLE (not due), 6 HEALTHY (change), 7–11 healthy (not due).
	if len(recorded) != 2 || recorded[0] != 4 || recorded[1] != 6 {
		t.Fatalf("recorded %v, want [4 6]", recorded)
	}
	h.advanceTo(time.Second)
	h.fires.next(t)
	if r := recv(t, s.ch); r.SequenceID != 12 {
		t.Fatalf("the 1 s history tick recorded %d", r.SequenceID)
	}
	select {
	case r := <-s.ch:
		t.Fatalf("report %d recorded twice", r.SequenceID)
	default:
	}
}

func TestHistoryOff(t *testing.T) {
	t.Parallel()
	s := sink{ch: make(chan *domain.Report, 1)}
	h := newHarness(t, nil, withHistory(s, 0))
	h.clock.Advance(time.Hour)
	if h.clock.Pending() != 0 || h.loop.Count(session.KindHistory) != 0 {
		t.Fatal("history interval 0 still scheduled history")
	}
}
