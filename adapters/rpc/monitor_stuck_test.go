package rpc

import (
	"bytes"
	"context"
	"encoding/binary"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/protobuf/proto"

	"github.com/loadreporter/loadreporter/domain"
	"github.com/loadreporter/loadreporter/domain/session"
	"github.com/loadreporter/loadreporter/gen/sglang/router/loadmonitor/v1/loadmonitorv1connect"
)

// A router that stops reading holds its stream while its session lives
// (latest wins: one pending report, one goroutine). Once the session is
// gone, the stream must be gone within FinalWriteTimeout too, or a router
// could hold streams and goroutines past its lease, outside MaxSessions.

// stuckRouterOn registers over proto, then stops reading while a report
// too large for its window is being sent to it, and returns its test
// harness and its Monitor once the handler is blocked in that send: the
// client has taken a window's worth of it, so encoding it (a second or
// more under the race detector, which no write deadline bounds) is over.
// It serves on the native server when native is set, else on net/http.
func stuckRouterOn(t *testing.T, proto []connect.ClientOption, sess *fakeSession, native bool) (*monitorTest, *Monitor) {
	return stuckRouterWith(t, proto, sess, native, MonitorOptions{FinalWriteTimeout: 100 * time.Millisecond})
}

// stuckRouterWith is stuckRouterOn with the Monitor's options o.
func stuckRouterWith(t *testing.T, proto []connect.ClientOption, sess *fakeSession, native bool, o MonitorOptions) (*monitorTest, *Monitor) {
	stopping, shutdown := context.WithCancel(context.Background())
	t.Cleanup(shutdown)
	reg := &fakeRegistrar{sess: sess, calls: make(chan string, 16), stopping: stopping}
	mon := mustMonitor(t, reg, o)
	serve := serveH2C
	if native {
		serve = func(t *testing.T, h func(...connect.HandlerOption) (string, http.Handler), stopping context.Context, d time.Duration) (string, *http.Client) {
			return serveNativeH2C(t, h, stopping, d)
		}
	}
	url, _ := serve(t, mon.Handler, stopping, 100*time.Millisecond)
	var received atomic.Int64
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	tr := &http.Transport{Protocols: &p, HTTP2: &http.HTTP2Config{
		MaxReceiveBufferPerStream: 64 << 10, MaxReceiveBufferPerConnection: 64 << 10,
	}, DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		return countingConn{c, &received}, err
	}}
	t.Cleanup(tr.CloseIdleConnections)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	client := loadmonitorv1connect.NewLoadMonitorServiceClient(&http.Client{Transport: tr}, url, proto...)
	m := &monitorTest{t: t, ctx: testContext(t), cancel: cancel, reg: reg, sess: sess, st: client.Monitor(ctx)}
	t.Cleanup(func() { _ = m.st.CloseResponse() })
	m.register()
	m.deliver(hugeReport()) // the handler blocks sending it: nobody reads
	for deadline := time.Now().Add(30 * time.Second); received.Load() < 64<<10; {
		if time.Now().After(deadline) {
			t.Fatalf("the report never started to arrive (%d bytes read)", received.Load())
		}
		time.Sleep(5 * time.Millisecond)
	}
	return m, mon
}

// countingConn counts the bytes read from the connection into n.
type countingConn struct {
	net.Conn
	n *atomic.Int64
}

func (c countingConn) Read(p []byte) (int, error) {
	k, err := c.Conn.Read(p)
	c.n.Add(int64(k))
	return k, err
}

// returnsWithin checks the handler returns within d of now, while the
// reporter keeps running.
func returnsWithin(t *testing.T, m *monitorTest, d time.Duration, what string) {
	t.Helper()
	select {
	case <-m.sess.closed:
	case <-time.After(d):
		t.Fatalf("%s: the handler still runs %s later (FinalWriteTimeout 100 ms)", what, d)
	}
}

// TestMonitorStuckReaderEndsWithItsSession: the session ends (its lease
// ran out, or another stream took its router_id) while the handler is
// blocked sending to a router that stopped reading; the handler returns
// within the bound, without a shutdown.
func TestMonitorStuckReaderEndsWithItsSession(t *testing.T) {
	t.Parallel()
	for _, code := range []string{domain.CodeLeaseExpired, domain.CodeReplaced} {
		t.Run(code, func(t *testing.T) {
			endsWithItsSession := func(t *testing.T, proto []connect.ClientOption, native bool) {
				m, mon := stuckRouterOn(t, proto, newFakeSession("r1"), native)
				m.sess.end(domain.Errorf(code, "ended"))
				returnsWithin(t, m, 3*time.Second, code)
				// Its last frame could not be sent; the ending still counts.
				if got := mon.StreamErrors()[code]; got != 1 {
					t.Errorf("StreamErrors[%s] = %d, want 1", code, got)
				}
			}
			eachClient(t, func(t *testing.T, proto []connect.ClientOption) { endsWithItsSession(t, proto, false) })
			eachNativeWay(t, func(t *testing.T) {
				endsWithItsSession(t, []connect.ClientOption{connect.WithGRPC()}, true)
			})
		})
	}
}

