package recorder_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loadreporter/loadreporter/domain"
	"github.com/loadreporter/loadreporter/domain/recorder"
	"github.com/loadreporter/loadreporter/internal/sharedtest"
	"github.com/loadreporter/loadreporter/ports/porttest"
)

func TestRetriesWithCappedBackoffAndCatchesUp(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	clk := porttest.NewClock(t0)
	var mu sync.Mutex
	failuresLeft := 4
	count := map[int]int{}
	var batches [][]int
	store := fakeStore{append: func(ctx context.Context, rs []*domain.Report) error {
		mu.Lock()
		defer mu.Unlock()
		if failuresLeft > 0 {
			failuresLeft--
			return domain.Errorf(domain.CodeUnavailable, "database down")
		}
		batches = append(batches, seqs(rs))
		for _, s := range seqs(rs) {
			count[s]++
		}
		return nil
	}}
	obs := newObserver()
	var logs strings.Builder // written by the writer goroutine, read after Close
	r := newRecorder(t, recorder.Options{
		Store: store, Clock: clk, Observer: obs, BufferSize: 100, BatchSize: 2, MaxDelay: time.Hour,
		Backoff: &doubling{from: 100 * time.Millisecond}, MinBackoff: 100 * time.Millisecond, MaxBackoff: 300 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(&logs, nil)),
	})
	r.Record(rep(1))
	r.Record(rep(2))
	for i, want := range []time.Duration{100, 200, 300, 300} {
		f := recv(t, ctx, obs.failed, "a failed write")
		if f.retryIn != want*time.Millisecond || domain.ErrorCode(f.err) != domain.CodeUnavailable {
			t.Errorf("failure %d: retry in %s (%v), want %s", i+1, f.retryIn, f.err, want*time.Millisecond)
		}
		if i == 0 { // reports keep coming while the store is down
			for s := 3; s <= 9; s++ {
				r.Record(rep(s))
			}
		}
		if err := clk.WaitPending(ctx, 1); err != nil {
			t.Fatal(err)
		}
		if at, _ := clk.Next(); !at.Equal(clk.Now().Add(f.retryIn)) {
			t.Errorf("failure %d: next attempt at %s, want now + %s", i+1, at.Sub(clk.Now()), f.retryIn)
		}
		s := r.Stats()
		if !s.Failing || domain.ErrorCode(s.LastError) != domain.CodeUnavailable || s.Failures != int64(i+1) {
			t.Errorf("stats after failure %d: %+v", i+1, s)
		}
		clk.Advance(f.retryIn)
	}
	// Back: the kept batch, then full batches without waiting.
	for range 4 {
		recv(t, ctx, obs.written, "a catch-up batch")
	}
	if err := r.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if want := [][]int{{1, 2}, {3, 4}, {5, 6}, {7, 8}, {9}}; fmt.Sprint(batches) != fmt.Sprint(want) {
		t.Errorf("batches %v, want %v", batches, want)
	}
	for s := 1; s <= 9; s++ {
		if count[s] != 1 {
			t.Errorf("report %d written %d times", s, count[s])
		}
	}
	s := r.Stats()
	if s.Failing || s.Failures != 4 || s.LastError == nil || !s.LastErrorAt.Equal(t0.Add(600*time.Millisecond)) || s.Written != 9 || s.Dropped != 0 {
		t.Errorf("final stats %+v", s)
	}
	checkBalance(t, s)
	// The end of the failures has its line, once.
	if n := strings.Count(logs.String(), "history: writes succeed again"); n != 1 {
		t.Errorf("%d recovery lines, want 1:\n%s", n, logs.String())
	}
}

// script is a ports.Backoff that replays waits from the start after Reset.
type script struct {
	waits []time.Duration
	i     int
}

func (s *script) NextBackOff() time.Duration { d := s.waits[s.i%len(s.waits)]; s.i++; return d }
func (s *script) Reset()                     { s.i = 0 }

