package sim

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/loadreporter/loadreporter/domain"
	"github.com/loadreporter/loadreporter/ports/porttest"
)

func newSim(t *testing.T, ranks int) (*Source, *porttest.Clock) {
	t.Helper()
	clk := porttest.NewClock(time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC))
	s, err := New(Options{Ranks: ranks, Clock: clk, Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	return s, clk
}

func TestDriftStaysConsistent(t *testing.T) {
	s, clk := newSim(t, 0)
	var last domain.Snapshot
	changed := false
	for i := range 500 {
		clk.Advance(100 * time.Millisecond)
		snap, err := s.Pull(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if err := domain.ValidateSnapshot(snap, domain.RankRange(DefaultRanks)); err != nil {
			t.Fatalf("pull %d: %v", i, err)
		}
		for _, r := range snap.Ranks {
			if !r.SnapshotTime.Equal(clk.Now()) || r.TokenUsage < 0 || r.TokenUsage > 1 || r.CacheHitRate < 0 || r.CacheHitRate > 1 {
				t.Fatalf("pull %d rank %d: %+v", i, r.DPRank, r)
			}
		}
		if i > 0 && snap.Ranks[0].NumRunningReqs != last.Ranks[0].NumRunningReqs {
			changed = true
		}
		last = snap
	}
	if !changed {
		t.Fatal("the simulated load never moved")
	}
}

func TestModes(t *testing.T) {
	s, clk := newSim(t, 4)
	ctx := context.Background()

	if err := s.SetMode("stall"); err != nil {
		t.Fatal(err)
	}
	stalledAt := clk.Now()
	clk.Advance(5 * time.Second)
	snap, err := s.Pull(ctx)
	if err != nil || !snap.Ranks[0].SnapshotTime.Equal(stalledAt) {
		t.Fatalf("stall: snapshot time %v, want frozen at %v (%v)", snap.Ranks[0].SnapshotTime, stalledAt, err)
	}
	b := domain.ReportBuilder{StaleAfter: 3 * time.Second}
	if r := b.Build(1, clk.Now(), snap, nil, domain.RankRange(4)); r.Status != domain.StatusStale {
		t.Fatalf("stall gives %v, want STALE", r.Status)
	}

	_ = s.SetMode("error")
	if _, err := s.Pull(ctx); err == nil || !strings.Contains(err.Error(), "sim mode error") {
		t.Fatalf("error mode: %v", err)
	}

	_ = s.SetMode("garbage")
	snap, err = s.Pull(ctx)
	if err != nil || domain.ErrorCode(domain.ValidateSnapshot(snap, domain.RankRange(4))) != domain.CodeInvalidSnapshot {
		t.Fatalf("garbage must fail validation: %v", err)
	}

	_ = s.SetMode("hang")
	hctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { _, err := s.Pull(hctx); done <- err }()
	cancel()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("hang returned no error when cancelled")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("hang ignored cancellation")
	}

	_ = s.SetMode("normal")
	if err := s.SetMode("ranks 6"); err != nil {
		t.Fatal(err)
	}
	snap, _ = s.Pull(ctx)
	if len(snap.Ranks) != 6 {
		t.Fatalf("ranks 6 gave %d", len(snap.Ranks))
	}
	if mode, n := s.State(); mode != "normal" || n != 6 {
		t.Fatalf("state %s %d", mode, n)
	}
}

func TestBadModesNameWhatIsAllowed(t *testing.T) {
	s, _ := newSim(t, 4)
	for _, bad := range []string{"sideways", "ranks", "ranks 0", "ranks x", "ranks 5000", ""} {
		err := s.SetMode(bad)
		if domain.ErrorCode(err) != domain.CodeInvalidArgument || !strings.Contains(domain.ErrorMessage(err), "sim mode") {
			t.Errorf("%q: %v", bad, err)
		}
	}
	if _, err := New(Options{Ranks: -1, Clock: porttest.NewClock(time.Now())}); err == nil {
		t.Error("negative ranks accepted")
	}
}
