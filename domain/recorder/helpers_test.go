package recorder_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/loadreporter/loadreporter/domain"
	"github.com/loadreporter/loadreporter/domain/recorder"
	"github.com/loadreporter/loadreporter/ports"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var t0 = time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)

// fakeStore is a HistoryStore made of a function.
type fakeStore struct {
	append func(ctx context.Context, rs []*domain.Report) error
}

func (f fakeStore) Append(ctx context.Context, rs []*domain.Report) error { return f.append(ctx, rs) }
func (f fakeStore) DeleteBefore(context.Context, time.Time, int) (int64, error) {
	return 0, nil
}

// observer forwards the recorder's events to channels.
type observer struct {
	written chan int
	failed  chan failure
	splits  chan int
	mu      sync.Mutex
	dropped map[ports.DropReason]int
}

type failure struct {
	err     error
	retryIn time.Duration
}

func newObserver() *observer { return newObserverFor(100) }

// newObserverFor is an observer whose channels hold events of each kind
// without a reader: a backlog's many pieces.
func newObserverFor(events int) *observer {
	return &observer{written: make(chan int, events), failed: make(chan failure, events), splits: make(chan int, events),
		dropped: map[ports.DropReason]int{}}
}

func (o *observer) Written(n int, _, _ time.Duration)       { o.written <- n }
func (o *observer) WriteFailed(err error, in time.Duration) { o.failed <- failure{err, in} }
func (o *observer) Split(n int)                             { o.splits <- n }
func (o *observer) Dropped(n int, r ports.DropReason) {
	o.mu.Lock()
	o.dropped[r] += n
	o.mu.Unlock()
}

func (o *observer) drops() map[ports.DropReason]int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return maps(o.dropped)
}

func maps(m map[ports.DropReason]int) map[ports.DropReason]int {
	out := map[ports.DropReason]int{}
	for k, v := range m {
		out[k] = v
	}
	return out
}

func rep(seq int) *domain.Report {
	return &domain.Report{
		SourceInstanceID: "src", SequenceID: uint64(seq), ReportTime: t0.Add(time.Duration(seq) * time.Second),
		Worker: domain.Worker{Addr: "w"}, Status: domain.StatusHealthy,
	}
}

func seqs(rs []*domain.Report) []int {
	out := make([]int, len(rs))
	for i, r := range rs {
		out[i] = int(r.SequenceID)
	}
	return out
}

func span(lo, hi int) []int {
	var out []int
	for i := lo; i <= hi; i++ {
		out = append(out, i)
	}
	return out
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func recv[T any](t *testing.T, ctx context.Context, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-ctx.Done():
		t.Fatalf("waiting for %s: %v", what, ctx.Err())
		panic("unreachable")
	}
}

// doubling is a deterministic ports.Backoff: from, 2×from, 4×from, … (a
// jittered one would make the waits untestable).
type doubling struct {
	from, next time.Duration
	resets     int
}

func (d *doubling) NextBackOff() time.Duration {
	if d.next == 0 {
		d.next = d.from
	}
	n := d.next
	d.next *= 2
	return n
}

func (d *doubling) Reset() { d.next = d.from; d.resets++ }

// newRecorder returns a started recorder that is closed at cleanup.
func newRecorder(t *testing.T, o recorder.Options) *recorder.Recorder {
	t.Helper()
	r, err := recorder.New(o)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	r.Start()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = r.Close(ctx)
	})
	return r
}

func checkBalance(t *testing.T, s recorder.Stats) {
	t.Helper()
	if s.Recorded != s.Written+s.Dropped+int64(s.Buffered) {
		t.Errorf("recorded %d ≠ written %d + dropped %d + buffered %d", s.Recorded, s.Written, s.Dropped, s.Buffered)
	}
}

// recordingStore returns a store that passes every batch to calls.
func recordingStore(calls chan []int) fakeStore {
	return fakeStore{append: func(ctx context.Context, rs []*domain.Report) error {
		calls <- seqs(rs)
		return nil
	}}
}

// writtenLog is what a fake store wrote: the reports' sequence numbers in
// the order of its writes, read by the test while the writer adds to it.
type writtenLog struct {
	mu   sync.Mutex
	seqs []int
}

func (l *writtenLog) add(rs []*domain.Report) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.seqs = append(l.seqs, seqs(rs)...)
}

func (l *writtenLog) get() []int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.seqs)
}

// gatedStore returns a store that announces each batch on started, then
// holds it until release is closed (failing it when its context ends
// first) and writes it to log.
func gatedStore(started chan<- []int, release <-chan struct{}, log *writtenLog) fakeStore {
	return fakeStore{append: func(ctx context.Context, rs []*domain.Report) error {
		started <- seqs(rs)
		select {
		case <-release:
		case <-ctx.Done():
			return ctx.Err()
		}
		log.add(rs)
		return nil
	}}
}

// drainBacklog starts r, which holds the backlog of reports 1..n, waits
// until all n are written, stops the goroutine moving the clock (stop
// returns once it has) and closes r: the store must have written each
// report once, in order.
func drainBacklog(t *testing.T, ctx context.Context, r *recorder.Recorder, obs *observer, n int, stop func(), log *writtenLog) {
	t.Helper()
	r.Start()
	for w := 0; w < n; {
		w += recv(t, ctx, obs.written, "the backlog's pieces")
	}
	stop()
	if err := r.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if got := log.get(); !slices.Equal(got, span(1, n)) {
		t.Errorf("written %v, want 1..%d once each, in order", got, n)
	}
}

// inBackground runs f until stop is called; stop returns once f has.
func inBackground(ctx context.Context, f func(context.Context)) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(ctx)
	}()
	return func() {
		cancel()
		<-done
	}
}
