package rpc

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/loadreporter/loadreporter/domain"
	"github.com/loadreporter/loadreporter/domain/fireloop"
	pb "github.com/loadreporter/loadreporter/gen/sglang/router/loadmonitor/v1"
	"github.com/loadreporter/loadreporter/gen/sglang/router/loadmonitor/v1/loadmonitorv1connect"
	"github.com/loadreporter/loadreporter/internal/sharedtest"
	"github.com/loadreporter/loadreporter/ports/porttest"
	"golang.org/x/net/http2"
	"google.golang.org/protobuf/proto"
)

// hardTest is a Monitor over a fake registrar on a fake clock, with its
// log captured and its shutdown in the test's hands.
type hardTest struct {
	t        *testing.T
	clock    *porttest.Clock
	reg      *fakeRegistrar
	shutdown context.CancelFunc
	monitor  *Monitor
	logs     *sharedtest.LockedBuffer
	srv      *httptest.Server
	client   loadmonitorv1connect.LoadMonitorServiceClient
}

func newHardTest(t *testing.T, o MonitorOptions, proto []connect.ClientOption) *hardTest {
	t.Helper()
	h := &hardTest{t: t, clock: porttest.NewClock(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)), logs: &sharedtest.LockedBuffer{}}
	stopping, shutdown := context.WithCancel(context.Background())
	t.Cleanup(shutdown)
	h.shutdown = shutdown
	h.reg = &fakeRegistrar{sess: newFakeSession("r1"), calls: make(chan string, 16), stopping: stopping}
	o.Clock = h.clock
	o.Logger = slog.New(slog.NewTextHandler(h.logs, nil))
	h.monitor = mustMonitor(t, h.reg, o)
	h.srv = serve(t, h.monitor.Handler)
	h.client = loadmonitorv1connect.NewLoadMonitorServiceClient(h.srv.Client(), h.srv.URL, proto...)
	return h
}

// open opens a stream and sends its headers, but no frame.
func (h *hardTest) open() *monitorTest {
	h.t.Helper()
	ctx, cancel := context.WithCancel(testContext(h.t))
	m := &monitorTest{t: h.t, ctx: testContext(h.t), cancel: cancel, reg: h.reg, sess: h.reg.sess, st: h.client.Monitor(ctx)}
	h.t.Cleanup(func() {
		cancel()
		_ = m.st.CloseRequest()
		_ = m.st.CloseResponse()
	})
	if err := m.st.Send(nil); err != nil {
		h.t.Fatalf("send headers: %v", err)
	}
	return m
}

// waitTimers waits until n timers are armed on the fake clock.
func (h *hardTest) waitTimers(n int) {
	h.t.Helper()
	if err := h.clock.WaitPending(testContext(h.t), n); err != nil {
		h.t.Fatalf("waiting for %d armed timers (%d are): %v", n, h.clock.Pending(), err)
	}
}

// TestMonitorFirstFrameTimeout: a stream that sends no register within
// FirstFrameTimeout ends with status DEADLINE_EXCEEDED, not an
// INVALID_FIRST_FRAME frame (routers may take that as a refusal for good,
// and a register late on a lossy network is no mistake of theirs); it
// counts as pending until then, and the log gets one line per
// AbuseLogInterval, counting the lines it held back.
func TestMonitorFirstFrameTimeout(t *testing.T) {
	t.Parallel()
	eachClient(t, func(t *testing.T, proto []connect.ClientOption) {
		h := newHardTest(t, MonitorOptions{}, proto)
		a := h.open()
		h.waitTimers(1)
		if got := h.monitor.PendingStreams(); got != 1 {
			t.Fatalf("PendingStreams = %d, want 1", got)
		}
		b := h.open()
		h.waitTimers(2)
		h.clock.Advance(DefaultFirstFrameTimeout)
		for _, m := range []*monitorTest{a, b} {
			if msg := m.endsWithStatus(connect.CodeDeadlineExceeded); msg != "no register within 5s" {
				t.Errorf("message %q, want %q", msg, "no register within 5s")
			}
		}
		if got := h.monitor.PendingStreams(); got != 0 {
			t.Errorf("PendingStreams = %d after both ended, want 0", got)
		}
		h.clock.Advance(DefaultAbuseLogInterval)
		c := h.open()
		h.waitTimers(1)
		h.clock.Advance(DefaultFirstFrameTimeout)
		c.endsWithStatus(connect.CodeDeadlineExceeded)
		if got := h.monitor.FirstFrameTimeouts(); got != 3 {
			t.Errorf("FirstFrameTimeouts = %d, want 3", got)
		}
		lines := h.logs.Lines("no register in time")
		if len(lines) != 2 || !strings.Contains(lines[0], "suppressed=0") || !strings.Contains(lines[1], "suppressed=1") {
			t.Errorf("log lines %q, want two, the second counting one held back", lines)
		}
		for _, l := range lines {
			if !strings.Contains(l, `reason="no register within 5s"`) {
				t.Errorf("log line %q does not say why the stream ended", l)
			}
		}
		a.noCalls()
	})
}

