package recorder_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loadreporter/loadreporter/domain"
	"github.com/loadreporter/loadreporter/domain/recorder"
	"github.com/loadreporter/loadreporter/ports"
	"github.com/loadreporter/loadreporter/ports/porttest"
)

func TestBatchesBySizeAndByDelay(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	clk := porttest.NewClock(t0)
	calls := make(chan []int, 10)
	obs := newObserver()
	r := newRecorder(t, recorder.Options{
		Store: recordingStore(calls), Clock: clk, Observer: obs,
		BatchSize: 3, MaxDelay: time.Second, BufferSize: 100,
	})
	for i := 1; i <= 3; i++ {
		r.Record(rep(i))
	}
	if got := recv(t, ctx, calls, "a full batch"); !slices.Equal(got, []int{1, 2, 3}) {
		t.Errorf("first batch %v, want [1 2 3]", got)
	}
	recv(t, ctx, obs.written, "written")

	// Two reports: no batch until the oldest has waited MaxDelay.
	r.Record(rep(4))
	r.Record(rep(5))
	if err := clk.WaitPending(ctx, 1); err != nil {
		t.Fatal(err)
	}
	// (The writer may be re-arming its timer after the second Record's
	// wake-up; when one is pending it is for the delay.)
	if at, ok := clk.Next(); ok && !at.Equal(t0.Add(time.Second)) {
		t.Errorf("writer waits until %s, want %s", at, t0.Add(time.Second))
	}
	clk.Advance(time.Second - time.Millisecond)
	select {
	case got := <-calls:
		t.Fatalf("batch %v written before its delay", got)
	default:
	}
	clk.Advance(time.Millisecond)
	if got := recv(t, ctx, calls, "the delayed batch"); !slices.Equal(got, []int{4, 5}) {
		t.Errorf("delayed batch %v, want [4 5]", got)
	}
	recv(t, ctx, obs.written, "written")
	s := r.Stats()
	if s.Written != 5 || s.Batches != 2 || s.Dropped != 0 || s.Buffered != 0 || s.Lag != 0 {
		t.Errorf("stats %+v", s)
	}
	checkBalance(t, s)
}

func TestRecordNeverBlocksAndDropsOldest(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	clk := porttest.NewClock(t0)
	started := make(chan []int, 10)
	release := make(chan struct{})
	var written writtenLog
	store := gatedStore(started, release, &written)
	obs := newObserver()
	r := newRecorder(t, recorder.Options{
		Store: store, Clock: clk, Observer: obs, BufferSize: 10, BatchSize: 4, MaxDelay: time.Hour,
	})
	for i := 1; i <= 4; i++ {
		r.Record(rep(i))
	}
	if got := recv(t, ctx, started, "the first batch"); !slices.Equal(got, []int{1, 2, 3, 4}) {
		t.Fatalf("first batch %v", got)
	}
	// The store hangs; Record must still return at once, every time.
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 5; i <= 104; i++ {
			r.Record(rep(i))
		}
	}()
	recv(t, ctx, done, "100 Record calls while the store hangs")
	s := r.Stats()
	if s.Recorded != 104 || s.Dropped != 90 || s.Buffered != 14 || s.Written != 0 {
		t.Errorf("stats while the store hangs: %+v; want 104 recorded, 90 dropped, 14 buffered", s)
	}
	checkBalance(t, s)
	if d := obs.drops(); d[ports.DropBufferFull] != 90 || len(d) != 1 {
		t.Errorf("observer saw drops %v, want 90 buffer_full", d)
	}
	// The store recovers; Close flushes the newest ten.
	close(release)
	if err := r.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	got := written.get()
	want := append(span(1, 4), span(95, 104)...)
	if !slices.Equal(got, want) {
		t.Errorf("written %v, want %v (the in-flight batch, then the newest reports)", got, want)
	}
	s = r.Stats()
	if s.Written != 14 || s.Dropped != 90 || s.Buffered != 0 {
		t.Errorf("final stats %+v", s)
	}
	checkBalance(t, s)
}

