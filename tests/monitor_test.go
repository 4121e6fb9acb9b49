package tests

import (
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/loadreporter/loadreporter/domain/session"
	pb "github.com/loadreporter/loadreporter/gen/sglang/router/loadmonitor/v1"
)

// TestMonitorProtocol runs every rule of the stream protocol with each of
// the clients, side by side: each has a service of its own.
//
// Native gRPC clients reach grpc-go's server on the port, the others
// net/http's; the gRPC clients run once more against a port with
// --native-grpc=false, so every rule holds on both servers, and the
// port's counts show which one each client met.
func TestMonitorProtocol(t *testing.T) {
	t.Parallel()
	type way struct {
		d      dialer
		native bool
	}
	var ways []way
	for _, d := range dialers {
		ways = append(ways, way{d, true})
		if d.name == "grpc-go" || d.name == "connect-grpc" {
			ways = append(ways, way{d, false})
		}
	}
	for _, w := range ways {
		d, name := w.d, w.d.name
		if !w.native {
			name += "-on-net-http"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			c := testConfig()
			c.Sessions.MinLease = 100 * time.Millisecond
			c.Server.NativeGRPC = w.native
			engine := &countingEngine{ranks: 4}
			m := startMain(t, c, engine)
			addr := m.Addr()
			t.Cleanup(func() {
				if t.Failed() {
					return
				}
				// On the port: which server the streams met.
				fams, err := scrapeFamilies("http://" + addr + "/metrics")
				if err != nil {
					t.Error(err)
					return
				}
				got := byLabel(fams["loadreporter_port_connections_total"], "server", nil)
				wantGRPC := w.native && (d.name == "grpc-go" || d.name == "connect-grpc")
				if (got["grpc-go"] > 0) != wantGRPC || !w.native && len(got) != 0 {
					t.Errorf("port connections by server %v; want grpc-go's used: %v (native port: %v)", got, wantGRPC, w.native)
				}
			})

			t.Run("handshake then reports at the interval", func(t *testing.T) {
				ctx := testCtx(t, 10*time.Second)
				r := d.open(t, ctx, addr)
				if err := r.Send(registerFrame("r-handshake", 100, 5000)); err != nil {
					t.Fatal(err)
				}
				ack := recvFrame(t, r).GetRegistered()
				if ack == nil || ack.GetLeaseTtlMs() != 5000 || ack.GetRenewAfterMs() != 1666 {
					t.Fatalf("first frame must be the ack, got %v", ack)
				}
				var times []int64
				var last uint64
				for range 6 {
					rep := recvReport(t, r)
					if rep.GetStatus() != pb.ReportStatus_REPORT_STATUS_HEALTHY || len(rep.GetRanks()) != 4 {
						t.Fatalf("report %v", rep)
					}
					if rep.GetSequenceId() <= last {
						t.Fatalf("sequence %d after %d", rep.GetSequenceId(), last)
					}
					last = rep.GetSequenceId()
					times = append(times, rep.GetReportTimeUnixMs())
				}
				// Cadence, not speed: five gaps of about 100 ms (the first
				// gap is 50–150 ms on the aligned grid).
				if span := times[5] - times[1]; span < 200 || span > 2000 {
					t.Fatalf("4 intervals took %d ms, want about 400", span)
				}
				if err := r.Send(stopFrame); err != nil {
					t.Fatal(err)
				}
				expectCleanEnd(t, r)
			})

			t.Run("update_config changes the cadence", func(t *testing.T) {
				ctx := testCtx(t, 10*time.Second)
				r := d.open(t, ctx, addr)
				_ = r.Send(registerFrame("r-update", 5000, 10000))
				recvFrame(t, r) // ack
				first := recvReport(t, r)
				ivl := int64(50)
				if err := r.Send(updateFrame(&ivl, nil)); err != nil {
					t.Fatal(err)
				}
				// At 5 s a second report would take 5 s; at 50 ms, three
				// arrive well within one second.
				var rep *pb.LoadReport
				for range 3 {
					rep = recvReport(t, r)
				}
				if took := rep.GetReportTimeUnixMs() - first.GetReportTimeUnixMs(); took > 2000 {
					t.Fatalf("three reports after the update took %d ms", took)
				}
				_ = r.Send(stopFrame)
				expectCleanEnd(t, r)
			})

			t.Run("keep_alive keeps the session past its lease", func(t *testing.T) {
				ctx := testCtx(t, 10*time.Second)
				r := d.open(t, ctx, addr)
				_ = r.Send(registerFrame("r-keepalive", 50, 800))
				recvFrame(t, r)
				deadline := time.Now().Add(2 * time.Second) // two and a half leases
				for time.Now().Before(deadline) {
					recvReport(t, r)
					if err := r.Send(keepAliveFrame); err != nil {
						t.Fatal(err)
					}
				}
				_ = r.Send(stopFrame)
				expectCleanEnd(t, r)
			})

			t.Run("closed before any frame ends OK", func(t *testing.T) {
				r := d.open(t, testCtx(t, 5*time.Second), addr)
				if err := r.CloseSend(); err != nil {
					t.Fatal(err)
				}
				expectCleanEnd(t, r)
			})

			errorCases := []struct {
				name  string
				first *pb.RouterFrame
				then  func(r router)
				code  string
			}{
				{name: "keep_alive first", first: keepAliveFrame, code: "INVALID_FIRST_FRAME"},
				{name: "stop first", first: stopFrame, code: "INVALID_FIRST_FRAME"},
				{name: "interval too small", first: registerFrame("r-bad", 5, 1000), code: "INVALID_ARGUMENT"},
				{name: "blank router id", first: registerFrame(" ", 100, 1000), code: "INVALID_ARGUMENT"},
				{name: "lease zero", first: registerFrame("r-bad", 100, 0), code: "INVALID_ARGUMENT"},
				{name: "invalid update", first: registerFrame("r-upd", 100, 1000), then: func(r router) {
					bad := int64(999999999)
					_ = r.Send(updateFrame(&bad, nil))
				}, code: "INVALID_ARGUMENT"},
				{name: "second register with another id", first: registerFrame("r-one", 100, 1000), then: func(r router) {
					_ = r.Send(registerFrame("r-two", 100, 1000))
				}, code: "INVALID_ARGUMENT"},
				{name: "lease expires", first: registerFrame("r-lease", 50, 200), code: "LEASE_EXPIRED"},
			}
			for _, ec := range errorCases {
				t.Run(ec.name, func(t *testing.T) {
					r := d.open(t, testCtx(t, 10*time.Second), addr)
					if err := r.Send(ec.first); err != nil {
						t.Fatal(err)
					}
					if ec.then != nil {
						if recvFrame(t, r).GetRegistered() == nil {
							t.Fatal("no ack")
						}
						ec.then(r)
					}
					if e := recvError(t, r); e.GetCode() != ec.code || e.GetMessage() == "" {
						t.Fatalf("error %q %q, want %s with a message", e.GetCode(), e.GetMessage(), ec.code)
					}
				})
			}

			t.Run("second register on a live stream updates it", func(t *testing.T) {
				r := d.open(t, testCtx(t, 10*time.Second), addr)
				_ = r.Send(registerFrame("r-rereg", 5000, 10000))
				recvFrame(t, r)
				recvReport(t, r)
				_ = r.Send(registerFrame("r-rereg", 50, 10000))
				recvReport(t, r)
				recvReport(t, r)
				_ = r.Send(stopFrame)
				expectCleanEnd(t, r)
			})

			t.Run("re-registering replaces the old stream", func(t *testing.T) {
				ctx := testCtx(t, 10*time.Second)
				old := d.open(t, ctx, addr)
				_ = old.Send(registerFrame("r-dup", 100, 5000))
				recvFrame(t, old)
				neu := d.open(t, ctx, addr)
				_ = neu.Send(registerFrame("r-dup", 100, 5000))
				if e := recvError(t, old); e.GetCode() != "REPLACED" {
					t.Fatalf("old stream got %q", e.GetCode())
				}
				recvFrame(t, neu) // ack
				recvReport(t, neu)
				recvReport(t, neu) // still alive after the old one's cleanup
				_ = neu.Send(stopFrame)
				expectCleanEnd(t, neu)
			})
		})
	}
}