// TestMonitorRegisterInTime: a register before the deadline disarms it.
func TestMonitorRegisterInTime(t *testing.T) {
	t.Parallel()
	h := newHardTest(t, MonitorOptions{}, nil)
	m := h.open()
	h.waitTimers(1)
	m.register()
	if got := h.monitor.PendingStreams(); got != 0 {
		t.Errorf("PendingStreams = %d after register, want 0", got)
	}
	if got := h.clock.Pending(); got != 0 {
		t.Errorf("%d timers armed after register, want none", got)
	}
	m.send(stopFrame)
	m.endsOK()
}

// TestMonitorFrameBudget: a stream may send FrameBurst frames at once and
// MaxFramesPerSecond after that; the frame beyond ends it with
// RESOURCE_EXHAUSTED naming the limit.
func TestMonitorFrameBudget(t *testing.T) {
	t.Parallel()
	eachClient(t, func(t *testing.T, proto []connect.ClientOption) {
		h := newHardTest(t, MonitorOptions{FrameBurst: 5, MaxFramesPerSecond: 10}, proto)
		m := h.open()
		m.register() // 1 of 5
		for range 4 {
			m.send(keepAliveFrame)
			m.wait(m.sess.calls, "keep_alive")
		}
		h.clock.Advance(100 * time.Millisecond) // one frame more
		m.send(keepAliveFrame)
		m.wait(m.sess.calls, "keep_alive")
		m.send(keepAliveFrame)
		e := m.endsWith(domain.CodeResourceExhausted)
		if !strings.Contains(e.GetMessage(), "5 router frames at once or 10 a second") {
			t.Errorf("message %q does not name the limit", e.GetMessage())
		}
		m.waitClosed()
		m.noCalls()
		if got := h.monitor.OverBudget(); got != 1 {
			t.Errorf("OverBudget = %d, want 1", got)
		}
		if lines := h.logs.Lines("monitor stream ended"); len(lines) != 1 || !strings.Contains(lines[0], "over its frame budget") ||
			!strings.Contains(lines[0], "router_id=r1") {
			t.Errorf("log lines %q, want one, about the budget, naming the router", lines)
		}
		if got := h.monitor.StreamErrors()[domain.CodeResourceExhausted]; got != 1 {
			t.Errorf("StreamErrors[RESOURCE_EXHAUSTED] = %d, want 1", got)
		}
	})
}

// TestMonitorShutdownBeforeRegister: a stream that never registered ends
// with SHUTTING_DOWN as soon as the reporter shuts down.
func TestMonitorShutdownBeforeRegister(t *testing.T) {
	t.Parallel()
	eachClient(t, func(t *testing.T, proto []connect.ClientOption) {
		h := newHardTest(t, MonitorOptions{}, proto)
		m := h.open()
		h.waitTimers(1)
		h.shutdown()
		m.endsWith(domain.CodeShuttingDown)
		m.noCalls()
		if got := h.monitor.PendingStreams(); got != 0 {
			t.Errorf("PendingStreams = %d, want 0", got)
		}
	})
}

func TestMonitorOptionsRejectNegative(t *testing.T) {
	t.Parallel()
	for _, o := range []MonitorOptions{
		{FirstFrameTimeout: -1}, {MaxFramesPerSecond: -1}, {FrameBurst: -1},
		{FinalWriteTimeout: -1}, {AbuseLogInterval: -1},
	} {
		if _, err := newMonitor(&fakeRegistrar{}, o); domain.ErrorCode(err) != domain.CodeInvalidArgument {
			t.Errorf("%+v: err %v, want INVALID_ARGUMENT", o, err)
		}
	}
}