// TestWriteTimeoutUsesTheClock: a write that hangs is cut off after
// WriteTimeout plus its bytes at WriteRate, measured on the clock, and
// retried.
func TestWriteTimeoutUsesTheClock(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	clk := porttest.NewClock(t0)
	started := make(chan struct{}, 10)
	var mu sync.Mutex
	hang := true
	store := fakeStore{append: func(ctx context.Context, rs []*domain.Report) error {
		mu.Lock()
		h := hang
		hang = false
		mu.Unlock()
		started <- struct{}{}
		if h {
			<-ctx.Done()
			return ctx.Err()
		}
		return nil
	}}
	obs := newObserver()
	const rate = 1 << 10 // bytes a second: a report's few hundred bytes add a fraction of a second
	r := newRecorder(t, recorder.Options{
		Store: store, Clock: clk, Observer: obs, BatchSize: 1, WriteTimeout: 2 * time.Second, WriteRate: rate,
	})
	r.Record(rep(1))
	recv(t, ctx, started, "the hanging write")
	if err := clk.WaitPending(ctx, 1); err != nil {
		t.Fatal(err)
	}
	size := r.Stats().BufferedBytes
	want := 2*time.Second + time.Duration(float64(size)/rate*float64(time.Second))
	if at, _ := clk.Next(); !at.Equal(t0.Add(want)) || size == 0 {
		t.Errorf("the write of %d bytes times out %s after it began, want %s", size, at.Sub(t0), want)
	}
	clk.Advance(time.Second)
	if s := r.Stats(); s.Lag != time.Second || s.Buffered != 1 {
		t.Errorf("lag %s, buffered %d during the write; want 1s, 1", s.Lag, s.Buffered)
	}
	clk.Advance(want - time.Second - time.Nanosecond)
	select {
	case f := <-obs.failed:
		t.Fatalf("the write failed (%v) before its timeout", f.err)
	default:
	}
	clk.Advance(time.Nanosecond)
	f := recv(t, ctx, obs.failed, "the timed-out write")
	if domain.ErrorCode(f.err) != domain.CodeUnavailable || !strings.Contains(f.err.Error(), "timed out") {
		t.Errorf("timeout error %v", f.err)
	}
	if err := clk.WaitPending(ctx, 1); err != nil {
		t.Fatal(err)
	}
	clk.Advance(f.retryIn)
	recv(t, ctx, obs.written, "the retried write")
	if s := r.Stats(); s.Splits != 0 {
		t.Errorf("%d splits of a one-report batch, want 0 (it cannot be split)", s.Splits)
	}
}

func TestRejectedReportsAreDroppedNotRetried(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	clk := porttest.NewClock(t0)
	calls := make(chan []int, 10)
	store := fakeStore{append: func(ctx context.Context, rs []*domain.Report) error {
		calls <- seqs(rs)
		if rs[0].SequenceID == 1 {
			return domain.Errorf(domain.CodeInvalidArgument, "no")
		}
		return nil
	}}
	obs := newObserver()
	r := newRecorder(t, recorder.Options{Store: store, Clock: clk, Observer: obs, BatchSize: 1})
	r.Record(nil)
	r.Record(&domain.Report{SequenceID: 7}) // no source, worker or time
	r.Record(rep(1))
	f := recv(t, ctx, obs.failed, "the rejected write")
	if f.retryIn != 0 {
		t.Errorf("rejected batch retried in %s", f.retryIn)
	}
	r.Record(rep(2))
	recv(t, ctx, obs.written, "the next write")
	if got := []any{recv(t, ctx, calls, "call"), recv(t, ctx, calls, "call")}; fmt.Sprint(got) != "[[1] [2]]" {
		t.Errorf("store saw %v, want [[1] [2]] (the invalid report never reaches it)", got)
	}
	s := r.Stats()
	if s.Recorded != 3 || s.Dropped != 2 || s.Written != 1 {
		t.Errorf("stats %+v", s)
	}
	checkBalance(t, s)
	if d := obs.drops(); d[ports.DropRejected] != 2 {
		t.Errorf("drops %v, want 2 rejected", d)
	}
}

func TestCloseFlushesAndStops(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	clk := porttest.NewClock(t0)
	calls := make(chan []int, 10)
	obs := newObserver()
	r := newRecorder(t, recorder.Options{
		Store: recordingStore(calls), Clock: clk, Observer: obs, BatchSize: 100, MaxDelay: time.Hour,
	})
	for i := 1; i <= 5; i++ {
		r.Record(rep(i))
	}
	if err := r.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if got := recv(t, ctx, calls, "the flushed batch"); !slices.Equal(got, span(1, 5)) {
		t.Errorf("flushed %v", got)
	}
	r.Record(rep(6))
	if err := r.Close(ctx); err != nil {
		t.Errorf("second Close: %v", err)
	}
	s := r.Stats()
	if s.Written != 5 || s.Dropped != 1 || s.Buffered != 0 {
		t.Errorf("stats %+v", s)
	}
	checkBalance(t, s)
	if d := obs.drops(); d[ports.DropClosed] != 1 {
		t.Errorf("drops %v, want 1 closed", d)
	}
}

