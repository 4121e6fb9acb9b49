package client

import (
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"

	"google.golang.org/protobuf/proto"

	pb "github.com/loadreporter/loadreporter/gen/sglang/router/loadmonitor/v1"
)

// fastOptions are a router's options with short intervals and backoff.
func fastOptions(protocol Protocol) Options {
	return Options{RouterID: "router-a", ReportInterval: 50 * time.Millisecond, Lease: time.Second, Protocol: protocol,
		Backoff: Backoff{Initial: 5 * time.Millisecond, Max: 50 * time.Millisecond}}
}

func dialT(t *testing.T, addr string, o Options, d deps) *Worker {
	t.Helper()
	w, err := dial(addr, o, d)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Close() })
	return w
}

// newFleetT is a Fleet with o and d, picking with a fixed seed, closed
// when the test ends.
func newFleetT(t *testing.T, o Options, d deps) *Fleet {
	t.Helper()
	f, err := newFleet(o, d, rand.New(rand.NewPCG(1, 2)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() })
	return f
}

// fleetOf is a Fleet (newFleetT) of fw alone, subscribed to until the
// test ends; it returns the Fleet, its change signal and fw's first
// stream from it.
func fleetOf(ctx context.Context, t *testing.T, fw *fakeWorker, o Options, d deps) (*Fleet, <-chan struct{}, *fakeStream) {
	t.Helper()
	f := newFleetT(t, o, d)
	changed, cancel := f.Subscribe()
	t.Cleanup(cancel)
	if err := f.Add(fw.addr); err != nil {
		t.Fatal(err)
	}
	return f, changed, fw.next(ctx, t)
}

// watch dials a Worker with o and d to fw and subscribes to its views
// until the test ends; it returns the Worker, its views and its first
// stream as fw sees it.
func watch(ctx context.Context, t *testing.T, fw *fakeWorker, o Options, d deps) (*Worker, <-chan *View, *fakeStream) {
	t.Helper()
	w := dialT(t, fw.addr, o, d)
	views, cancel := w.Subscribe()
	t.Cleanup(cancel)
	return w, views, fw.next(ctx, t)
}

// Out-of-order, repeated and malformed reports are rejected and counted;
// the view only moves on accepted ones; a new instance id starts afresh.
func TestRejectsWhatSGLangsRouterRejects(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 10*time.Second)
	fw := startFakeWorker(t)
	reg := prometheus.NewPedanticRegistry()
	o := fastOptions(ProtocolConnect)
	o.Registerer = reg
	w, views, fs := watch(ctx, t, fw, o, deps{})
	got := fs.register(ctx, t, 60_000, 20_000)
	if got.GetRouterId() != "router-a" || got.GetReportIntervalMs() != 50 || got.GetLeaseTtlMs() != 1000 {
		t.Fatalf("register %v", got)
	}
	badShape := unreachable("a", 10)
	badShape.Ranks = []*pb.RankLoad{rank(0)}
	overCap := healthy("a", 11, 1)
	overCap.Ranks[0].NumRunningReqs = 1000
	for _, r := range []*pb.LoadReport{
		healthy("a", 1, 2),
		healthy("a", 3, 2),
		healthy("a", 2, 2), // out of order
		healthy("a", 3, 2), // repeated
		badShape,           // UNREACHABLE with ranks
		overCap,            // running > max_running_requests
		healthy("a", 4, 2),
	} {
		fs.report(t, r)
	}
	waitView(ctx, t, views, "a#4", hasSeq("a", 4))
	// The worker restarted behind the same address: a new sequence.
	fs.report(t, healthy("b", 1, 3))
	v := waitView(ctx, t, views, "b#1", hasSeq("b", 1))
	if v.State != Fresh || len(v.Report.GetRanks()) != 3 {
		t.Fatalf("view %+v", v)
	}
	fs.report(t, healthy("b", 1, 3))
	fs.report(t, healthy("b", 2, 3))
	waitView(ctx, t, views, "b#2", hasSeq("b", 2))

	want := map[RejectReason]uint64{RejectSequence: 3, RejectUnreachableShape: 1, RejectCapacity: 1}
	for r, n := range w.Rejected() {
		if n != want[r] {
			t.Errorf("rejected %s: %d, want %d", r, n, want[r])
		}
		if m := counterValue(t, w.metrics.rejected.WithLabelValues(fw.addr, string(r))); m != float64(want[r]) {
			t.Errorf("metric rejected %s: %v, want %d", r, m, want[r])
		}
	}
}

