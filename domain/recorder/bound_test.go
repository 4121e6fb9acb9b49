package recorder_test

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/loadreporter/loadreporter/domain"
	"github.com/loadreporter/loadreporter/domain/recorder"
	"github.com/loadreporter/loadreporter/ports/porttest"
)

// wideReport is report seq of an engine of n ranks, built as the fire
// loop builds it; with no ranks, it is UNREACHABLE, saying why.
func wideReport(seq, n int) *domain.Report {
	b := domain.ReportBuilder{SourceInstanceID: "src", Worker: domain.Worker{Addr: "10.0.0.7:30000", Model: "llama"},
		StaleAfter: time.Hour}
	at := t0.Add(time.Duration(seq) * time.Second)
	if n == 0 {
		return b.Report(uint64(seq), at, domain.Snapshot{}, fmt.Errorf("pull %d: dial tcp 10.0.0.7:30000: connect: connection refused", seq))
	}
	snap := domain.Snapshot{Ranks: make([]domain.RankLoad, n)}
	for i := range snap.Ranks {
		snap.Ranks[i] = domain.RankLoad{DPRank: int64(i), SnapshotTime: at, TokenUsage: .5, NumTotalTokens: 1 << 20}
	}
	return b.Report(uint64(seq), at, snap, nil)
}

// TestAccountedBytesTrackTheHeap: what the recorder counts against
// BufferBytes is what the reports it holds take on the Go heap, from 0.8
// to 1.25 times it, for UNREACHABLE reports (no ranks, an error each) and
// reports of 8 and of 1 024 ranks. (Above 1, because the strings a
// worker's reports share are counted for each.) It runs alone (no
// t.Parallel): it measures the whole process's heap.
func TestAccountedBytesTrackTheHeap(t *testing.T) {
	for _, tc := range []struct{ reports, ranks int }{{20_000, 0}, {5_000, 8}, {200, 1024}} {
		t.Run(fmt.Sprintf("%d ranks", tc.ranks), func(t *testing.T) {
			r, err := recorder.New(recorder.Options{Store: fakeStore{}, Clock: porttest.NewClock(t0),
				BufferSize: tc.reports, BufferBytes: 1 << 30})
			if err != nil {
				t.Fatal(err)
			}
			before := heap()
			for i := range tc.reports {
				r.Record(wideReport(i+1, tc.ranks))
			}
			held := heap() - before
			st := r.Stats()
			if st.Buffered != tc.reports || st.Dropped != 0 {
				t.Fatalf("buffered %d, dropped %d; want all %d held", st.Buffered, st.Dropped, tc.reports)
			}
			ratio := float64(st.BufferedBytes) / float64(held)
			t.Logf("%d reports × %d ranks: accounted %d bytes, the heap they hold %d (%.2f×)",
				tc.reports, tc.ranks, st.BufferedBytes, held, ratio)
			if ratio < 0.8 || ratio > 1.25 {
				t.Errorf("accounted %d bytes for %d bytes of heap (%.2f×), want 0.8× to 1.25×", st.BufferedBytes, held, ratio)
			}
		})
	}
}

// heap is the live heap after a collection.
func heap() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// advanceWhileWaiting moves clk to its next timer whenever the writer
// waits on one, until ctx ends: for tests whose store hangs until its
// write times out, and whose writer then backs off.
func advanceWhileWaiting(ctx context.Context, clk *porttest.Clock) {
	for ctx.Err() == nil {
		if err := clk.WaitPending(ctx, 1); err != nil {
			return
		}
		if at, ok := clk.Next(); ok {
			clk.Advance(at.Sub(clk.Now()))
		}
	}
}