func TestResourceExhausted(t *testing.T) {
	t.Parallel()
	c := testConfig()
	c.Sessions.MaxSessions = 2
	m := startMain(t, c, &countingEngine{ranks: 2})
	ctx := testCtx(t, 10*time.Second)
	for _, id := range []string{"a", "b"} {
		r := openGRPC(t, ctx, m.Addr())
		_ = r.Send(registerFrame(id, 1000, 5000))
		recvFrame(t, r)
	}
	r := openGRPC(t, ctx, m.Addr())
	_ = r.Send(registerFrame("c", 1000, 5000))
	if e := recvError(t, r); e.GetCode() != "RESOURCE_EXHAUSTED" {
		t.Fatalf("got %q", e.GetCode())
	}
}

func TestShutdownSendsShuttingDownToEveryStream(t *testing.T) {
	t.Parallel()
	c := testConfig()
	m, err := appInit(c, &countingEngine{ranks: 2})
	if err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t, 10*time.Second)
	var routers []router
	for i, d := range dialers {
		r := d.open(t, ctx, m.Addr())
		_ = r.Send(registerFrame(d.name+string(rune('a'+i)), 100, 5000))
		recvFrame(t, r)
		recvReport(t, r)
		routers = append(routers, r)
	}
	closed := make(chan error, 1)
	go func() { closed <- m.Close() }()
	var wg sync.WaitGroup
	for i, r := range routers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				f, err := r.Recv()
				if err != nil {
					t.Errorf("%s: stream ended with %v before SHUTTING_DOWN", dialers[i].name, err)
					return
				}
				if e := f.GetError(); e != nil {
					if e.GetCode() != "SHUTTING_DOWN" {
						t.Errorf("%s: got %q", dialers[i].name, e.GetCode())
					}
					return
				}
			}
		}()
	}
	wg.Wait()
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil { // idempotent
		t.Fatal(err)
	}
}

