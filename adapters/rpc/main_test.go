package rpc

import (
	"context"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	"go.uber.org/goleak"
	"golang.org/x/net/http2"
	"google.golang.org/grpc"

	"github.com/loadreporter/loadreporter/domain"
)

func TestMain(m *testing.M) {
	if spec := os.Getenv(heapClientEnv); spec != "" {
		os.Exit(runHeapClient(spec))
	}
	goleak.VerifyTestMain(m)
}

// serve mounts what handler returns (a service's Handler method) on an
// HTTP/2 (TLS) test server, closed when the test ends; the server's Client
// speaks HTTP/2.
func serve(t testing.TB, handler func(...connect.HandlerOption) (string, http.Handler)) *httptest.Server {
	t.Helper()
	return serveMounted(t, handler, false)
}

// serveMounted is serve, behind WithTransportInfo (as the reporter mounts
// every handler) when transportInfo is set.
func serveMounted(t testing.TB, handler func(...connect.HandlerOption) (string, http.Handler), transportInfo bool) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	mux.Handle(handler())
	var h http.Handler = mux
	if transportInfo {
		h = WithTransportInfo(mux)
	}
	srv := httptest.NewUnstartedServer(h)
	// Connections still in their TLS handshake when a test ends are torn
	// down by Close; their errors are noise.
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.EnableHTTP2 = true
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv
}

// serveNative serves what handler returns behind WithTransportInfo on the
// native server over h2c, stopped when the test ends; it returns the
// server's URL and a client that speaks h2c to it.
func serveNative(t testing.TB, handler func(...connect.HandlerOption) (string, http.Handler)) (string, *http.Client) {
	t.Helper()
	return serveNativeH2C(t, handler, context.Background(), 10*time.Second)
}

// serveNativeH2C is serveNative with the writes of every stream bounded to
// finalWrite once stopping ends, as serveH2C's server; its client's
// windows are serveH2C's too.
func serveNativeH2C(t testing.TB, handler func(...connect.HandlerOption) (string, http.Handler),
	stopping context.Context, finalWrite time.Duration) (string, *http.Client) {
	t.Helper()
	mux := http.NewServeMux()
	mux.Handle(handler())
	addr := startNative(t, WithTransportInfo(BoundWritesAtShutdown(stopping, finalWrite, mux)))
	var protocols http.Protocols
	protocols.SetUnencryptedHTTP2(true)
	tr := &http.Transport{Protocols: &protocols, HTTP2: &http.HTTP2Config{
		MaxReceiveBufferPerStream: 64 << 10, MaxReceiveBufferPerConnection: 64 << 10,
	}}
	t.Cleanup(tr.CloseIdleConnections)
	return "http://" + addr, &http.Client{Transport: tr}
}

// startNative serves h on the native server on 127.0.0.1, as the port
// serves it (PooledReads over connections that replay their preface),
// stopped when the test ends, and returns its address.
func startNative(t testing.TB, h http.Handler) string {
	t.Helper()
	o := testNativeOptions()
	o.withoutWriteStatus = onFallback(t)
	srv, err := NewNativeServer(h, o)
	if err != nil {
		t.Fatal(err)
	}
	return serveGRPCOn(t, srv, func(ln net.Listener) net.Listener { return PooledReads(splitListener{ln}) })
}

// serveGRPC serves srv on 127.0.0.1, stopped when the test ends, and
// returns its address.
func serveGRPC(t testing.TB, srv *grpc.Server) string {
	t.Helper()
	return serveGRPCOn(t, srv, func(ln net.Listener) net.Listener { return ln })
}

// serveGRPCOn is serveGRPC on what wrap makes of the listener.
func serveGRPCOn(t testing.TB, srv *grpc.Server, wrap func(net.Listener) net.Listener) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(wrap(ln))
	}()
	t.Cleanup(func() {
		srv.Stop()
		<-done
	})
	return ln.Addr().String()
}

// fallbackWay names the tests, and their subtests, that startNative
// serves as a grpc-go whose streams cannot end themselves would.
const fallbackWay = "grpc-native-fallback"

func onFallback(t testing.TB) bool { return strings.Contains(t.Name()+"/", "/"+fallbackWay+"/") }

// eachNativeWay runs f on the native server as it ends streams: through
// their status ("grpc-native"), and through the fallback, a stream
// context of its own it cancels (fallbackWay).
func eachNativeWay(t *testing.T, f func(t *testing.T)) {
	t.Run("grpc-native", f)
	t.Run(fallbackWay, f)
}

func testNativeOptions() NativeOptions {
	return NativeOptions{MaxStreamsPerConn: 100, MaxRecvMsgBytes: 64 << 10, MaxHeaderBytes: 1 << 20,
		IdleTimeout: time.Minute, PingAfter: 30 * time.Second, PingTimeout: 15 * time.Second}
}

// testContext is the bound on every wait of one test.
func testContext(t testing.TB) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// waitFor waits, within ctx, until cond holds.
func waitFor(t *testing.T, ctx context.Context, what string, cond func() bool) {
	t.Helper()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("waiting until %s: %v", what, ctx.Err())
		case <-time.After(time.Millisecond):
		}
	}
}

// wait waits, within ctx, until ch is closed or sends.
func wait(t *testing.T, ctx context.Context, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-ctx.Done():
		t.Fatalf("waiting for %s: %v", what, ctx.Err())
	}
}

// takeFrom is a fake session's Take over its report channel.
func takeFrom(ch <-chan *domain.Report) *domain.Report {
	select {
	case r := <-ch:
		return r
	default:
		return nil
	}
}

// isClosed is a fake session's Ended over its done channel.
func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// splitListener hands over its connections as the port's splitter does
// (internal/connsplit, which this package may not import): each has had
// its HTTP/2 preface read, and replays it (replayConn).
type splitListener struct{ net.Listener }

func (l splitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		tc := c.(*net.TCPConn)
		preface := make([]byte, len(http2.ClientPreface))
		_ = tc.SetReadDeadline(time.Now().Add(10 * time.Second))
		_, err = io.ReadFull(tc, preface)
		if err == nil {
			err = tc.SetReadDeadline(time.Time{})
		}
		if err != nil {
			_ = tc.Close()
			continue
		}
		return &replayConn{TCPConn: tc, replay: preface}, nil
	}
}

// replayConn reads replay first, then the connection, and says when it
// has nothing left to replay, as the splitter's connections do.
type replayConn struct {
	*net.TCPConn
	replay []byte // read only by the connection's one reader
	direct atomic.Bool
	// readsAfter counts the Reads that went to the connection once
	// direct.
	readsAfter atomic.Int64
}

func (c *replayConn) Read(b []byte) (int, error) {
	if c.direct.Load() {
		c.readsAfter.Add(1)
		return c.TCPConn.Read(b)
	}
	n := copy(b, c.replay)
	c.replay = c.replay[n:]
	if len(c.replay) == 0 {
		c.direct.Store(true)
	}
	return n, nil
}

func (c *replayConn) Original() (net.Conn, bool) { return c.TCPConn, c.direct.Load() }