// TestALongLastErrorIsCut: a report whose last_error runs to megabytes is
// accepted with it cut to MaxLastErrorBytes, on a rune boundary, so the
// view's reason (a fleet page, a log line) stays short.
func TestALongLastErrorIsCut(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 10*time.Second)
	fw := startFakeWorker(t)
	_, views, fs := watch(ctx, t, fw, fastOptions(ProtocolGRPC), deps{})
	fs.register(ctx, t, 60_000, 20_000)
	r := unreachable("a", 1)
	r.LastError = new("engine said: " + strings.Repeat("é", 1<<20))
	fs.report(t, r)
	v := waitView(ctx, t, views, "a#1", hasSeq("a", 1))
	got := v.Report.GetLastError()
	if len(got) > MaxLastErrorBytes || !strings.HasPrefix(got, "engine said: é") || !strings.HasSuffix(got, "é…") || !utf8.ValidString(got) {
		t.Fatalf("last_error kept as %d bytes: %.40q…%q", len(got), got, got[max(0, len(got)-8):])
	}
	if v.State != Unreachable || len(v.Reason) > MaxLastErrorBytes+100 {
		t.Fatalf("view %s, reason of %d bytes", v.State, len(v.Reason))
	}
}

// TestOnlyInvalidArgumentIsForGood: INVALID_ARGUMENT (a refused
// configuration) stops the Worker for good and says why; INVALID_FIRST_FRAME
// does not, as the client's first frame is always register: the worker did
// not get it in time (a lossy network, a worker's first-frame timeout), and
// the Worker opens another stream.
func TestOnlyInvalidArgumentIsForGood(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		code, message string
		forGood       bool
	}{
		{"INVALID_ARGUMENT", "report_interval_ms 50 is outside [100, 60000]", true},
		{"INVALID_FIRST_FRAME", "no register within 5s", false},
	} {
		t.Run(tc.code, func(t *testing.T) {
			ctx := testCtx(t, 10*time.Second)
			fw := startFakeWorker(t)
			w, views, fs := watch(ctx, t, fw, fastOptions(ProtocolGRPC), deps{})
			if fs.frameOf(ctx, t).GetRegister() == nil {
				t.Fatal("want register")
			}
			fs.fail(t, tc.code, tc.message)
			if !tc.forGood {
				fw.next(ctx, t).register(ctx, t, 60_000, 20_000)
				waitView(ctx, t, views, "registered again", isState(Stale))
				select {
				case <-w.Done():
					t.Fatalf("the Worker stopped: %v", w.Err())
				default:
				}
				return
			}
			select {
			case <-w.Done():
			case <-ctx.Done():
				t.Fatal("the Worker did not stop")
			}
			var se *StreamError
			if err := w.Err(); !errors.As(err, &se) || se.Code != tc.code || se.Addr != fw.addr {
				t.Fatalf("Err() = %v", err)
			}
			if w.Reconnects() != 0 {
				t.Fatalf("%d reconnects after a permanent error", w.Reconnects())
			}
			last := waitView(ctx, t, views, "disconnected", isState(Disconnected))
			if _, open := <-views; open {
				t.Fatalf("views stay open after the Worker stopped (last %+v)", last)
			}
			if err := w.UpdateConfig(ctx, time.Second, 0); !errors.Is(err, ErrClosed) {
				t.Fatalf("UpdateConfig after stop: %v", err)
			}
		})
	}
}