func TestCloseGivesUpWhenItsDeadlineEnds(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	clk := porttest.NewClock(t0)
	store := fakeStore{append: func(ctx context.Context, rs []*domain.Report) error {
		return errors.New("connection refused")
	}}
	obs := newObserver()
	r := newRecorder(t, recorder.Options{Store: store, Clock: clk, Observer: obs, BatchSize: 2, MaxDelay: time.Hour})
	for i := 1; i <= 5; i++ {
		r.Record(rep(i))
	}
	recv(t, ctx, obs.failed, "a failed write")
	grace, cancel := context.WithCancel(ctx)
	closed := make(chan error, 1)
	go func() { closed <- r.Close(grace) }()
	cancel() // the grace period ends while the writer backs off
	if err := recv(t, ctx, closed, "Close"); !errors.Is(err, context.Canceled) {
		t.Errorf("Close = %v, want context.Canceled", err)
	}
	s := r.Stats()
	if s.Written != 0 || s.Dropped != 5 || s.Buffered != 0 {
		t.Errorf("stats %+v; want all 5 dropped", s)
	}
	checkBalance(t, s)
}

func TestNewValidatesOptions(t *testing.T) {
	t.Parallel()
	clk := porttest.NewClock(t0)
	store := fakeStore{}
	for name, o := range map[string]recorder.Options{
		"no store":         {Clock: clk},
		"no clock":         {Store: store},
		"negative delay":   {Store: store, Clock: clk, MaxDelay: -1},
		"negative backoff": {Store: store, Clock: clk, MinBackoff: -1},
		"negative buffer":  {Store: store, Clock: clk, BufferSize: -1},
	} {
		if _, err := recorder.New(o); domain.ErrorCode(err) != domain.CodeInvalidArgument {
			t.Errorf("%s: New = %v, want %s", name, err, domain.CodeInvalidArgument)
		}
	}
}

// TestNothingRunsBeforeStart: New starts no goroutine; what is recorded
// waits, and Close still writes it.
func TestNothingRunsBeforeStart(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	calls := make(chan []int, 10)
	r, err := recorder.New(recorder.Options{Store: recordingStore(calls), Clock: porttest.NewClock(t0), BatchSize: 1})
	if err != nil {
		t.Fatal(err)
	}
	r.Record(rep(1))
	r.Record(rep(2))
	if len(calls) != 0 || r.Stats().Buffered != 2 {
		t.Fatalf("written before Start: %d calls, stats %+v", len(calls), r.Stats())
	}
	if err := r.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if got := fmt.Sprint(recv(t, ctx, calls, "call"), recv(t, ctx, calls, "call")); got != "[1] [2]" {
		t.Errorf("Close wrote %s, want [1] [2]", got)
	}
}

// TestBufferIsBoundedInBytes: reports of a wide engine count against
// BufferBytes by their ranks, so the buffer holds fewer of them; the oldest
// go first, counted as dropped, and the newest are written.
func TestBufferIsBoundedInBytes(t *testing.T) {
	t.Parallel()
	wide := func(seq int) *domain.Report {
		r := rep(seq)
		for i := range 100 {
			r.Ranks = append(r.Ranks, domain.RankLoad{DPRank: int64(i)})
		}
		return r
	}
	perReport := footprintOf(t, wide(1))
	if perReport < 100*120 {
		t.Fatalf("a report of 100 ranks counts %d bytes, less than its ranks alone (100 × 120)", perReport)
	}
	calls := make(chan []int, 10)
	var logs strings.Builder // written by Close, read after it
	r, err := recorder.New(recorder.Options{Store: recordingStore(calls), Clock: porttest.NewClock(t0),
		BufferSize: 1000, BufferBytes: 10 * perReport, BatchSize: 1000, MaxDelay: time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	for s := 1; s <= 25; s++ { // not started: everything waits
		r.Record(wide(s))
	}
	if s := r.Stats(); s.Buffered != 10 || s.Dropped != 15 || s.BufferedBytes != 10*perReport {
		t.Fatalf("buffered %d (%d bytes), dropped %d; want the newest 10 held (%d bytes), 15 dropped",
			s.Buffered, s.BufferedBytes, s.Dropped, 10*perReport)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := r.Close(ctx); err != nil {
		t.Fatal(err)
	}
	var got []int
	for len(got) < 10 {
		got = append(got, recv(t, ctx, calls, "a batch")...)
	}
	if !slices.Equal(got, span(16, 25)) {
		t.Fatalf("written %v, want 16..25", got)
	}
	// Close wrote everything it held; the log says what was lost before.
	if want := "history: 15 of 25 recorded reports were not written: 15 dropped, oldest first, to stay within the buffer"; !strings.Contains(logs.String(), want) {
		t.Errorf("the log does not say %q:\n%s", want, logs.String())
	}
}

// footprintOf is what a recorder counts for r.
func footprintOf(t *testing.T, r *domain.Report) int {
	t.Helper()
	probe, err := recorder.New(recorder.Options{Store: fakeStore{}, Clock: porttest.NewClock(t0)})
	if err != nil {
		t.Fatal(err)
	}
	probe.Record(r)
	return probe.Stats().BufferedBytes
}