// TestATimedOutBatchIsSplitUntilItDrains: a store that can no longer
// write a batch within the write timeout (here: any of more than 8
// reports) gets it in halves until the pieces go through, so a backlog
// drains, in order and each report once, instead of the whole batch
// timing out on every retry and history stopping.
func TestATimedOutBatchIsSplitUntilItDrains(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	clk := porttest.NewClock(t0)
	var written writtenLog
	store := fakeStore{append: func(ctx context.Context, rs []*domain.Report) error {
		if len(rs) > 8 {
			<-ctx.Done()
			return ctx.Err()
		}
		written.add(rs)
		return nil
	}}
	obs := newObserverFor(1000)
	r, err := recorder.New(recorder.Options{Store: store, Clock: clk, Observer: obs,
		BufferSize: 100, BatchSize: 64, MaxDelay: time.Hour, WriteTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	for s := 1; s <= 64; s++ { // the backlog of an outage
		r.Record(rep(s))
	}
	stop := inBackground(ctx, func(ctx context.Context) { advanceWhileWaiting(ctx, clk) })
	drainBacklog(t, ctx, r, obs, 64, stop, &written)
	st := r.Stats()
	if st.Written != 64 || st.Dropped != 0 || st.Splits < 3 || int(st.Splits) != len(obs.splits) {
		t.Errorf("stats %+v (the observer saw %d splits); want 64 written after 3 splits or more (64 → 32 → 16 → 8)", st, len(obs.splits))
	}
	if first := <-obs.splits; first != 64 {
		t.Errorf("the first split was of %d reports, want the whole batch of 64", first)
	}
}

// TestBufferAndBatchInFlightStayWithinTheBound: the reports being written
// count against BufferBytes with those waiting, so while a batch hangs in
// the store, what the recorder holds never exceeds the bound. (The batch
// in flight was outside it: the buffer refilled to the bound beside it.)
func TestBufferAndBatchInFlightStayWithinTheBound(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	started := make(chan []int, 10)
	release := make(chan struct{})
	var written writtenLog
	store := gatedStore(started, release, &written)
	per := footprintOf(t, wideReport(1, 100))
	bound := 20 * per // batches of 5 at most: a quarter of the bound
	r := newRecorder(t, recorder.Options{Store: store, Clock: porttest.NewClock(t0),
		BufferSize: 1000, BufferBytes: bound, BatchSize: 1000, MaxDelay: time.Hour})
	for s := 1; s <= 5; s++ {
		r.Record(wideReport(s, 100))
	}
	if got := recv(t, ctx, started, "the first batch"); !slices.Equal(got, span(1, 5)) {
		t.Fatalf("first batch %v, want 1..5", got)
	}
	for s := 6; s <= 100; s++ {
		r.Record(wideReport(s, 100))
		if st := r.Stats(); st.BufferedBytes > bound {
			t.Fatalf("after report %d the recorder holds %d bytes (%d reports), over its bound of %d", s, st.BufferedBytes, st.Buffered, bound)
		}
	}
	if st := r.Stats(); st.Buffered != 20 || st.BufferedBytes != bound || st.Dropped != 80 {
		t.Errorf("holding %d reports (%d bytes), %d dropped; want the 5 in flight and the newest 15, 80 dropped", st.Buffered, st.BufferedBytes, st.Dropped)
	}
	close(release)
	if err := r.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if got, want := written.get(), append(span(1, 5), span(86, 100)...); !slices.Equal(got, want) {
		t.Errorf("written %v, want %v", got, want)
	}
}

// TestAReportThatTimesOutAloneGetsMoreTime: a write of one report cannot
// be split, so each time it times out the next attempt gets twice as long,
// up to 8 times the write timeout, and a success brings it back: a store
// slower than the timeout for even one report still drains, one at a time.
func TestAReportThatTimesOutAloneGetsMoreTime(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	clk := porttest.NewClock(t0)
	started := make(chan struct{}, 10)
	var mu sync.Mutex
	hangs := 5
	release := make(chan struct{}) // holds the write of report 2 until its timeout is read
	store := fakeStore{append: func(ctx context.Context, rs []*domain.Report) error {
		mu.Lock()
		hang := hangs > 0
		hangs--
		mu.Unlock()
		started <- struct{}{}
		switch {
		case hang:
			<-ctx.Done()
			return ctx.Err()
		case rs[0].SequenceID == 2:
			<-release
		}
		return nil
	}}
	obs := newObserver()
	r := newRecorder(t, recorder.Options{Store: store, Clock: clk, Observer: obs, BatchSize: 1,
		WriteTimeout: time.Second, WriteRate: 1 << 40, MinBackoff: time.Millisecond, MaxBackoff: time.Millisecond})
	attempt := func() time.Duration {
		t.Helper()
		recv(t, ctx, started, "an attempt")
		if err := clk.WaitPending(ctx, 1); err != nil {
			t.Fatal(err)
		}
		at, _ := clk.Next()
		return at.Sub(clk.Now()).Round(time.Millisecond)
	}
	r.Record(rep(1))
	for i, want := range []time.Duration{1, 2, 4, 8, 8} {
		if got := attempt(); got != want*time.Second {
			t.Errorf("attempt %d may take %s, want %s", i+1, got, want*time.Second)
		}
		clk.Advance(want * time.Second)
		recv(t, ctx, obs.failed, "the timed-out attempt")
		if err := clk.WaitPending(ctx, 1); err != nil {
			t.Fatal(err)
		}
		clk.Advance(time.Millisecond)
	}
	recv(t, ctx, started, "the attempt that succeeds")
	recv(t, ctx, obs.written, "report 1")
	r.Record(rep(2))
	if got := attempt(); got != time.Second {
		t.Errorf("after a success, a write may take %s, want the write timeout again", got)
	}
	close(release)
	recv(t, ctx, obs.written, "the next report")
}

// TestSplitsSettleOnWhatTheStoreCanWrite: a store that takes 10 ms a
// report, under a 100 ms write timeout, is given ever smaller pieces of a
// backlog until they fit, and then pieces that fit: a piece that took
// more than half its timeout is not doubled again (it would time out
// again, and every other write of the backlog would be a wasted timeout).
func TestSplitsSettleOnWhatTheStoreCanWrite(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	clk := porttest.NewClock(t0)
	var written writtenLog
	store := fakeStore{append: func(ctx context.Context, rs []*domain.Report) error {
		cost := time.Duration(len(rs)) * 10 * time.Millisecond
		if cost >= 100*time.Millisecond { // the write timeout ends it
			clk.Advance(100 * time.Millisecond)
			<-ctx.Done()
			return ctx.Err()
		}
		clk.Advance(cost)
		written.add(rs)
		return nil
	}}
	obs := newObserverFor(1000)
	r, err := recorder.New(recorder.Options{Store: store, Clock: clk, Observer: obs, BufferSize: 200, BatchSize: 200,
		MaxDelay: time.Hour, WriteTimeout: 100 * time.Millisecond, WriteRate: 1 << 40,
		MinBackoff: time.Millisecond, MaxBackoff: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	for s := 1; s <= 200; s++ {
		r.Record(rep(s))
	}
	// Skips the writer's backoffs; the store moves the clock itself.
	stop := inBackground(ctx, func(ctx context.Context) {
		for ctx.Err() == nil {
			changed := clk.Changed()
			if at, ok := clk.Next(); ok && at.Sub(clk.Now()) <= time.Millisecond {
				clk.Advance(at.Sub(clk.Now()))
				continue
			}
			select {
			case <-changed:
			case <-ctx.Done():
			}
		}
	})
	drainBacklog(t, ctx, r, obs, 200, stop, &written)
	// 200 → 100 → 50 → 25 → 12 → 6 reports: five timeouts, then pieces of six.
	if st := r.Stats(); st.Splits > 6 || st.Failures != st.Splits {
		t.Errorf("%d splits in %d failed writes; want the five or six halvings down to what fits, and no more", st.Splits, st.Failures)
	}
}
