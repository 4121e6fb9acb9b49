package rpc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/loadreporter/loadreporter/domain"
	"github.com/loadreporter/loadreporter/domain/session"
	pb "github.com/loadreporter/loadreporter/gen/sglang/router/loadmonitor/v1"
	"github.com/loadreporter/loadreporter/gen/sglang/router/loadmonitor/v1/loadmonitorv1connect"
)

// testConfig is what the fake grants: renew_after is a third of the lease.
var testConfig = session.Config{Interval: 100 * time.Millisecond, Lease: 3 * time.Second}

// fakeRegistrar hands out its one session, or refuses with err. Each
// Register call is written to calls. stopping, when set, is what
// ShuttingDown returns.
type fakeRegistrar struct {
	sess     *fakeSession
	err      error
	calls    chan string
	stopping context.Context
}

func (r *fakeRegistrar) ShuttingDown() context.Context {
	if r.stopping == nil {
		return context.Background()
	}
	return r.stopping
}

func (r *fakeRegistrar) Register(routerID string, intervalMs, leaseMs int64) (RouterSession, session.Config, error) {
	r.calls <- fmt.Sprintf("register %s %d %d", routerID, intervalMs, leaseMs)
	if r.err != nil {
		return nil, session.Config{}, r.err
	}
	return r.sess, testConfig, nil
}

// fakeSession is a RouterSession driven through channels: the test sends
// reports, ends the session with end, and reads every call the handler made
// from calls. update and reregister, when set, decide those calls' results.
// Like the core's outbox it holds one report and notifies after the fact.
type fakeSession struct {
	id         string
	reports    chan *domain.Report
	notifyMu   sync.Mutex
	notify     func()
	done       chan struct{}
	err        error // written before done closes
	calls      chan string
	closed     chan struct{}
	closeOnce  sync.Once
	update     func(intervalMs, leaseMs *int64) (session.Config, error)
	reregister func(routerID string, intervalMs, leaseMs int64) (session.Config, error)
}

func newFakeSession(id string) *fakeSession {
	return &fakeSession{
		id: id, reports: make(chan *domain.Report, 1), done: make(chan struct{}),
		calls: make(chan string, 16), closed: make(chan struct{}),
	}
}

func (s *fakeSession) RouterID() string               { return s.id }
func (s *fakeSession) Reports() <-chan *domain.Report { return s.reports }
func (s *fakeSession) Done() <-chan struct{}          { return s.done }
func (s *fakeSession) Take() *domain.Report           { return takeFrom(s.reports) }
func (s *fakeSession) Ended() bool                    { return isClosed(s.done) }
func (s *fakeSession) Err() error                     { return s.err }

func (s *fakeSession) Notify(f func()) {
	s.notifyMu.Lock()
	defer s.notifyMu.Unlock()
	s.notify = f
}

// wake calls what the handler gave Notify, if it gave anything yet.
func (s *fakeSession) wake() {
	s.notifyMu.Lock()
	f := s.notify
	s.notifyMu.Unlock()
	if f != nil {
		f()
	}
}

func (s *fakeSession) KeepAlive() error {
	s.calls <- "keep_alive"
	return nil
}

func (s *fakeSession) Update(intervalMs, leaseMs *int64) (session.Config, error) {
	s.calls <- fmt.Sprintf("update %s %s", optional(intervalMs), optional(leaseMs))
	if s.update != nil {
		return s.update(intervalMs, leaseMs)
	}
	return testConfig, nil
}

func (s *fakeSession) Reregister(routerID string, intervalMs, leaseMs int64) (session.Config, error) {
	s.calls <- fmt.Sprintf("reregister %s %d %d", routerID, intervalMs, leaseMs)
	if s.reregister != nil {
		return s.reregister(routerID, intervalMs, leaseMs)
	}
	return testConfig, nil
}

func (s *fakeSession) Close() { s.closeOnce.Do(func() { close(s.closed) }) }