// TestBackoffIsBoundedAndStartsOverPerBatch: whatever the Backoff says,
// a wait stays within [MinBackoff, MaxBackoff] (a Backoff that gives up
// waits the cap: the batch is kept), and each batch starts it over.
func TestBackoffIsBoundedAndStartsOverPerBatch(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	clk := porttest.NewClock(t0)
	var mu sync.Mutex
	fail := map[int]int{1: 3, 2: 1} // failures before success, per report
	store := fakeStore{append: func(ctx context.Context, rs []*domain.Report) error {
		mu.Lock()
		defer mu.Unlock()
		if s := int(rs[0].SequenceID); fail[s] > 0 {
			fail[s]--
			return domain.Errorf(domain.CodeUnavailable, "database down")
		}
		return nil
	}}
	obs := newObserver()
	r := newRecorder(t, recorder.Options{
		Store: store, Clock: clk, Observer: obs, BatchSize: 1,
		Backoff:    &script{waits: []time.Duration{10 * time.Millisecond, 5 * time.Second, -1}},
		MinBackoff: 100 * time.Millisecond, MaxBackoff: time.Second,
	})
	expect := func(report int, want ...time.Duration) {
		t.Helper()
		for i, w := range want {
			f := recv(t, ctx, obs.failed, "a failed write")
			if f.retryIn != w {
				t.Errorf("report %d, failure %d: retry in %s, want %s", report, i+1, f.retryIn, w)
			}
			if err := clk.WaitPending(ctx, 1); err != nil {
				t.Fatal(err)
			}
			clk.Advance(f.retryIn)
		}
		recv(t, ctx, obs.written, "the retried write")
	}
	r.Record(rep(1))
	expect(1, 100*time.Millisecond, time.Second, time.Second)
	r.Record(rep(2))
	expect(2, 100*time.Millisecond)
	if s := r.Stats(); s.Written != 2 || s.Dropped != 0 || s.Failures != 4 {
		t.Errorf("stats %+v", s)
	}
}