// Freshness follows the injected clock: Fresh until more than N intervals
// pass without a report, then Stale; UNREACHABLE when the worker says so;
// Disconnected when the stream ends, and back after the backoff.
func TestFreshnessOnTheInjectedClock(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 10*time.Second)
	fw := startFakeWorker(t)
	clk, d := onFakeClock()
	o := fastOptions(ProtocolConnect)
	o.ReportInterval = 100 * time.Millisecond
	o.Backoff = Backoff{Initial: time.Second, Max: time.Minute, Multiplier: 2, Jitter: 0.5}
	w, views, fs := watch(ctx, t, fw, o, d)
	fs.register(ctx, t, 3_600_000, 1_200_000) // no keep-alive or idle timer gets in the way
	waitView(ctx, t, views, "registered, no report", func(v *View) bool { return v.State == Stale && v.Reason == "no report yet" })
	r := healthy("a", 1, 2)
	r.Ranks[0].SnapshotTimeUnixMs = clk.Now().UnixMilli()
	fs.report(t, r)
	v := waitView(ctx, t, views, "fresh", isState(Fresh))
	if !v.StaleAt.Equal(clk.Now().Add(300*time.Millisecond)) || !v.ReceivedAt.Equal(clk.Now()) {
		t.Fatalf("StaleAt %v ReceivedAt %v", v.StaleAt, v.ReceivedAt)
	}
	if err := clk.waitTimer(ctx, v.StaleAt.Add(time.Nanosecond)); err != nil {
		t.Fatal("no stale timer armed")
	}
	clk.Advance(300 * time.Millisecond)
	if s := w.View().StateAt(clk.Now()); s != Fresh {
		t.Fatalf("3 intervals exactly: %v, want still fresh", s)
	}
	clk.Advance(time.Nanosecond)
	v = waitView(ctx, t, views, "stale", isState(Stale))
	if v.Reason != "no report for 300.000001ms (more than 300ms)" {
		t.Fatalf("reason %q", v.Reason)
	}
	fs.report(t, healthy("a", 2, 2))
	waitView(ctx, t, views, "fresh again", isState(Fresh))
	fs.report(t, unreachable("a", 3))
	v = waitView(ctx, t, views, "unreachable", isState(Unreachable))
	if v.Report.GetSequenceId() != 3 {
		t.Fatalf("view %+v", v)
	}

	fs.fail(t, "SHUTTING_DOWN", "worker shutting down")
	v = waitView(ctx, t, views, "disconnected", isState(Disconnected))
	if v.Report.GetSequenceId() != 3 || v.Reason != "no registered stream: SHUTTING_DOWN: worker shutting down" {
		t.Fatalf("view %+v", v)
	}
	// rand 0.5 is no jitter: the first wait is Initial, on the fake clock.
	if err := clk.waitTimer(ctx, clk.Now().Add(time.Second)); err != nil {
		t.Fatal("no backoff timer armed")
	}
	clk.Advance(time.Second)
	fs = fw.next(ctx, t)
	if reg := fs.register(ctx, t, 3_600_000, 1_200_000); reg.GetRouterId() != "router-a" {
		t.Fatalf("re-registered as %q", reg.GetRouterId())
	}
	fs.report(t, healthy("a", 4, 2))
	waitView(ctx, t, views, "fresh after reconnect", isState(Fresh))
	if w.Reconnects() != 1 {
		t.Fatalf("%d reconnects", w.Reconnects())
	}
}

// A subscriber that does not read holds only the latest view and delays
// nothing: the Worker reads every report meanwhile.
func TestSlowSubscriberLatestWins(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 10*time.Second)
	fw := startFakeWorker(t)
	w := dialT(t, fw.addr, fastOptions(ProtocolGRPC), deps{})
	slow, cancelSlow := w.Subscribe()
	defer cancelSlow()
	fast, cancelFast := w.Subscribe()
	defer cancelFast()
	fs := fw.next(ctx, t)
	fs.register(ctx, t, 60_000, 20_000)
	const n = 200
	for i := range uint64(n) {
		fs.report(t, healthy("a", i+1, 4))
	}
	waitView(ctx, t, fast, "the last report", hasSeq("a", n))
	select {
	case v := <-slow:
		if v.Report.GetSequenceId() != n {
			t.Fatalf("slow subscriber got #%d, want the latest #%d", v.Report.GetSequenceId(), n)
		}
	case <-ctx.Done():
		t.Fatal("slow subscriber has nothing")
	}
	select {
	case v := <-slow:
		t.Fatalf("slow subscriber kept more than the latest: %+v", v)
	default:
	}
	if got := w.View().Report.GetSequenceId(); got != n {
		t.Fatalf("View() at #%d", got)
	}
}