// TestSlowRouterNeverDelaysOthers: one router never reads; another, on its
// own connection, keeps getting every report. It runs alone (no
// t.Parallel): a starved reader on a busy machine misses reports too.
func TestSlowRouterNeverDelaysOthers(t *testing.T) {
	engine := &countingEngine{ranks: 8}
	m := startMain(t, testConfig(), engine)
	ctx := testCtx(t, 20*time.Second)
	slow := openGRPC(t, ctx, m.Addr())
	_ = slow.Send(registerFrame("slow", 10, 60000)) // and never reads again
	fast := openGRPC(t, ctx, m.Addr())
	_ = fast.Send(registerFrame("fast", 10, 60000))
	recvFrame(t, fast)
	var missed, last uint64
	for i := range 300 { // 3 s of 10 ms reports: far past any flow-control window
		rep := recvReport(t, fast)
		if rep.GetStatus() != pb.ReportStatus_REPORT_STATUS_HEALTHY || len(rep.GetRanks()) != 8 {
			t.Fatalf("report %v (%s)", rep.GetStatus(), rep.GetLastError())
		}
		if i > 0 {
			missed += rep.GetSequenceId() - last - 1
		}
		last = rep.GetSequenceId()
	}
	// Both routers share the 10 ms grid: every fire is also the fast one's.
	if missed > 30 {
		t.Fatalf("the fast router missed %d of 300 reports while another stalled", missed)
	}
	if m.FireLoop().Count(session.KindMonitor) != 2 {
		t.Fatal("the slow router's session should still be live")
	}
}

// TestOversizedFrameIsRefused: a peer sending a huge frame is cut off with
// a resource-exhausted status instead of being buffered.
func TestOversizedFrameIsRefused(t *testing.T) {
	t.Parallel()
	m := startMain(t, testConfig(), &countingEngine{ranks: 2})
	r := openGRPC(t, testCtx(t, 10*time.Second), m.Addr())
	_ = r.Send(registerFrame(strings.Repeat("x", 200<<10), 100, 5000))
	if _, err := r.Recv(); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("err = %v, want ResourceExhausted", err)
	}
	if m.FireLoop().Count(session.KindMonitor) != 0 {
		t.Fatal("a session was registered from an oversized frame")
	}
}

// TestPhaseSlotsSplitTheFleetsFires: with --phase-slots 2, two routers on
// the same interval sit on different phases of it, so after the first
// report they are served by different fires (different sequence_ids),
// each still once per interval. With one grid they would share every fire.
// It runs alone (no t.Parallel): a late fire on a busy machine finds both
// phases due.
func TestPhaseSlotsSplitTheFleetsFires(t *testing.T) {
	c := testConfig()
	c.Fire.PhaseSlots = 2
	c.History.Interval = 0 // only the two routers hold slots
	m := startMain(t, c, &countingEngine{ranks: 2})
	ctx := testCtx(t, 20*time.Second)
	seqs := map[string][]uint64{}
	var routers []router
	for _, id := range []string{"a", "b"} {
		r := openGRPC(t, ctx, m.Addr())
		if err := r.Send(registerFrame(id, 100, 60000)); err != nil {
			t.Fatal(err)
		}
		recvFrame(t, r)  // registered
		recvReport(t, r) // the first report: due at once, maybe shared
		routers = append(routers, r)
	}
	for range 10 { // side by side, so both lists cover the same second
		for i, id := range []string{"a", "b"} {
			seqs[id] = append(seqs[id], recvReport(t, routers[i]).GetSequenceId())
		}
	}
	shared := 0
	for _, s := range seqs["a"] {
		if slices.Contains(seqs["b"], s) {
			shared++
		}
	}
	// A fire that runs late (a loaded machine) may find both phases due.
	if shared > 2 {
		t.Fatalf("%d of 10 reports shared a fire: a %v, b %v", shared, seqs["a"], seqs["b"])
	}
	for id, s := range seqs {
		for i := 1; i < len(s); i++ {
			if s[i]-s[i-1] > 4 {
				t.Fatalf("%s skipped fires: %v (one report per interval, two fires between)", id, s)
			}
		}
	}
	// Operators see the spread on /metrics.
	resp, err := http.Get("http://" + m.Addr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, series := range []string{`loadreporter_phase_slot_sessions{slot="0"} 1`, `loadreporter_phase_slot_sessions{slot="1"} 1`} {
		if !strings.Contains(string(body), series+"\n") {
			t.Errorf("/metrics lacks %s", series)
		}
	}
}