// end ends the session as the fire loop would, with err as its reason.
func (s *fakeSession) end(err error) {
	s.err = err
	close(s.done)
	s.wake()
}

func optional(p *int64) string {
	if p == nil {
		return "-"
	}
	return fmt.Sprint(*p)
}

// clientProtocols are the protocols routers and tools reach Monitor with.
var clientProtocols = []struct {
	name string
	opts []connect.ClientOption
}{
	{"grpc", []connect.ClientOption{connect.WithGRPC()}},
	{"connect", nil},
	{"grpcweb", []connect.ClientOption{connect.WithGRPCWeb()}},
}

// monitorTest is one Monitor stream from a client to a real handler over a
// fake registrar. ctx bounds every wait of the test.
type monitorTest struct {
	t      *testing.T
	ctx    context.Context
	cancel context.CancelFunc // ends the client's stream
	reg    *fakeRegistrar
	sess   *fakeSession
	st     *connect.BidiStreamForClient[pb.RouterFrame, pb.WorkerFrame]
}

// eachProtocol runs test once per client protocol, each against a fresh
// handler whose registrar setup may adjust first; and once more per
// protocol with the handler mounted without WithTransportInfo, where it
// cannot wake its own read and reads in a second goroutine.
//
// Once more with gRPC through the native server, grpc-go's own transport.
func eachProtocol(t *testing.T, setup func(*fakeRegistrar), test func(m *monitorTest)) {
	type way struct {
		name            string
		opts            []connect.ClientOption
		mounted, native bool
	}
	var ways []way
	for _, mounted := range []bool{true, false} {
		for _, p := range clientProtocols {
			name := p.name
			if !mounted {
				name += "-without-transport-info"
			}
			ways = append(ways, way{name, p.opts, mounted, false})
		}
	}
	ways = append(ways, way{"grpc-native", []connect.ClientOption{connect.WithGRPC()}, true, true},
		way{fallbackWay, []connect.ClientOption{connect.WithGRPC()}, true, true})
	for _, p := range ways {
		{
			t.Run(p.name, func(t *testing.T) {
				reg := &fakeRegistrar{sess: newFakeSession("r1"), calls: make(chan string, 16)}
				if setup != nil {
					setup(reg)
				}
				handler := mustMonitor(t, reg, MonitorOptions{}).Handler
				var client loadmonitorv1connect.LoadMonitorServiceClient
				if p.native {
					url, hc := serveNative(t, handler)
					client = loadmonitorv1connect.NewLoadMonitorServiceClient(hc, url, p.opts...)
				} else {
					srv := serveMounted(t, handler, p.mounted)
					client = loadmonitorv1connect.NewLoadMonitorServiceClient(srv.Client(), srv.URL, p.opts...)
				}
				ctx, cancel := context.WithCancel(testContext(t))
				m := &monitorTest{t: t, ctx: testContext(t), cancel: cancel, reg: reg, sess: reg.sess, st: client.Monitor(ctx)}
				t.Cleanup(func() {
					cancel()
					_ = m.st.CloseRequest()
					_ = m.st.CloseResponse()
				})
				test(m)
			})
		}
	}
}

