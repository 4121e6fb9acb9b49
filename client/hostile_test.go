package client

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"google.golang.org/protobuf/proto"

	pb "github.com/loadreporter/loadreporter/gen/sglang/router/loadmonitor/v1"
)

// TestAHostileWorkersStringsAreBounded: a worker that sends a 3 MB model,
// zone or worker_addr has its report kept with the field cut to
// MaxMetadataBytes (on a rune boundary, marked "…"), in the Worker's view
// and in what the Fleet shows; a 3 MB source_instance_id is refused; a
// 3 MB stream error message ends in the view's reason cut as last_error is.
func TestAHostileWorkersStringsAreBounded(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 20*time.Second)
	fw := startFakeWorker(t)
	f, changed, fs := fleetOf(ctx, t, fw, fastOptions(ProtocolGRPC), deps{})
	fs.register(ctx, t, 60_000, 20_000)

	huge := "é" + strings.Repeat("x", 3<<20)
	checkCut := func(field, got string) {
		t.Helper()
		if len(got) > MaxMetadataBytes || !strings.HasPrefix(got, "éxxx") || !strings.HasSuffix(got, "x…") || !utf8.ValidString(got) {
			t.Fatalf("%s kept as %d bytes (bound %d): %.20q…%q", field, len(got), MaxMetadataBytes, got, got[max(0, len(got)-8):])
		}
	}
	fields := []struct {
		name string
		set  func(*pb.Worker)
		get  func(*pb.Worker) string
	}{
		{"model", func(m *pb.Worker) { m.Model = proto.String(huge) }, (*pb.Worker).GetModel},
		{"zone", func(m *pb.Worker) { m.Zone = proto.String(huge) }, (*pb.Worker).GetZone},
		{"worker_addr", func(m *pb.Worker) { m.WorkerAddr = huge }, (*pb.Worker).GetWorkerAddr},
	}
	for i, c := range fields {
		seq := uint64(i + 1)
		r := healthy("a", seq, 1)
		r.Worker.Model, r.Worker.Zone = proto.String("llama"), proto.String("eu-1")
		c.set(r.Worker)
		fs.report(t, r)
		waitFleet(ctx, t, f, changed, c.name, func(vs []*View) bool { return vs[0].Report.GetSequenceId() == seq })
		m := f.Views()[0].Report.GetWorker()
		checkCut(c.name, c.get(m))
		if f.Worker(fw.addr).View().Report.GetWorker() != m {
			t.Fatal("the Fleet shows another report than the Worker's view")
		}
		// The fields that fit are kept whole.
		for _, o := range fields {
			if o.name != c.name && len(o.get(m)) > 16 {
				t.Fatalf("%s: %s changed to %d bytes", c.name, o.name, len(o.get(m)))
			}
		}
	}

	long := healthy(strings.Repeat("i", 3<<20), 10, 1)
	fs.report(t, long)
	fs.report(t, healthy("a", 4, 1)) // in order after the refused one
	waitFleet(ctx, t, f, changed, "a#4", func(vs []*View) bool { return vs[0].Report.GetSequenceId() == 4 })
	if got := f.Worker(fw.addr).Rejected()[RejectInstance]; got != 1 {
		t.Fatalf("a 3 MB source_instance_id: %d rejected, want 1", got)
	}

	fs.fail(t, "LEASE_EXPIRED", huge)
	waitFleet(ctx, t, f, changed, "disconnected", func(vs []*View) bool { return vs[0].State == Disconnected })
	if r := f.Views()[0].Reason; len(r) > MaxLastErrorBytes+100 || !strings.Contains(r, "LEASE_EXPIRED: éxxx") || !utf8.ValidString(r) {
		t.Fatalf("reason of %d bytes: %.80q", len(r), r)
	}
	fw.next(ctx, t).register(ctx, t, 60_000, 20_000) // it reconnects
}