// TestMonitorStuckReaderSendsABadFrame: a router that stopped reading sends
// a frame the session refuses; the handler, which must wait for the send in
// progress before its last frame, returns within the bound.
func TestMonitorStuckReaderSendsABadFrame(t *testing.T) {
	t.Parallel()
	sendsABadFrame := func(t *testing.T, proto []connect.ClientOption, native bool) {
		sess := newFakeSession("r1")
		sess.update = func(_, _ *int64) (session.Config, error) {
			return testConfig, domain.Errorf(domain.CodeInvalidArgument, "report_interval_ms 1 is outside the allowed range")
		}
		m, _ := stuckRouterOn(t, proto, sess, native)
		bad := int64(1)
		m.send(updateFrame(&bad, nil))
		m.wait(m.sess.calls, "update 1 -")
		returnsWithin(t, m, 3*time.Second, "a refused update_config")
	}
	eachClient(t, func(t *testing.T, proto []connect.ClientOption) { sendsABadFrame(t, proto, false) })
	eachNativeWay(t, func(t *testing.T) { sendsABadFrame(t, []connect.ClientOption{connect.WithGRPC()}, true) })
}

// TestMonitorAckNotReadEndsWithItsSession: a router whose connection grants
// no flow-control window cannot take even the ack; once its session ends,
// its stream ends within the bound (RST_STREAM: nothing more can reach it).
func TestMonitorAckNotReadEndsWithItsSession(t *testing.T) {
	t.Parallel()
	stopping, shutdown := context.WithCancel(context.Background())
	defer shutdown()
	sess := newFakeSession("r1")
	reg := &fakeRegistrar{sess: sess, calls: make(chan string, 16), stopping: stopping}
	mon := mustMonitor(t, reg, MonitorOptions{FinalWriteTimeout: 100 * time.Millisecond})
	url, _ := serveH2C(t, mon.Handler, stopping, 100*time.Millisecond)
	m := &monitorTest{t: t, ctx: testContext(t), reg: reg, sess: sess}

	frames := noWindowRouter(t, url[len("http://"):], registerFrame("r1", 100, 3000))
	m.wait(reg.calls, "register r1 100 3000")
	time.Sleep(50 * time.Millisecond)
	select {
	case <-sess.closed:
		t.Fatal("the handler returned while the session lives")
	default:
	}
	sess.end(domain.Errorf(domain.CodeLeaseExpired, "no keep_alive within the 3000 ms lease"))
	returnsWithin(t, m, 3*time.Second, "an ack never read")
	for deadline := time.After(3 * time.Second); ; {
		select {
		case f := <-frames:
			if f.Type == http2.FrameRSTStream {
				return
			}
			if f.Type == http2.FrameData {
				t.Fatal("DATA reached a router that granted no window")
			}
		case <-deadline:
			t.Fatal("no RST_STREAM for the stream whose session ended")
		}
	}
}

// noWindowRouter opens an h2c connection that grants the server no
// flow-control window, opens one gRPC Monitor stream on it carrying first,
// and returns the headers of the frames the server sends.
func noWindowRouter(t *testing.T, addr string, first proto.Message) <-chan http2.FrameHeader {
	t.Helper()
	msg, err := proto.Marshal(first)
	if err != nil {
		t.Fatal(err)
	}
	body := append(binary.BigEndian.AppendUint32([]byte{0}, uint32(len(msg))), msg...)
	return noWindowClient(t, addr, loadmonitorv1connect.LoadMonitorServiceMonitorProcedure, body)
}

// noWindowClient opens an h2c connection that grants the server no
// flow-control window, opens one gRPC stream to path on it carrying body,
// and returns the headers of the frames the server sends on that stream.
func noWindowClient(t *testing.T, addr, path string, body []byte) <-chan http2.FrameHeader {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	fr := http2.NewFramer(c, c)
	var headers bytes.Buffer
	enc := hpack.NewEncoder(&headers)
	for _, f := range [][2]string{{":method", "POST"}, {":scheme", "http"}, {":authority", addr},
		{":path", path}, {"content-type", "application/grpc"}, {"te", "trailers"}} {
		_ = enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	// The framer is used from this goroutine until the reader starts.
	if _, err := c.Write([]byte(http2.ClientPreface)); err != nil {
		t.Fatal(err)
	}
	if err := fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 0}); err != nil {
		t.Fatal(err)
	}
	if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: headers.Bytes(), EndHeaders: true}); err != nil {
		t.Fatal(err)
	}
	if err := fr.WriteData(1, false, body); err != nil {
		t.Fatal(err)
	}
	out := make(chan http2.FrameHeader, 64)
	go func() {
		defer close(out)
		for {
			f, err := fr.ReadFrame()
			if err != nil {
				return
			}
			if s, ok := f.(*http2.SettingsFrame); ok && !s.IsAck() {
				_ = fr.WriteSettingsAck() // the only write once reading started
			}
			if f.Header().StreamID == 1 {
				select {
				case out <- f.Header():
				default:
				}
			}
		}
	}()
	return out
}

