package client

import (
	"context"
	"crypto/tls"
	"net/http"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/loadreporter/loadreporter/cmd/loadreporter/app"
	domainsession "github.com/loadreporter/loadreporter/domain/session"
	pb "github.com/loadreporter/loadreporter/gen/sglang/router/loadmonitor/v1"
	"github.com/loadreporter/loadreporter/gen/sglang/router/loadmonitor/v1/loadmonitorv1connect"
	"github.com/loadreporter/loadreporter/internal/sharedtest"
)

// simRanks is how many ranks the built-in simulator reports.
const simRanks = 4

// startServer boots the real service (simulated engine) on 127.0.0.1:0,
// or where edit says; it is closed at cleanup.
func startServer(t *testing.T, edit func(*app.Config)) *app.Main {
	t.Helper()
	c := app.DefaultConfig()
	c.Server.Listen = "127.0.0.1:0"
	c.Logs.LogLevel = "error"
	if edit != nil {
		edit(&c)
	}
	m, err := app.InitializeMain(c)
	if err != nil {
		t.Fatal(err)
	}
	sharedtest.Start(t, m)
	return m
}

func reasonHas(s State, part string) func(*View) bool {
	return func(v *View) bool { return v.State == s && strings.Contains(v.Reason, part) }
}

func seqAtLeast(n uint64) func(*View) bool {
	return func(v *View) bool { return v.State == Fresh && v.Report.GetSequenceId() >= n }
}

// The client registers, renews, follows reports and stops, over gRPC and
// Connect, against the real worker.
func TestRealWorker(t *testing.T) {
	t.Parallel()
	for _, p := range []Protocol{ProtocolGRPC, ProtocolConnect} {
		t.Run(p.String(), func(t *testing.T) {
			ctx := testCtx(t, 15*time.Second)
			m := startServer(t, nil)
			reg := prometheus.NewPedanticRegistry()
			o := fastOptions(p)
			o.Registerer = reg
			o.StaleAfterIntervals = 20 // a slow race-detector run does not age a view between two asserts
			w := dialT(t, m.Addr(), o, deps{})
			views, cancel := w.Subscribe()
			defer cancel()
			v := waitView(ctx, t, views, "fresh", isState(Fresh))
			if len(v.Report.GetRanks()) != simRanks || v.Report.GetSourceInstanceId() == "" || v.Addr != m.Addr() {
				t.Fatalf("view %+v", v)
			}
			first := v.Report.GetSequenceId()
			waitView(ctx, t, views, "three more reports", seqAtLeast(first+3))
			if err := w.UpdateConfig(ctx, 100*time.Millisecond, 2*time.Second); err != nil {
				t.Fatal(err)
			}
			v = waitView(ctx, t, views, "reports after the update", seqAtLeast(w.View().Report.GetSequenceId()+2))
			if want := v.ReceivedAt.Add(20 * 100 * time.Millisecond); !v.StaleAt.Equal(want) {
				t.Fatalf("StaleAt %v, want 20 new intervals after receipt %v", v.StaleAt, want)
			}
			if got := gauge(t, reg, "loadreporter_client_worker_state", "state", "fresh"); got != 1 {
				t.Fatalf("state{fresh} = %v", got)
			}
			if age := gauge(t, reg, "loadreporter_client_report_age_seconds", "", ""); age < 0 || age > 10 {
				t.Fatalf("report age %v", age)
			}
			for r, n := range w.Rejected() {
				if n != 0 {
					t.Errorf("the real worker's reports rejected: %s %d", r, n)
				}
			}
			if err := w.Close(); err != nil || w.Err() != nil {
				t.Fatalf("Close %v, Err %v", err, w.Err())
			}
			if n := m.FireLoop().Count(domainsession.KindMonitor); n != 0 {
				t.Fatalf("%d sessions left on the worker after Close", n)
			}
			if fams, err := reg.Gather(); err != nil || len(fams) != 0 {
				t.Fatalf("a closed worker leaves series behind: %v %v", fams, err)
			}
		})
	}
}

// gauge reads the one series of name whose label has value (any series
// when label is "").
func gauge(t *testing.T, reg *prometheus.Registry, name, label, value string) float64 {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if label == "" || (l.GetName() == label && l.GetValue() == value) {
					return m.GetGauge().GetValue()
				}
			}
		}
	}
	t.Fatalf("no %s{%s=%q}", name, label, value)
	return 0
}