// UpdateConfig reaches the live stream at once and every later
// registration; keep-alives follow the shorter lease.
func TestUpdateConfig(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 10*time.Second)
	fw := startFakeWorker(t)
	clk, d := onFakeClock()
	w, views, fs := watch(ctx, t, fw, fastOptions(ProtocolConnect), d)
	fs.register(ctx, t, 60_000, 20_000)
	waitView(ctx, t, views, "registered", func(v *View) bool { return v.State == Stale })
	if err := w.UpdateConfig(ctx, 200*time.Millisecond, 3*time.Second); err != nil {
		t.Fatal(err)
	}
	u := fs.frameOf(ctx, t).GetUpdateConfig()
	if u.GetReportIntervalMs() != 200 || u.GetLeaseTtlMs() != 3000 {
		t.Fatalf("update_config %v", u)
	}
	// The new lease's third (1s) is shorter than the granted renew (20s).
	if err := clk.waitTimer(ctx, clk.Now().Add(time.Second)); err != nil {
		t.Fatal("keep-alive not re-armed at a third of the new lease")
	}
	clk.Advance(time.Second)
	if f := fs.frame(ctx, t); f.GetKeepAlive() == nil {
		t.Fatalf("want keep_alive, got %v", f)
	}
	if err := w.UpdateConfig(ctx, 0, 0); err != nil {
		t.Fatal(err)
	}
	if u := fs.frameOf(ctx, t).GetUpdateConfig(); u.ReportIntervalMs != nil || u.LeaseTtlMs != nil {
		t.Fatalf("zero means unchanged, got %v", u)
	}
	if err := w.UpdateConfig(ctx, time.Microsecond, 0); err == nil {
		t.Fatal("sub-millisecond interval accepted")
	}
	fs.fail(t, "LEASE_EXPIRED", "no keep-alive within 3000 ms")
	waitView(ctx, t, views, "disconnected", isState(Disconnected))
	if err := clk.waitTimer(ctx, clk.Now().Add(5*time.Millisecond)); err != nil {
		t.Fatal("no backoff timer")
	}
	clk.Advance(5 * time.Millisecond)
	fs = fw.next(ctx, t)
	reg := fs.frameOf(ctx, t).GetRegister()
	if reg.GetReportIntervalMs() != 200 || reg.GetLeaseTtlMs() != 3000 {
		t.Fatalf("re-registered with %v", reg)
	}
	// An update before the ack goes out at once, and the ack (which
	// reflects only the register) cannot stretch the keep-alives past it.
	if err := w.UpdateConfig(ctx, 0, 600*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if u := fs.frameOf(ctx, t).GetUpdateConfig(); u.GetLeaseTtlMs() != 600 {
		t.Fatalf("update_config %v", u)
	}
	fs.send(t, ackFrame(3000, 1000))
	if err := clk.waitTimer(ctx, clk.Now().Add(200*time.Millisecond)); err != nil {
		t.Fatal("keep-alive not at a third of the updated lease")
	}
}

// Close sends stop, and the worker's clean end lets it return.
func TestCloseSendsStop(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 10*time.Second)
	fw := startFakeWorker(t)
	w, err := Dial(fw.addr, fastOptions(ProtocolGRPC))
	if err != nil {
		t.Fatal(err)
	}
	views, cancel := w.Subscribe()
	defer cancel()
	fs := fw.next(ctx, t)
	fs.register(ctx, t, 60_000, 20_000)
	fs.report(t, healthy("a", 1, 1))
	waitView(ctx, t, views, "fresh", isState(Fresh))
	closed := make(chan error, 1)
	go func() { closed <- w.Close() }()
	if f := fs.frameOf(ctx, t); f.GetStop() == nil {
		t.Fatalf("want stop, got %v", f)
	}
	select {
	case err := <-closed:
		if err != nil || w.Err() != nil {
			t.Fatalf("Close %v, Err %v", err, w.Err())
		}
	case <-ctx.Done():
		t.Fatal("Close did not return")
	}
	if v := w.View(); v.State != Disconnected || v.Reason != "no registered stream: closed" {
		t.Fatalf("view after Close %+v", v)
	}
	_ = w.Close() // idempotent
}