// TestAHostileAckIsBounded: whatever lease_ttl_ms and renew_after_ms a
// worker answers, the Worker keeps a lease within 24h (no overflow) and
// sends keep-alives no more often than every max(100 ms, lease/10) and
// no less often than every lease/2. The keep-alives are counted on the
// fake worker while the fake clock runs through each timer in turn.
func TestAHostileAckIsBounded(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name             string
		leaseMs, renewMs int64
		lease, renew     time.Duration // the Grant shown
		span             time.Duration // shorter than the idle timeout
		keepAlives       int
	}{
		// The floor: a tenth of the lease, 1 s, not 1 ms.
		{name: "renew_after 0", leaseMs: 10_000, renewMs: 0, lease: 10 * time.Second, renew: time.Second,
			span: 9500 * time.Millisecond, keepAlives: 9},
		// The floor: 100 ms for a short lease.
		{name: "renew_after 1ms", leaseMs: 1000, renewMs: 1, lease: time.Second, renew: 100 * time.Millisecond,
			span: 1050 * time.Millisecond, keepAlives: 10},
		// The ceiling: half the lease (the product overflowed to -1 ms).
		{name: "renew_after huge", leaseMs: 10_000, renewMs: math.MaxInt64, lease: 10 * time.Second, renew: 5 * time.Second,
			span: 9500 * time.Millisecond, keepAlives: 2},
		// A lease past 24h is 24h.
		{name: "lease huge", leaseMs: math.MaxInt64, renewMs: math.MaxInt64, lease: 24 * time.Hour, renew: 12 * time.Hour,
			span: 23 * time.Hour, keepAlives: 2},
		// No lease granted: the lease asked (1 s) stands.
		{name: "lease 0", leaseMs: 0, renewMs: 0, lease: time.Second, renew: 100 * time.Millisecond,
			span: 1050 * time.Millisecond, keepAlives: 10},
		{name: "lease negative", leaseMs: -5, renewMs: -5, lease: time.Second, renew: 100 * time.Millisecond,
			span: 1050 * time.Millisecond, keepAlives: 10},
		// An honest worker is obeyed to the millisecond.
		{name: "honest", leaseMs: 3000, renewMs: 1000, lease: 3 * time.Second, renew: time.Second,
			span: 3 * time.Second, keepAlives: 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testCtx(t, 10*time.Second)
			fw := startFakeWorker(t)
			clk, d := onFakeClock()
			_, views, fs := watch(ctx, t, fw, fastOptions(ProtocolGRPC), d)
			fs.register(ctx, t, tc.leaseMs, tc.renewMs)
			v := waitView(ctx, t, views, "registered", isState(Stale))
			if g := v.Granted; g.Lease != tc.lease || g.RenewAfter != tc.renew {
				t.Fatalf("granted lease %v, renew after %v; want %v, %v", g.Lease, g.RenewAfter, tc.lease, tc.renew)
			}
			if got := countKeepAlives(ctx, t, clk, fs, tc.span, 2*tc.keepAlives+5); got != tc.keepAlives {
				t.Fatalf("%d keep-alives in %v, want %d", got, tc.span, tc.keepAlives)
			}
		})
	}
}

// countKeepAlives runs the fake clock to each timer in turn until span
// has passed (or more than limit keep-alives came) and counts the
// keep-alives the fake worker receives meanwhile. A registered stream
// without reports has two timers: the idle watchdog (which span must
// not reach) and the next keep-alive.
func countKeepAlives(ctx context.Context, t *testing.T, clk *fakeClock, fs *fakeStream, span time.Duration, limit int) int {
	t.Helper()
	end := clk.Now().Add(span)
	n := 0
	for n <= limit {
		if err := clk.WaitPending(ctx, 2); err != nil {
			t.Fatalf("after %d keep-alives: no next keep-alive armed", n)
		}
		at, _ := clk.Next()
		if at.After(end) {
			break
		}
		clk.Advance(at.Sub(clk.Now()))
		if f := fs.frame(ctx, t); f.GetKeepAlive() == nil {
			t.Fatalf("after %d keep-alives: want keep_alive, got %v", n, f)
		}
		n++
	}
	return n
}

// Options and UpdateConfig past 24h ask for 24h, and a huge
// StaleAfterIntervals does not wrap the staleness bound to negative.
func TestDurationsPastTheMaximumAreClamped(t *testing.T) {
	t.Parallel()
	o, err := Options{RouterID: "r", ReportInterval: math.MaxInt64, Lease: math.MaxInt64, StaleAfterIntervals: math.MaxInt}.normalized()
	if err != nil {
		t.Fatal(err)
	}
	if o.ReportInterval != 24*time.Hour || o.Lease != 24*time.Hour {
		t.Fatalf("interval %v lease %v, want 24h each", o.ReportInterval, o.Lease)
	}
	w := &Worker{opts: o}
	if f := w.freshness(&loopState{interval: o.ReportInterval}); f.staleAfter <= 0 {
		t.Fatalf("stale after %v", f.staleAfter)
	}
	ctx := testCtx(t, 10*time.Second)
	fw := startFakeWorker(t)
	wk := dialT(t, fw.addr, fastOptions(ProtocolGRPC), deps{})
	fs := fw.next(ctx, t)
	fs.register(ctx, t, 60_000, 20_000)
	if err := wk.UpdateConfig(ctx, 0, math.MaxInt64); err != nil {
		t.Fatal(err)
	}
	if u := fs.frameOf(ctx, t).GetUpdateConfig(); u.GetLeaseTtlMs() != (24 * time.Hour).Milliseconds() {
		t.Fatalf("update_config %v, want a lease of 24h", u)
	}
}

func TestKeepAlivePeriodBounds(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ renew, lease, want time.Duration }{
		{0, 10 * time.Second, time.Second},
		{time.Hour, 10 * time.Second, 5 * time.Second},
		{333 * time.Millisecond, time.Second, 333 * time.Millisecond},
		{0, 50 * time.Millisecond, minKeepAlive}, // the floor wins over lease/2
		{-time.Second, time.Second, minKeepAlive},
	} {
		if got := keepAlivePeriod(c.renew, c.lease); got != c.want {
			t.Errorf("keepAlivePeriod(%v, %v) = %v, want %v", c.renew, c.lease, got, c.want)
		}
	}
}