// The worker killed and restarted on the same port: SHUTTING_DOWN, then
// the client follows the new process (a new instance id, a new sequence)
// without rejecting its reports.
func TestWorkerRestartedOnTheSamePort(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 20*time.Second)
	m1 := startServer(t, nil)
	addr := m1.Addr()
	o := fastOptions(ProtocolGRPC)
	o.Registerer = prometheus.NewPedanticRegistry()
	w := dialT(t, addr, o, deps{})
	views, cancel := w.Subscribe()
	defer cancel()
	before := waitView(ctx, t, views, "fresh", isState(Fresh)).Report
	if err := m1.Close(); err != nil {
		t.Fatal(err)
	}
	// Latest wins: the SHUTTING_DOWN view may be gone by the time we read,
	// replaced by "connection refused"; the reconnects metric keeps it.
	waitView(ctx, t, views, "disconnected", isState(Disconnected))
	startServer(t, func(c *app.Config) { c.Server.Listen = addr })
	after := waitView(ctx, t, views, "fresh from the new process", func(v *View) bool {
		return v.State == Fresh && v.Report.GetSourceInstanceId() != before.GetSourceInstanceId()
	}).Report
	if after.GetSequenceId() >= before.GetSequenceId() && before.GetSequenceId() > 5 {
		t.Logf("note: new sequence %d, old %d", after.GetSequenceId(), before.GetSequenceId())
	}
	if n := w.Rejected()[RejectSequence]; n != 0 {
		t.Fatalf("%d reports of the new process rejected as out of sequence", n)
	}
	if n := counterValue(t, w.metrics.reconnects.WithLabelValues(addr, "SHUTTING_DOWN")); n != 1 || w.Err() != nil {
		t.Fatalf("reconnects{SHUTTING_DOWN} = %v, Err %v", n, w.Err())
	}
}

// reconnectedFor is true once w reconnected after a stream ended with
// reason (w needs a Registerer).
func reconnectedFor(t *testing.T, w *Worker, reason string) bool {
	return counterValue(t, w.metrics.reconnects.WithLabelValues(w.Addr(), reason)) >= 1
}

// A network cut (a proxy that turns into a black hole): the view turns
// Stale within 3 intervals, then Disconnected once the dead connection is
// noticed, and Fresh again after the network heals.
func TestNetworkCut(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 20*time.Second)
	m := startServer(t, nil)
	p := startCutProxy(t, m.Addr())
	w := dialT(t, p.addr, fastOptions(ProtocolGRPC), deps{})
	views, cancel := w.Subscribe()
	defer cancel()
	waitView(ctx, t, views, "fresh", isState(Fresh))
	p.Cut()
	waitView(ctx, t, views, "stale by silence", reasonHas(Stale, "no report for"))
	waitView(ctx, t, views, "disconnected", isState(Disconnected))
	p.Heal()
	waitView(ctx, t, views, "fresh after the cut", isState(Fresh))
	if w.Reconnects() == 0 || w.Err() != nil {
		t.Fatalf("%d reconnects, Err %v", w.Reconnects(), w.Err())
	}
}

// Another router registering our router_id replaces our stream: not an
// error; the client registers again, which replaces the other one.
func TestReplacedByAnotherRouter(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 15*time.Second)
	m := startServer(t, nil)
	o := fastOptions(ProtocolConnect)
	o.Registerer = prometheus.NewPedanticRegistry()
	w := dialT(t, m.Addr(), o, deps{})
	views, cancel := w.Subscribe()
	defer cancel()
	waitView(ctx, t, views, "fresh", isState(Fresh))

	other := rawMonitor(ctx, t, m.Addr())
	if err := other.Send(&pb.RouterFrame{Payload: &pb.RouterFrame_Register{Register: &pb.RegisterRequest{
		RouterId: "router-a", ReportIntervalMs: 50, LeaseTtlMs: 10_000}}}); err != nil {
		t.Fatal(err)
	}
	waitView(ctx, t, views, "fresh after REPLACED", func(v *View) bool {
		return v.State == Fresh && reconnectedFor(t, w, "REPLACED")
	})
	for {
		f, err := other.Receive()
		if err != nil {
			t.Fatalf("the other router was not replaced back: %v", err)
		}
		if e := f.GetError(); e != nil {
			if e.GetCode() != "REPLACED" {
				t.Fatalf("the other router ended with %v", e)
			}
			break
		}
	}
	if w.Err() != nil || w.Reconnects() == 0 {
		t.Fatalf("Err %v, %d reconnects", w.Err(), w.Reconnects())
	}
}