// REPLACED and LEASE_EXPIRED are not errors: the Worker reconnects, counts
// why, and does not reset the backoff after REPLACED.
func TestReplacedReconnects(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 10*time.Second)
	fw := startFakeWorker(t)
	clk, d := onFakeClock()
	reg := prometheus.NewPedanticRegistry()
	o := fastOptions(ProtocolConnect)
	o.Registerer = reg
	o.Backoff = Backoff{Initial: 100 * time.Millisecond, Max: time.Second, Multiplier: 2, Jitter: 0.2}
	w := dialT(t, fw.addr, o, d)
	views, cancel := w.Subscribe()
	defer cancel()
	// Each stream: register, one report, then end with code. The backoff
	// grows after REPLACED and restarts after a healthy LEASE_EXPIRED.
	for i, step := range []struct {
		code string
		wait time.Duration
	}{
		{"REPLACED", 100 * time.Millisecond},
		{"REPLACED", 200 * time.Millisecond},
		{"LEASE_EXPIRED", 100 * time.Millisecond},
		{"SOMETHING_NEW", 100 * time.Millisecond},
	} {
		fs := fw.next(ctx, t)
		fs.register(ctx, t, 60_000, 20_000)
		fs.report(t, healthy("a", uint64(i+1), 1))
		waitView(ctx, t, views, "fresh", isState(Fresh))
		fs.fail(t, step.code, "")
		waitView(ctx, t, views, "disconnected", isState(Disconnected))
		if err := clk.waitTimer(ctx, clk.Now().Add(step.wait)); err != nil {
			t.Fatalf("step %d: no backoff timer of %v", i, step.wait)
		}
		clk.Advance(step.wait)
	}
	fw.next(ctx, t).register(ctx, t, 60_000, 20_000)
	// The last report, 100ms old, is still within 3 intervals: Fresh.
	waitView(ctx, t, views, "registered", isState(Fresh))
	if w.Err() != nil || w.Reconnects() != 4 {
		t.Fatalf("Err %v, %d reconnects", w.Err(), w.Reconnects())
	}
	for reason, want := range map[string]float64{"REPLACED": 2, "LEASE_EXPIRED": 1, reasonOther: 1} {
		if got := counterValue(t, w.metrics.reconnects.WithLabelValues(fw.addr, reason)); got != want {
			t.Errorf("reconnects{reason=%s} = %v, want %v", reason, got, want)
		}
	}
}

// TestAReconnectedViewTurnsStaleWithoutAReport: after a reconnect the view
// shows the last report, Fresh while it is recent; if the new stream brings
// no report, a Stale view is still published when that report ages out
// (it stayed Fresh until the idle watchdog, a lease later).
func TestAReconnectedViewTurnsStaleWithoutAReport(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 10*time.Second)
	fw := startFakeWorker(t)
	clk, d := onFakeClock()
	o := fastOptions(ProtocolGRPC)
	o.Backoff = Backoff{Initial: 100 * time.Millisecond, Max: time.Second, Multiplier: 2, Jitter: 0.2}
	_, views, fs := watch(ctx, t, fw, o, d)
	fs.register(ctx, t, 60_000, 20_000)
	fs.report(t, healthy("a", 1, 1))
	waitView(ctx, t, views, "fresh", isState(Fresh))
	fs.fail(t, "LEASE_EXPIRED", "")
	waitView(ctx, t, views, "disconnected", isState(Disconnected))
	if err := clk.waitTimer(ctx, clk.Now().Add(100*time.Millisecond)); err != nil {
		t.Fatal("no backoff timer")
	}
	clk.Advance(100 * time.Millisecond)
	fw.next(ctx, t).register(ctx, t, 60_000, 20_000)
	waitView(ctx, t, views, "registered again, the last report still recent", isState(Fresh))
	clk.Advance(time.Second) // past StaleAfterIntervals intervals, well within the lease
	waitView(ctx, t, views, "stale once the last report aged out", isState(Stale))
}

// A stream on which nothing arrives for a lease is abandoned, even though
// the worker never ends it, and the Worker registers again.
func TestSilentStreamIsAbandoned(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 10*time.Second)
	fw := startFakeWorker(t)
	clk, d := onFakeClock()
	w, views, silent := watch(ctx, t, fw, fastOptions(ProtocolGRPC), d)
	silent.register(ctx, t, 1000, 300_000)
	waitView(ctx, t, views, "registered", isState(Stale))
	// A lease (1s) and two intervals (2×50ms) after the ack.
	if err := clk.waitTimer(ctx, clk.Now().Add(1100*time.Millisecond)); err != nil {
		t.Fatal("no idle timer")
	}
	clk.Advance(1100 * time.Millisecond)
	v := waitView(ctx, t, views, "abandoned", isState(Disconnected))
	if v.Reason != "no registered stream: no frame for 1.1s" {
		t.Fatalf("reason %q", v.Reason)
	}
	if err := clk.waitTimer(ctx, clk.Now().Add(5*time.Millisecond)); err != nil {
		t.Fatal("no backoff timer")
	}
	clk.Advance(5 * time.Millisecond)
	fw.next(ctx, t).register(ctx, t, 60_000, 20_000)
	waitView(ctx, t, views, "registered again", isState(Stale))
	if w.Reconnects() != 1 {
		t.Fatalf("%d reconnects", w.Reconnects())
	}
}

