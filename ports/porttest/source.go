package porttest

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loadreporter/loadreporter/domain"
	"github.com/loadreporter/loadreporter/ports"
)

// EngineState is how the engine behind a source under the source contract
// behaves.
type EngineState int

// Engine states a source harness must be able to stand up.
const (
	// EngineHealthy serves the load of ranks 0 and 1, valid and busy
	// (requests running on each rank).
	EngineHealthy EngineState = iota
	// EngineDead cannot be read: nothing listens, or it fails every read.
	EngineDead
	// EngineGarbage answers with what is not load: a body that does not
	// parse, or values that break the snapshot's invariants.
	EngineGarbage
	// EngineHang accepts a pull and never answers it.
	EngineHang
)

func (s EngineState) String() string {
	return [...]string{"healthy", "dead", "garbage", "hang"}[s]
}

// SourceEngine is what a harness stands up for one case of the contract.
type SourceEngine struct {
	State EngineState
	// APIKey is the key the source must send the engine; it must never
	// show in an error.
	APIKey string
}

// SourceWait bounds every wait of the source contract: a pull that
// outlives its context by more has ignored it.
const SourceWait = 10 * time.Second

// SnapshotSource runs the contract every snapshot source keeps. name is
// the source's, for messages. newSource stands up an engine in the given
// state and returns the source under test reading it, built with the
// system clock, started if it works in the background (and, then, once it
// has heard a healthy or garbage engine), and released through t.Cleanup.
//
// The contract: from a healthy engine a pull yields exactly ranks 0 and
// 1, valid, their snapshot times zero (the report's time stands in) or
// within the test; pulls may run at once; a pull from a hung engine
// returns when its context ends, by deadline (PULL_TIMEOUT) or
// cancellation, matching the context's error; a dead engine fails with
// SOURCE_FAILED; a garbage answer fails (SOURCE_FAILED when it does not
// parse, INVALID_SNAPSHOT when it parses into what cannot be load) or
// yields a snapshot domain.ValidateSnapshot refuses; and every error is a
// *domain.Error on one line that never shows the API key.
func SnapshotSource(t *testing.T, name string, newSource func(t *testing.T, e SourceEngine) ports.SnapshotSource) {
	const key = "contract-secret-key"
	t.Run("RankSetAndTimestamps", func(t *testing.T) {
		t.Parallel()
		began := time.Now()
		s := newSource(t, SourceEngine{State: EngineHealthy, APIKey: key})
		snap := pullHealthy(t, s)
		ended := time.Now()
		if err := domain.ValidateSnapshot(snap, domain.RankRange(2)); err != nil {
			t.Fatalf("a healthy engine's snapshot is refused: %v", err)
		}
		for _, r := range snap.Ranks {
			if at := r.SnapshotTime; !at.IsZero() && (at.Before(began.Add(-time.Second)) || at.After(ended.Add(time.Second))) {
				t.Errorf("rank %d: snapshot time %s, outside the test's [%s, %s]", r.DPRank, at, began, ended)
			}
		}
	})
	t.Run("ConcurrentPulls", func(t *testing.T) {
		t.Parallel()
		s := newSource(t, SourceEngine{State: EngineHealthy, APIKey: key})
		pullHealthy(t, s)
		var wg sync.WaitGroup
		errs := make(chan error, 20)
		for range 4 {
			wg.Go(func() {
				for range 5 {
					ctx, cancel := context.WithTimeout(t.Context(), SourceWait)
					snap, err := s.Pull(ctx)
					cancel()
					if err == nil {
						err = domain.ValidateSnapshot(snap, domain.RankRange(2))
					}
					if err != nil {
						errs <- err
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Errorf("a pull beside others: %v", err)
		}
	})
	t.Run("PullBudget", func(t *testing.T) {
		t.Parallel()
		s := newSource(t, SourceEngine{State: EngineHang, APIKey: key})
		ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
		defer cancel()
		err := pullHung(t, ctx, s, name, key, "a pull that outlived its deadline")
		if errors.Is(err, context.DeadlineExceeded) && domain.ErrorCode(err) != domain.CodePullTimeout {
			t.Errorf("a pull that timed out: code %s, want %s", domain.ErrorCode(err), domain.CodePullTimeout)
		}
	})
	t.Run("Cancellation", func(t *testing.T) {
		t.Parallel()
		s := newSource(t, SourceEngine{State: EngineHang, APIKey: key})
		ctx, cancel := context.WithCancel(t.Context())
		time.AfterFunc(50*time.Millisecond, cancel)
		pullHung(t, ctx, s, name, key, "a cancelled pull")
	})
	t.Run("DeadEngine", func(t *testing.T) {
		t.Parallel()
		s := newSource(t, SourceEngine{State: EngineDead, APIKey: key})
		ctx, cancel := context.WithTimeout(t.Context(), SourceWait)
		defer cancel()
		_, err := pullWithin(t, ctx, s)
		if err == nil {
			t.Fatal("a dead engine's pull succeeded")
		}
		checkText(t, name, key, err)
		if c := domain.ErrorCode(err); c != domain.CodeSourceFailed {
			t.Errorf("a dead engine: code %s, want %s (%v)", c, domain.CodeSourceFailed, err)
		}
	})
	t.Run("GarbageAnswer", func(t *testing.T) {
		t.Parallel()
		s := newSource(t, SourceEngine{State: EngineGarbage, APIKey: key})
		ctx, cancel := context.WithTimeout(t.Context(), SourceWait)
		defer cancel()
		snap, err := pullWithin(t, ctx, s)
		switch c := domain.ErrorCode(err); {
		case err != nil:
			checkText(t, name, key, err)
			// An answer that does not parse is the engine failing; one
			// that parses into what cannot be load is an invalid snapshot.
			if c != domain.CodeInvalidSnapshot && c != domain.CodeSourceFailed {
				t.Errorf("a garbage answer: code %s, want %s or %s (%v)", c, domain.CodeInvalidSnapshot, domain.CodeSourceFailed, err)
			}
		case domain.ValidateSnapshot(snap, domain.RankRange(2)) == nil:
			t.Errorf("a garbage answer yielded a valid snapshot: %+v", snap)
		}
	})
}

// pullHealthy pulls s, which must yield a snapshot.
func pullHealthy(t *testing.T, s ports.SnapshotSource) domain.Snapshot {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), SourceWait)
	defer cancel()
	snap, err := pullWithin(t, ctx, s)
	if err != nil {
		t.Fatalf("a healthy engine's pull: %v", err)
	}
	return snap
}

// pullWithin pulls s with ctx and fails the test if the pull outlives ctx
// by SourceWait.
func pullWithin(t *testing.T, ctx context.Context, s ports.SnapshotSource) (domain.Snapshot, error) {
	t.Helper()
	type result struct {
		snap domain.Snapshot
		err  error
	}
	done := make(chan result, 1)
	go func() {
		snap, err := s.Pull(ctx)
		done <- result{snap, err}
	}()
	select {
	case r := <-done:
		return r.snap, r.err
	case <-ctx.Done():
	}
	bound := time.NewTimer(SourceWait)
	defer bound.Stop()
	select {
	case r := <-done:
		return r.snap, r.err
	case <-bound.C:
		t.Fatalf("Pull did not return within %s of its context ending", SourceWait)
		return domain.Snapshot{}, nil
	}
}

// pullHung pulls s, whose engine never answers, with ctx: the pull must
// fail, with an error checkText passes and, once ctx has ended, that
// matches ctx's own (context.DeadlineExceeded, context.Canceled); what
// names that pull in a failure.
func pullHung(t *testing.T, ctx context.Context, s ports.SnapshotSource, name, key, what string) error {
	t.Helper()
	_, err := pullWithin(t, ctx, s)
	if err == nil {
		t.Fatal("a pull of an engine that never answers succeeded")
	}
	checkText(t, name, key, err)
	if cause := ctx.Err(); cause != nil && !errors.Is(err, cause) {
		t.Errorf("%s: %v, want it to match %v", what, err, cause)
	}
	return err
}

// checkText checks an error as last_error shows it: one line, the
// source's own words (a *domain.Error, not the generic text of anything
// else), without the API key.
func checkText(t *testing.T, name, key string, err error) {
	t.Helper()
	if err == nil {
		return
	}
	var de *domain.Error
	if !errors.As(err, &de) {
		t.Errorf("%s: error %v is not a *domain.Error: last_error would read %q", name, err, domain.ErrorMessage(err))
	}
	msg := domain.ErrorMessage(err)
	if strings.ContainsAny(msg, "\r\n") {
		t.Errorf("error spans lines: %q", msg)
	}
	if strings.Contains(err.Error(), key) {
		t.Errorf("error shows the API key: %q", err.Error())
	}
}