// TestMonitorHonoursTheStreamDeadline: a router that asked for a deadline
// (grpc-timeout, connect-timeout-ms) gets DEADLINE_EXCEEDED then (or, on
// grpc-go's server, perhaps the reset it sends at the deadline), and its
// session ends, although the handler was blocked reading its frames.
func TestMonitorHonoursTheStreamDeadline(t *testing.T) {
	t.Parallel()
	honours := func(t *testing.T, proto []connect.ClientOption, native bool) {
		stopping, shutdown := context.WithCancel(context.Background())
		defer shutdown()
		reg := &fakeRegistrar{sess: newFakeSession("r1"), calls: make(chan string, 16), stopping: stopping}
		serve := serveH2C
		if native {
			serve = func(t *testing.T, h func(...connect.HandlerOption) (string, http.Handler), stopping context.Context, d time.Duration) (string, *http.Client) {
				return serveNativeH2C(t, h, stopping, d)
			}
		}
		url, hc := serve(t, mustMonitor(t, reg, MonitorOptions{}).Handler, stopping, 100*time.Millisecond)
		ctx, cancel := context.WithCancel(testContext(t))
		defer cancel()
		client := loadmonitorv1connect.NewLoadMonitorServiceClient(hc, url, proto...)
		// The header alone, not a client-side deadline: the client would
		// cancel the stream itself at its deadline.
		st := client.Monitor(ctx)
		st.RequestHeader().Set("Grpc-Timeout", "300m")
		st.RequestHeader().Set("Connect-Timeout-Ms", "300")
		m := &monitorTest{t: t, ctx: testContext(t), cancel: cancel, reg: reg, sess: reg.sess, st: st}
		defer func() { _ = m.st.CloseResponse() }()
		start := time.Now()
		m.register()
		m.waitClosed()
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("the handler returned %s after a 300 ms deadline", d)
		}
		_, err := m.st.Receive()
		code := connect.CodeOf(err)
		// grpc-go's server meets a stream's deadline two ways at once: the
		// stream's context ends (the read fails, and grpc-go writes
		// DEADLINE_EXCEEDED), and a timer resets the stream with CANCEL
		// (grpc-go v1.85.0 internal/transport/http2_server.go,
		// operateHeaders); whichever comes first is what the router sees.
		if code != connect.CodeDeadlineExceeded && (!native || code != connect.CodeCanceled) {
			t.Errorf("the stream ended with %v, want deadline_exceeded", err)
		}
	}
	eachClient(t, func(t *testing.T, proto []connect.ClientOption) { honours(t, proto, false) })
	eachNativeWay(t, func(t *testing.T) { honours(t, []connect.ClientOption{connect.WithGRPC()}, true) })
}

// TestNativeStuckRouterHoldsOneFrame: on the native server, a send to a
// router that stopped reading waits until grpc-go has written it, as on
// net/http, so the next report stays in the session's outbox (where the
// latest replaces it) instead of joining grpc-go's queue for the stream
// (64 KiB a stream, which 10 000 stuck routers would multiply).
func TestNativeStuckRouterHoldsOneFrame(t *testing.T) {
	t.Parallel()
	m, _ := stuckRouterOn(t, []connect.ClientOption{connect.WithGRPC()}, newFakeSession("r1"), true)
	m.deliver(sampleReport()) // into the outbox: the writer still sends the huge one
	// Given time to, a writer whose send returned once queued would have
	// taken it.
	time.Sleep(200 * time.Millisecond)
	if n := len(m.sess.reports); n != 1 {
		t.Fatalf("the outbox holds %d reports, want 1: the writer took the next report while the last was not written", n)
	}
	latest := sampleReport()
	latest.SequenceID++
	select {
	case <-m.sess.reports: // latest wins: the outbox replaces what it holds
	default:
	}
	m.deliver(latest)
	m.sess.end(domain.Errorf(domain.CodeLeaseExpired, "ended"))
	returnsWithin(t, m, 3*time.Second, "the session's end")
}

// TestNativeStalledRouterEnds: a router whose keep_alives arrive but
// which takes no report (its session lives) holds its native stream no
// longer than the stall bound, as on net/http's.
func TestNativeStalledRouterEnds(t *testing.T) {
	t.Parallel()
	stalls := NewStalls(200*time.Millisecond, slog.New(slog.DiscardHandler))
	m, _ := stuckRouterWith(t, []connect.ClientOption{connect.WithGRPC()}, newFakeSession("r1"), true,
		MonitorOptions{FinalWriteTimeout: 100 * time.Millisecond, Stalls: stalls})
	m.deliver(sampleReport()) // waits behind the huge one, which is never taken
	returnsWithin(t, m, 5*time.Second, "a router that takes nothing")
	if got := stalls.Ended(); got != 1 {
		t.Errorf("Stalls.Ended() = %d, want 1", got)
	}
}