// rawMonitor is a bare Monitor stream, closed at cleanup.
func rawMonitor(ctx context.Context, t *testing.T, addr string) *connect.BidiStreamForClient[pb.RouterFrame, pb.WorkerFrame] {
	t.Helper()
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	tr := &http.Transport{Protocols: &p, TLSClientConfig: &tls.Config{}}
	ctx, cancel := context.WithCancel(ctx)
	st := loadmonitorv1connect.NewLoadMonitorServiceClient(&http.Client{Transport: tr}, "http://"+addr).Monitor(ctx)
	t.Cleanup(func() {
		cancel()
		_ = st.CloseResponse()
		tr.CloseIdleConnections()
	})
	return st
}

// A client that stops renewing loses its lease: LEASE_EXPIRED, then it
// registers again.
func TestLeaseExpiredReconnects(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 15*time.Second)
	m := startServer(t, func(c *app.Config) { c.Sessions.MinLease = 100 * time.Millisecond })
	reg := prometheus.NewPedanticRegistry()
	o := fastOptions(ProtocolGRPC)
	o.Lease, o.Registerer = 300*time.Millisecond, reg
	w := dialT(t, m.Addr(), o, deps{renewAfter: func(time.Duration) time.Duration { return time.Hour }})
	views, cancel := w.Subscribe()
	defer cancel()
	waitView(ctx, t, views, "fresh", isState(Fresh))
	waitView(ctx, t, views, "fresh after LEASE_EXPIRED", func(v *View) bool {
		return v.State == Fresh && reconnectedFor(t, w, "LEASE_EXPIRED")
	})
}

// The bearer token is sent; without it the worker refuses, and the view
// says so while the client keeps trying.
func TestBearerToken(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 15*time.Second)
	m := startServer(t, func(c *app.Config) { c.Security.AuthToken = "s3cret" })
	o := fastOptions(ProtocolGRPC)
	o.BearerToken = "s3cret"
	good := dialT(t, m.Addr(), o, deps{})
	goodViews, cancelGood := good.Subscribe()
	defer cancelGood()
	waitView(ctx, t, goodViews, "fresh with the token", isState(Fresh))
	o.BearerToken, o.RouterID = "", "router-b"
	bad := dialT(t, m.Addr(), o, deps{})
	badViews, cancelBad := bad.Subscribe()
	defer cancelBad()
	waitView(ctx, t, badViews, "refused without the token", reasonHas(Disconnected, "unauthenticated"))
	if bad.Err() != nil {
		t.Fatalf("a refused token is retried, not permanent: %v", bad.Err())
	}
}

// View.Granted is the real worker's acknowledgement (its lease clamp, a
// third of it to renew), follows UpdateConfig, is zero while
// disconnected, and is replaced by the next registration's: a worker
// restarted with other bounds grants another lease.
func TestGrantedFromTheRealWorker(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 20*time.Second)
	m1 := startServer(t, func(c *app.Config) { c.Sessions.MaxLease = 3 * time.Second })
	addr := m1.Addr()
	o := fastOptions(ProtocolConnect)
	o.Lease = 20 * time.Second
	w := dialT(t, addr, o, deps{})
	views, cancel := w.Subscribe()
	defer cancel()
	v := waitView(ctx, t, views, "fresh", isState(Fresh))
	if want := (Grant{Interval: 50 * time.Millisecond, Lease: 3 * time.Second, RenewAfter: time.Second}); v.Granted != want {
		t.Fatalf("Granted %+v, want %+v (20s asked, clamped to --max-lease 3s)", v.Granted, want)
	}

	if err := w.UpdateConfig(ctx, 100*time.Millisecond, 1500*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	want := Grant{Interval: 100 * time.Millisecond, Lease: 1500 * time.Millisecond, RenewAfter: 500 * time.Millisecond, LeaseUnconfirmed: true}
	if got := w.View().Granted; got != want {
		t.Fatalf("Granted after UpdateConfig %+v, want %+v", got, want)
	}

	if err := m1.Close(); err != nil {
		t.Fatal(err)
	}
	v = waitView(ctx, t, views, "disconnected", isState(Disconnected))
	if v.Granted != (Grant{}) {
		t.Fatalf("a disconnected view keeps a grant: %+v", v.Granted)
	}
	startServer(t, func(c *app.Config) { c.Server.Listen, c.Sessions.MinLease = addr, 2*time.Second })
	v = waitView(ctx, t, views, "fresh from the restarted worker", isState(Fresh))
	if want := (Grant{Interval: 100 * time.Millisecond, Lease: 2 * time.Second, RenewAfter: 666 * time.Millisecond}); v.Granted != want {
		t.Fatalf("Granted after the reconnect %+v, want %+v (1.5s asked, raised to --min-lease 2s)", v.Granted, want)
	}
}