// eachClient runs test once per client protocol.
func eachClient(t *testing.T, test func(t *testing.T, proto []connect.ClientOption)) {
	for _, p := range clientProtocols {
		t.Run(p.name, func(t *testing.T) { test(t, p.opts) })
	}
}

type nopSource struct{}

func (nopSource) Pull(context.Context) (domain.Snapshot, error) { return domain.Snapshot{}, nil }

// TestMonitorLoopShutdownBeforeRegister: over the real fire loop, a stream
// that never registered ends with SHUTTING_DOWN at Loop.Shutdown.
func TestMonitorLoopShutdownBeforeRegister(t *testing.T) {
	t.Parallel()
	clk := porttest.NewClock(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC))
	loop, err := fireloop.New(fireloop.Options{Source: nopSource{}, Clock: clk, Builder: domain.ReportBuilder{StaleAfter: time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	mon, err := NewMonitorWithOptions(loop, MonitorOptions{Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	srv := serve(t, mon.Handler)
	client := loadmonitorv1connect.NewLoadMonitorServiceClient(srv.Client(), srv.URL)
	ctx := testContext(t)
	st := client.Monitor(ctx)
	defer func() { _ = st.CloseResponse() }()
	if err := st.Send(nil); err != nil {
		t.Fatal(err)
	}
	if err := clk.WaitPending(ctx, 1); err != nil {
		t.Fatal(err)
	}
	loop.Shutdown()
	f, err := st.Receive()
	if err != nil || f.GetError().GetCode() != domain.CodeShuttingDown {
		t.Fatalf("got %v, %v; want SHUTTING_DOWN", f, err)
	}
	if _, err := st.Receive(); !errors.Is(err, io.EOF) {
		t.Fatalf("the stream ended with %v, want status OK", err)
	}
}

// TestMonitorUndecodableFrame: a frame that does not decode is a protocol
// error like any other, in a StreamError and with status OK:
// INVALID_FIRST_FRAME before register, INVALID_ARGUMENT after.
func TestMonitorUndecodableFrame(t *testing.T) {
	t.Parallel()
	garbage := []byte{0xff, 0xff, 0xff}
	register, _ := proto.Marshal(registerFrame("r1", 100, 3000))
	for _, c := range []struct {
		name   string
		frames [][]byte
		code   string
	}{
		{"first", [][]byte{garbage}, domain.CodeInvalidFirstFrame},
		{"registered", [][]byte{register, garbage}, domain.CodeInvalidArgument},
	} {
		t.Run(c.name, func(t *testing.T) {
			eachClient(t, func(t *testing.T, opts []connect.ClientOption) {
				reg := &fakeRegistrar{sess: newFakeSession("r1"), calls: make(chan string, 16)}
				srv := serve(t, mustMonitor(t, reg, MonitorOptions{}).Handler)
				client := connect.NewClient[rawFrame, pb.WorkerFrame](srv.Client(),
					srv.URL+loadmonitorv1connect.LoadMonitorServiceMonitorProcedure, append([]connect.ClientOption{connect.WithCodec(rawCodec{})}, opts...)...)
				st := client.CallBidiStream(testContext(t))
				defer func() { _ = st.CloseResponse() }()
				for _, f := range c.frames {
					if err := st.Send(&rawFrame{f}); err != nil {
						t.Fatal(err)
					}
				}
				var last *pb.WorkerFrame
				var err error
				for err == nil {
					var f *pb.WorkerFrame
					if f, err = st.Receive(); err == nil {
						last = f
					}
				}
				if !errors.Is(err, io.EOF) {
					t.Fatalf("the stream ended with %v, want status OK", err)
				}
				if e := last.GetError(); e.GetCode() != c.code || !strings.Contains(e.GetMessage(), "does not decode") {
					t.Fatalf("last frame %v, want %s saying the frame does not decode", last, c.code)
				}
			})
		})
	}
}

// TestMonitorEndsAreLoggedAndCounted: every StreamError frame is counted by
// its code; a refusal at --max-sessions is a warning and a lease that ran
// out is an info line, each code held back to one line per
// AbuseLogInterval, counting the lines it held back.
func TestMonitorEndsAreLoggedAndCounted(t *testing.T) {
	t.Parallel()
	h := newHardTest(t, MonitorOptions{}, nil)
	h.reg.err = domain.Errorf(domain.CodeResourceExhausted, "10000 sessions are live, the limit is 10000")
	refuse := func() {
		m := h.open()
		m.send(registerFrame("r1", 100, 3000))
		m.endsWith(domain.CodeResourceExhausted)
		m.wait(h.reg.calls, "register r1 100 3000")
	}
	refuse()
	refuse() // within the interval: counted, not logged
	h.clock.Advance(DefaultAbuseLogInterval)
	refuse()
	lines := h.logs.Lines("monitor register refused: a limit is reached")
	if len(lines) != 2 || !strings.Contains(lines[0], "level=WARN") || !strings.Contains(lines[0], "router_id=r1") ||
		!strings.Contains(lines[1], "suppressed=1") {
		t.Errorf("log lines %q, want two warnings naming the router, the second counting one held back", lines)
	}

	h.reg.err = nil
	m := h.open()
	m.register()
	h.reg.sess.end(domain.Errorf(domain.CodeLeaseExpired, "no keep_alive within the 3000 ms lease"))
	m.endsWith(domain.CodeLeaseExpired)
	if lines := h.logs.Lines("no keep_alive within the lease"); len(lines) != 1 || !strings.Contains(lines[0], "level=INFO") {
		t.Errorf("log lines %q, want one info line", lines)
	}
	want := map[string]uint64{domain.CodeResourceExhausted: 3, domain.CodeLeaseExpired: 1}
	if got := h.monitor.StreamErrors(); !maps.Equal(got, want) {
		t.Errorf("StreamErrors = %v, want %v", got, want)
	}
}

// TestMonitorBoundsStreamsWaitingToRegister: each stream that has not
// registered waits up to FirstFrameTimeout holding a goroutine; past
// MaxPendingStreams over all connections, one more is refused at once with
// status RESOURCE_EXHAUSTED naming the flag (a status needs no window: a
// client granting none cannot hold the refusal), and once one registers
// another may wait.
func TestMonitorBoundsStreamsWaitingToRegister(t *testing.T) {
	t.Parallel()
	h := newHardTest(t, MonitorOptions{MaxPendingStreams: 2, FinalWriteTimeout: 10 * time.Second}, nil)
	a, _ := h.open(), h.open()
	h.waitTimers(2)
	refused := h.open()
	if _, err := refused.st.Receive(); connect.CodeOf(err) != connect.CodeResourceExhausted || !strings.Contains(err.Error(), "--max-pending-streams") {
		t.Errorf("refused with %v, want RESOURCE_EXHAUSTED naming --max-pending-streams", err)
	}
	// A client that grants no window gets its refusal whole, at once.
	h2c, _ := serveH2C(t, h.monitor.Handler, context.Background(), 10*time.Second)
	frames := noWindowRouter(t, strings.TrimPrefix(h2c, "http://"), registerFrame("r9", 100, 3000))
	for deadline := time.After(3 * time.Second); ; {
		select {
		case f := <-frames:
			if f.Type == http2.FrameHeaders && f.Flags.Has(http2.FlagHeadersEndStream) {
				goto ended
			}
		case <-deadline:
			t.Fatal("the refusal of a client granting no window did not end its stream within 3 s")
		}
	}
ended:
	if got := h.monitor.PendingStreams(); got != 2 {
		t.Fatalf("PendingStreams = %d after the refusals, want 2", got)
	}
	a.register()
	c := h.open()
	h.waitTimers(2) // b's and c's first-frame deadlines: c waits
	if got := h.monitor.PendingStreams(); got != 2 {
		t.Fatalf("PendingStreams = %d, want 2 (b and c)", got)
	}
	c.noCalls()
}

// TestMonitorSharedFrameBudgets: the streams of one connection share a
// budget, and so do those of one peer host over several connections: a
// flood spread over streams each within its own budget, or over
// reconnections, ends once the shared budget is spent, naming it. A
// budget is given back when its last stream ends.
func TestMonitorSharedFrameBudgets(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		opts     MonitorOptions
		sameConn bool
		want     string
	}{
		{"connection", MonitorOptions{MaxConnFramesPerSecond: 4, MaxPeerFramesPerSecond: 1000}, true, "--max-conn-frames-per-second"},
		{"peer", MonitorOptions{MaxConnFramesPerSecond: 1000, MaxPeerFramesPerSecond: 4}, false, "the streams from 127.0.0.1 sent more than 4"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHardTest(t, tc.opts, nil)
			a := h.open()
			a.register() // 1 of 4
			for range 2 {
				a.send(keepAliveFrame)
				a.wait(a.sess.calls, "keep_alive")
			} // 3 of 4
			if !tc.sameConn {
				// A connection of its own, from the same host.
				tr := h.srv.Client().Transport.(*http.Transport).Clone()
				t.Cleanup(tr.CloseIdleConnections)
				h.client = loadmonitorv1connect.NewLoadMonitorServiceClient(&http.Client{Transport: tr}, h.srv.URL)
			}
			b := h.open()
			b.register() // 4 of 4
			b.send(keepAliveFrame)
			e := b.endsWith(domain.CodeResourceExhausted)
			if !strings.Contains(e.GetMessage(), tc.want) {
				t.Errorf("message %q does not name %q", e.GetMessage(), tc.want)
			}
			if got := h.monitor.OverBudget(); got != 1 {
				t.Errorf("OverBudget = %d, want 1", got)
			}
			a.send(stopFrame)
			ctx := testContext(t)
			for h.monitor.conns.keys()+h.monitor.peers.keys() > 0 {
				if ctx.Err() != nil {
					t.Fatalf("budgets still held after every stream ended: %d connections, %d peers", h.monitor.conns.keys(), h.monitor.peers.keys())
				}
				time.Sleep(time.Millisecond)
			}
		})
	}
}

func TestSharedBudgetsAreOnePerKey(t *testing.T) {
	t.Parallel()
	b := newSharedBudgets(10)
	now := time.Unix(0, 0)
	x, y := b.acquire("10.0.0.7", now), b.acquire("10.0.0.7", now)
	if x != y || b.acquire("10.0.0.8", now) == x || b.keys() != 2 {
		t.Fatal("one key, one bucket")
	}
	b.release("10.0.0.7")
	if b.keys() != 2 {
		t.Fatal("released while a stream still holds it")
	}
	b.release("10.0.0.7")
	b.release("10.0.0.8")
	if b.keys() != 0 {
		t.Fatalf("%d buckets left", b.keys())
	}
	if peerHost("[::1]:8080") != "::1" || peerHost("10.0.0.7:41000") != "10.0.0.7" || peerHost("pipe") != "pipe" {
		t.Fatal("peerHost")
	}
}

// A stream's own budget lets burst frames through at once, then one per
// 1/rate seconds, never more than burst banked however long the stream
// was quiet, and a clock that steps back adds nothing.
func TestStreamBudgetSpendsBurstThenRate(t *testing.T) {
	var b streamBudget
	t0 := time.Unix(1_700_000_000, 0)
	const rate, burst = 10.0, 3
	for i := range burst {
		if !b.allow(t0, rate, burst) {
			t.Fatalf("frame %d of the burst refused", i+1)
		}
	}
	if b.allow(t0, rate, burst) {
		t.Fatal("a frame beyond the burst at the same instant was allowed")
	}
	if b.allow(t0.Add(50*time.Millisecond), rate, burst) {
		t.Error("half a token after 50 ms at 10/s was enough for a frame")
	}
	if !b.allow(t0.Add(100*time.Millisecond), rate, burst) {
		t.Error("a whole token after 100 ms at 10/s was refused")
	}
	if b.allow(t0.Add(-time.Hour), rate, burst) {
		t.Error("a clock stepped back refilled the budget")
	}
	if !b.allow(t0.Add(-time.Hour+100*time.Millisecond), rate, burst) {
		t.Error("after the clock stepped back, a token's time from there was refused")
	}
	later := t0.Add(time.Hour)
	for i := range burst {
		if !b.allow(later, rate, burst) {
			t.Fatalf("after an hour quiet, frame %d of the burst refused", i+1)
		}
	}
	if b.allow(later, rate, burst) {
		t.Error("an hour quiet banked more than the burst")
	}
}