// TestCloseRetriesAtOnceWhileBackingOff: the store failed and the writer
// waits out a retry longer than the shutdown grace; the store is back. Close
// makes the writer try again at once, so nothing is lost, and while the
// store still fails during the grace it keeps trying every MinBackoff
// rather than waiting out its backoff.
func TestCloseRetriesAtOnceWhileBackingOff(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	clk := porttest.NewClock(t0)
	var mu sync.Mutex
	down := true
	store := fakeStore{append: func(ctx context.Context, rs []*domain.Report) error {
		mu.Lock()
		defer mu.Unlock()
		if down {
			return domain.Errorf(domain.CodeUnavailable, "database down")
		}
		return nil
	}}
	obs := newObserver()
	r := newRecorder(t, recorder.Options{
		Store: store, Clock: clk, Observer: obs, BufferSize: 100, BatchSize: 100, MaxDelay: time.Hour,
		Backoff: &doubling{from: 6 * time.Second}, MinBackoff: 100 * time.Millisecond, MaxBackoff: 10 * time.Second,
	})
	for s := 1; s <= 100; s++ {
		r.Record(rep(s))
	}
	if f := recv(t, ctx, obs.failed, "a failed write"); f.retryIn != 6*time.Second {
		t.Fatalf("retry in %s, want 6s", f.retryIn)
	}
	go func() { // still down when the shutdown starts; back a little later
		recv(t, ctx, obs.failed, "the retry Close made")
		if err := clk.WaitPending(ctx, 1); err != nil {
			t.Error(err)
			return
		}
		if at, _ := clk.Next(); !at.Equal(clk.Now().Add(100 * time.Millisecond)) {
			t.Errorf("while closing, the next attempt is %s away, want MinBackoff", at.Sub(clk.Now()))
		}
		mu.Lock()
		down = false
		mu.Unlock()
		clk.Advance(100 * time.Millisecond)
	}()
	closeCtx, cancel := context.WithTimeout(ctx, 5*time.Second) // never advanced by the fake clock
	defer cancel()
	if err := r.Close(closeCtx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if s := r.Stats(); s.Written != 100 || s.Dropped != 0 {
		t.Fatalf("written %d, dropped %d; want all 100 written", s.Written, s.Dropped)
	}
}

// TestCloseBetweenAFailureAndItsWaitRetriesAtOnce: Close may begin after a
// write failed but before the writer starts waiting out its retry; that
// wait still ends at once (the fake clock never moves here, so a writer
// that waited even MinBackoff would hold Close to its deadline).
func TestCloseBetweenAFailureAndItsWaitRetriesAtOnce(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	var mu sync.Mutex
	down := true
	store := fakeStore{append: func(context.Context, []*domain.Report) error {
		mu.Lock()
		defer mu.Unlock()
		if down {
			down = false // back for the retry
			return domain.Errorf(domain.CodeUnavailable, "database down")
		}
		return nil
	}}
	obs := newObserver()
	obs.failed = make(chan failure) // the writer stays in WriteFailed until the test reads
	r := newRecorder(t, recorder.Options{
		Store: store, Clock: porttest.NewClock(t0), Observer: obs, BufferSize: 100, BatchSize: 100, MaxDelay: time.Hour,
		Backoff: &doubling{from: 6 * time.Second}, MinBackoff: 100 * time.Millisecond, MaxBackoff: 10 * time.Second,
	})
	for s := 1; s <= 10; s++ {
		r.Record(rep(s))
	}
	closeCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	closed := make(chan error, 1)
	go func() { closed <- r.Close(closeCtx) }()
	// A report recorded once Close began is dropped: then Close has begun.
	recorded := 10
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for r.Stats().Dropped == 0 {
		r.Record(rep(11))
		recorded++
		select {
		case <-tick.C:
		case <-ctx.Done():
			t.Fatal("Close never began: no report recorded after it was dropped")
		}
	}
	recv(t, ctx, obs.failed, "the failed write")
	if err := <-closed; err != nil {
		t.Fatalf("Close: %v", err)
	}
	if s := r.Stats(); s.Written < 10 || s.Written+s.Dropped != int64(recorded) {
		t.Fatalf("written %d, dropped %d of %d; want every report recorded before Close written", s.Written, s.Dropped, recorded)
	}
}

// TestAFailingStoreIsLoggedOncePerCausePerInterval: a store that keeps
// failing the same way gets one line per LogEvery, saying how many
// failures it stands for; a new cause gets its line at once; and when the
// shutdown grace ends with the store still failing, one last line and
// Close's error say what was lost and why. (Stopping serve with the
// database down printed ten lines a second, each repeating the dial
// error, and then only "context deadline exceeded".)
func TestAFailingStoreIsLoggedOncePerCausePerInterval(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	clk := porttest.NewClock(t0)
	var mu sync.Mutex
	cause := "dial tcp 127.0.0.1:5432: connect: connection refused"
	store := fakeStore{append: func(context.Context, []*domain.Report) error {
		mu.Lock()
		defer mu.Unlock()
		return domain.Wrap(errors.New(cause), domain.CodeUnavailable, "history database unavailable (append)")
	}}
	obs := newObserver()
	obs.failed = make(chan failure, 1000)
	var logs sharedtest.LockedBuffer
	r := newRecorder(t, recorder.Options{
		Store: store, Clock: clk, Observer: obs, BufferSize: 100, BatchSize: 10, MaxDelay: time.Hour,
		MinBackoff: 100 * time.Millisecond, MaxBackoff: 100 * time.Millisecond, LogEvery: 10 * time.Second,
		Logger: slog.New(slog.NewTextHandler(&logs, nil)),
	})
	for s := 1; s <= 10; s++ {
		r.Record(rep(s))
	}
	fail := func(n int) {
		t.Helper()
		for range n {
			recv(t, ctx, obs.failed, "a failed write")
			if err := clk.WaitPending(ctx, 1); err != nil {
				t.Fatal(err)
			}
			clk.Advance(100 * time.Millisecond)
		}
	}
	lines := func() []string {
		var out []string
		for l := range strings.SplitSeq(logs.String(), "\n") {
			if strings.Contains(l, "history: write failed; retrying") {
				out = append(out, l)
			}
		}
		return out
	}
	fail(100) // 0 s to 9.9 s
	if got := lines(); len(got) != 1 || !strings.Contains(got[0], "failures=1 ") || !strings.Contains(got[0], "connection refused") {
		t.Fatalf("after 100 failures in 10 s, the log has %d failure lines, want 1 naming the cause:\n%s", len(got), logs.String())
	}
	fail(1) // 10 s: the interval has passed
	if got := lines(); len(got) != 2 || !strings.Contains(got[1], "failures=100 ") || !strings.Contains(got[1], "failing_for=10s") {
		t.Fatalf("at 10 s, want a second line standing for 100 failures over 10 s:\n%s", strings.Join(got, "\n"))
	}
	mu.Lock()
	cause = "dial tcp 127.0.0.1:5432: connect: no route to host"
	mu.Unlock()
	fail(1)
	if got := lines(); len(got) != 3 || !strings.Contains(got[2], "no route to host") || !strings.Contains(got[2], "failures=1 ") {
		t.Fatalf("a new cause is not logged at once:\n%s", strings.Join(got, "\n"))
	}
	// The shutdown: the store still fails, and the grace ends.
	grace, cancel := context.WithCancel(ctx)
	closed := make(chan error, 1)
	go func() { closed <- r.Close(grace) }()
	recv(t, ctx, obs.failed, "the retry Close makes at once")
	if err := clk.WaitPending(ctx, 1); err != nil { // waiting MinBackoff on a clock that stays still
		t.Fatal(err)
	}
	cancel()
	err := recv(t, ctx, closed, "Close")
	for _, want := range []string{"history: 10 of 10 recorded reports were not written", "10 unwritten when the recorder closed",
		"no route to host", "the grace to write them ended (context canceled)"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Close = %v; want it to say %q", err, want)
		}
	}
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Close = %v, want it to wrap the grace's end", err)
	}
	if got := lines(); len(got) != 3 || strings.Contains(logs.String(), "were not written") {
		t.Errorf("by the end the log has %d failure lines, want still 3 (the shutdown's retries repeat the cause), and no line of "+
			"the loss (Close's error says it):\n%s", len(got), logs.String())
	}
}