// mustMonitor returns a Monitor over reg with o.
func mustMonitor(t testing.TB, reg Registrar, o MonitorOptions) *Monitor {
	t.Helper()
	m, err := newMonitor(reg, o)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// send sends f. An error wrapping io.EOF means the server has already ended
// the stream (it may answer a frame before the client's write returns):
// connect leaves it to Receive to say how, and so does send.
func (m *monitorTest) send(f *pb.RouterFrame) {
	m.t.Helper()
	if err := m.st.Send(f); err != nil && !errors.Is(err, io.EOF) {
		m.t.Fatalf("send %v: %v", f, err)
	}
}

// recv returns the next frame; the stream's context bounds the wait.
func (m *monitorTest) recv() *pb.WorkerFrame {
	m.t.Helper()
	f, err := m.st.Receive()
	if err != nil {
		m.t.Fatalf("receive: %v", err)
	}
	return f
}

// register registers r1 and checks the ack.
func (m *monitorTest) register() {
	m.t.Helper()
	m.send(registerFrame("r1", 100, 3000))
	ack := m.recv().GetRegistered()
	if ack == nil || ack.GetLeaseTtlMs() != 3000 || ack.GetRenewAfterMs() != 1000 {
		m.t.Fatalf("first frame %v, want registered{lease_ttl_ms:3000 renew_after_ms:1000}", ack)
	}
	m.wait(m.reg.calls, "register r1 100 3000")
}

// endsOK checks the stream ends with status OK and no further frame.
func (m *monitorTest) endsOK() {
	m.t.Helper()
	f, err := m.st.Receive()
	if err == nil {
		m.t.Fatalf("got %v, want the stream to end", f)
	}
	if !errors.Is(err, io.EOF) {
		m.t.Fatalf("the stream ended with %v, want status OK", err)
	}
}

// endsWith checks the last frame is a StreamError with code, then status OK.
func (m *monitorTest) endsWith(code string) *pb.StreamError {
	m.t.Helper()
	e := m.recv().GetError()
	if e.GetCode() != code {
		m.t.Fatalf("got error frame %v, want code %s", e, code)
	}
	m.endsOK()
	return e
}

// endsWithStatus checks the stream ends with status code and no frame,
// and returns the status' message.
func (m *monitorTest) endsWithStatus(code connect.Code) string {
	m.t.Helper()
	f, err := m.st.Receive()
	if err == nil {
		m.t.Fatalf("got %v, want the stream to end with status %s", f, code)
	}
	if connect.CodeOf(err) != code {
		m.t.Fatalf("the stream ended with %v, want status %s", err, code)
	}
	var ce *connect.Error
	errors.As(err, &ce)
	return ce.Message()
}

// wait reads the next value of ch and checks it is want.
func (m *monitorTest) wait(ch <-chan string, want string) {
	m.t.Helper()
	select {
	case got := <-ch:
		if got != want {
			m.t.Fatalf("call %q, want %q", got, want)
		}
	case <-m.ctx.Done():
		m.t.Fatalf("waiting for %q: %v", want, m.ctx.Err())
	}
}

// waitClosed waits until the handler closed the session.
func (m *monitorTest) waitClosed() {
	m.t.Helper()
	select {
	case <-m.sess.closed:
	case <-m.ctx.Done():
		m.t.Fatalf("the handler never closed the session: %v", m.ctx.Err())
	}
}

// noCalls checks nothing more was called; only valid once the stream has
// ended, when the handler has returned.
func (m *monitorTest) noCalls() {
	m.t.Helper()
	select {
	case c := <-m.reg.calls:
		m.t.Errorf("unexpected %q", c)
	case c := <-m.sess.calls:
		m.t.Errorf("unexpected %q", c)
	default:
	}
}

func registerFrame(id string, intervalMs, leaseMs int64) *pb.RouterFrame {
	return &pb.RouterFrame{Payload: &pb.RouterFrame_Register{Register: &pb.RegisterRequest{
		RouterId: id, ReportIntervalMs: intervalMs, LeaseTtlMs: leaseMs}}}
}

func updateFrame(intervalMs, leaseMs *int64) *pb.RouterFrame {
	return &pb.RouterFrame{Payload: &pb.RouterFrame_UpdateConfig{UpdateConfig: &pb.UpdateConfigRequest{
		ReportIntervalMs: intervalMs, LeaseTtlMs: leaseMs}}}
}

var (
	keepAliveFrame = &pb.RouterFrame{Payload: &pb.RouterFrame_KeepAlive{KeepAlive: &pb.KeepAlive{}}}
	stopFrame      = &pb.RouterFrame{Payload: &pb.RouterFrame_Stop{Stop: &pb.StopRequest{}}}
	emptyFrame     = &pb.RouterFrame{}
)