// The first keep-alive after a registration goes at a random point of the
// period's second half (rand 0.25: at 6.25 s of 10 s), the later ones every
// period: a fleet that registered at once does not renew at once.
func TestFirstKeepAliveIsSpreadThenEveryPeriod(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 10*time.Second)
	fw := startFakeWorker(t)
	clk := newFakeClock(time.UnixMilli(1_700_000_000_000))
	_, views, fs := watch(ctx, t, fw, fastOptions(ProtocolGRPC), deps{clock: clk, rand: func() float64 { return 0.25 }})
	fs.register(ctx, t, 30_000, 10_000)
	waitView(ctx, t, views, "registered", func(v *View) bool { return v.State == Stale })

	first := clk.Now().Add(6250 * time.Millisecond)
	if err := clk.waitTimer(ctx, first); err != nil {
		t.Fatal("no keep-alive armed at 6.25 s, the second half of the 10 s period at rand 0.25")
	}
	clk.Advance(6250 * time.Millisecond)
	if f := fs.frame(ctx, t); f.GetKeepAlive() == nil {
		t.Fatalf("want keep_alive, got %v", f)
	}
	if err := clk.waitTimer(ctx, first.Add(10*time.Second)); err != nil {
		t.Fatal("the next keep-alive is not a whole period after the first")
	}
	clk.Advance(10 * time.Second)
	if f := fs.frame(ctx, t); f.GetKeepAlive() == nil {
		t.Fatalf("want keep_alive, got %v", f)
	}
}

func TestFirstKeepAliveStaysInTheSecondHalf(t *testing.T) {
	t.Parallel()
	const p = 3333 * time.Millisecond
	for _, u := range []float64{0, 0.5, 0.999999} {
		if d := firstKeepAlive(p, u); d < p/2 || d >= p {
			t.Errorf("firstKeepAlive(%v, %v) = %v, want in [%v, %v)", p, u, d, p/2, p)
		}
	}
	if d := firstKeepAlive(time.Millisecond, 0.9); d <= 0 {
		t.Errorf("the shortest period's first keep-alive is %v, want > 0", d)
	}
}

// TestAnOversizedFrameIsRefused: a peer that sends a frame larger than any
// report (a last_error of 8 MiB) is refused before it is buffered; the
// stream ends, saying why, and the router reconnects.
func TestAnOversizedFrameIsRefused(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 10*time.Second)
	fw := startFakeWorker(t)
	_, views, fs := watch(ctx, t, fw, fastOptions(ProtocolGRPC), deps{})
	fs.register(ctx, t, 60_000, 20_000)
	huge := unreachable("a", 1)
	huge.LastError = proto.String(strings.Repeat("x", 8<<20))
	fs.report(t, huge)
	v := waitView(ctx, t, views, "refused", isState(Disconnected))
	if !strings.Contains(v.Reason, "larger than") || v.Report != nil {
		t.Fatalf("view %s, reason %.200q (%d bytes), want disconnected for a frame over the limit, no report", v.State, v.Reason, len(v.Reason))
	}
	fw.next(ctx, t).register(ctx, t, 60_000, 20_000) // it reconnects
}

// TestCloseEndsEveryConnectionTheWorkerDialed: Close ends every connection
// the Worker's own HTTP client dialed, busy or idle, and one whose dial
// completes after Close (a stream cancelled while its dial ran left that
// connection open, idle, with its read loop, for ever: 10 of 100
// Dial-then-Close against a real worker).
func TestCloseEndsEveryConnectionTheWorkerDialed(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ended := make(chan struct{}, 4)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				_, _ = io.Copy(io.Discard, c) // until the client closes it
				_ = c.Close()
				ended <- struct{}{}
			}()
		}
	}()
	waitEnded := func(what string) {
		t.Helper()
		select {
		case <-ended:
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: the connection is still open", what)
		}
	}
	w, err := Dial(ln.Addr().String(), Options{RouterID: "r"})
	if err != nil {
		t.Fatal(err)
	}
	// The Worker's stream opens one connection; Close ends it.
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	waitEnded("the stream's connection after Close")
	// A dial that completes after Close is closed at once.
	d := &net.Dialer{}
	if c, err := w.conns.dial(context.Background(), d, "tcp", ln.Addr().String()); err == nil {
		_ = c.Close()
		t.Fatal("a dial after Close succeeded")
	}
	waitEnded("a connection dialed after Close")
}
