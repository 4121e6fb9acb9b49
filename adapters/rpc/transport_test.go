package rpc

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/loadreporter/loadreporter/domain"
	"github.com/loadreporter/loadreporter/gen/sglang/router/loadmonitor/v1/loadmonitorv1connect"
)

// serveH2C serves handler over unencrypted HTTP/2 on loopback as the
// reporter mounts its handlers (WithTransportInfo around
// BoundWritesAtShutdown, whose bound is finalWrite once stopping ends), and
// returns its URL and an HTTP/2 client whose streams buffer at most 64 KiB
// unread.
func serveH2C(t *testing.T, handler func(...connect.HandlerOption) (string, http.Handler),
	stopping context.Context, finalWrite time.Duration) (string, *http.Client) {
	t.Helper()
	mux := http.NewServeMux()
	mux.Handle(handler())
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	srv := &http.Server{Handler: WithTransportInfo(BoundWritesAtShutdown(stopping, finalWrite, mux)), Protocols: &p}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	tr := &http.Transport{Protocols: &p, HTTP2: &http.HTTP2Config{
		MaxReceiveBufferPerStream: 64 << 10, MaxReceiveBufferPerConnection: 64 << 10,
	}}
	t.Cleanup(func() {
		tr.CloseIdleConnections()
		_ = srv.Close()
	})
	return "http://" + ln.Addr().String(), &http.Client{Transport: tr}
}

// hugeReport encodes, compressed or not, to more than a megabyte: far more
// than a router that does not read lets the worker send.
func hugeReport() *domain.Report {
	r := sampleReport()
	rnd := rand.New(rand.NewPCG(1, 2))
	for len(r.Ranks) < 1<<14 {
		rank := r.Ranks[0]
		rank.DPRank = int64(len(r.Ranks))
		rank.NumUsedTokens, rank.TokenUsage = rnd.Int64(), rnd.Float64()
		r.Ranks = append(r.Ranks, rank)
	}
	return r
}

// TestMonitorStuckReaderOnShutdown: a registered router that stops reading
// (its flow-control window is full, so the handler's send blocks) does not
// hold its handler past FinalWriteTimeout once the reporter shuts down,
// whether its session ended with the shutdown or not yet. This is
// SetWriteDeadline on an h2c stream, through WithTransportInfo and
// BoundWritesAtShutdown, mounted as the reporter mounts them: on the
// native way, a stream served past the port's handler stays in
// BoundWritesAtShutdown's set.
func TestMonitorStuckReaderOnShutdown(t *testing.T) {
	t.Parallel()
	for _, endSession := range []bool{true, false} {
		t.Run(fmt.Sprintf("session ended %v", endSession), func(t *testing.T) {
			t.Parallel()
			testMonitorStuckReaderOnShutdown(t, endSession)
		})
	}
}

func testMonitorStuckReaderOnShutdown(t *testing.T, endSession bool) {
	onShutdown := func(t *testing.T, proto []connect.ClientOption, native bool) {
		stopping, shutdown := context.WithCancel(context.Background())
		defer shutdown()
		reg := &fakeRegistrar{sess: newFakeSession("r1"), calls: make(chan string, 16), stopping: stopping}
		mon := mustMonitor(t, reg, MonitorOptions{FinalWriteTimeout: 100 * time.Millisecond})
		var url string
		var hc *http.Client
		if native {
			url, hc = serveNativeH2C(t, mon.Handler, stopping, 100*time.Millisecond)
		} else {
			url, hc = serveH2C(t, mon.Handler, stopping, 100*time.Millisecond)
		}
		ctx, cancel := context.WithCancel(testContext(t))
		defer cancel()
		client := loadmonitorv1connect.NewLoadMonitorServiceClient(hc, url, proto...)
		m := &monitorTest{t: t, ctx: testContext(t), cancel: cancel, reg: reg, sess: reg.sess, st: client.Monitor(ctx)}
		defer func() { _ = m.st.CloseResponse() }()
		m.register()

		m.deliver(hugeReport()) // the handler blocks sending it: nobody reads
		shutdown()
		if endSession {
			m.sess.end(domain.Errorf(domain.CodeShuttingDown, "the reporter is shutting down"))
		}
		m.waitClosed() // the handler returned
	}
	eachClient(t, func(t *testing.T, proto []connect.ClientOption) { onShutdown(t, proto, false) })
	eachNativeWay(t, func(t *testing.T) { onShutdown(t, []connect.ClientOption{connect.WithGRPC()}, true) })
}

// TestTransportInfo: the handler behind WithTransportInfo finds the
// client certificate's subject; without mutual TLS, or without the
// middleware, there is none, and a write deadline cannot be set once the
// handler returned.
func TestTransportInfo(t *testing.T) {
	t.Parallel()
	cert := &x509.Certificate{Subject: pkix.Name{CommonName: "router-7", Organization: []string{"fleet"}}}
	var got *transport
	h := WithTransportInfo(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) { got = transportFrom(r.Context()) }))
	req, _ := http.NewRequest(http.MethodPost, "/", nil)
	req.TLS = &tls.ConnectionState{PeerCertificates: []*x509.Certificate{cert}}
	h.ServeHTTP(nopWriter{}, req)
	if s := got.clientSubject(); s != "CN=router-7,O=fleet" {
		t.Errorf("subject %q", s)
	}
	if got.setWriteDeadline(time.Now()) {
		t.Error("a write deadline was set after the handler returned")
	}
	req.TLS = nil
	h.ServeHTTP(nopWriter{}, req)
	if s := got.clientSubject(); s != "" {
		t.Errorf("subject %q without TLS", s)
	}
	var none *transport
	if none.clientSubject() != "" || none.setWriteDeadline(time.Now()) || transportFrom(context.Background()) != nil {
		t.Error("no middleware, yet transport information")
	}
}

type nopWriter struct{}

func (nopWriter) Header() http.Header         { return http.Header{} }
func (nopWriter) Write(p []byte) (int, error) { return len(p), nil }
func (nopWriter) WriteHeader(int)             {}

// TestBoundWritesAtShutdown: a streaming response whose client stopped
// reading (any stream: a Watch, an ORCA client, a page's events) returns
// within the bound once the reporter shuts down. Without the middleware the
// handler's write blocks until the client goes away, which it never does
// here.
func TestBoundWritesAtShutdown(t *testing.T) {
	t.Parallel()
	stopping, shutdown := context.WithCancel(context.Background())
	defer shutdown()
	written, returned := make(chan int, 1), make(chan error, 1)
	stream := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		chunk, n := make([]byte, 16<<10), 0
		for {
			if _, err := w.Write(chunk); err != nil {
				returned <- err
				return
			}
			w.(http.Flusher).Flush()
			if n += len(chunk); n >= 1<<20 {
				select {
				case written <- n: // far past what the client buffers: the next write blocks
				default:
				}
			}
		}
	})
	url, hc := serveH2C(t, func(...connect.HandlerOption) (string, http.Handler) {
		return "/", stream
	}, stopping, 100*time.Millisecond)
	req, _ := http.NewRequestWithContext(testContext(t), http.MethodGet, url+"/events", nil)
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close() // never read
	select {
	case n := <-written:
		t.Fatalf("the handler wrote %d bytes to a client that reads nothing: flow control did not hold it", n)
	case <-time.After(300 * time.Millisecond): // the handler is blocked in a write
	}
	shutdown()
	select {
	case err := <-returned:
		if err == nil {
			t.Fatal("the write failed without an error")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the handler was still writing 5 s after shutdown, with a 100 ms bound")
	}
}

// deadlineWriter is a response whose write deadlines are recorded.
type deadlineWriter struct {
	nopWriter
	set chan time.Time
}

func (w deadlineWriter) SetWriteDeadline(t time.Time) error {
	w.set <- t
	return nil
}

// TestBoundWritesAtShutdownBoundsEveryOpenResponse: once the reporter
// shuts down, every response still open gets the bound, and so does one
// that comes later; those whose handlers returned before (the newest, one
// in the middle) get none.
func TestBoundWritesAtShutdownBoundsEveryOpenResponse(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	stopping, shutdown := context.WithCancel(context.Background())
	defer shutdown()
	const n = 5
	var writers [n]deadlineWriter
	var release, entered, returned [n]chan struct{}
	for i := range n {
		writers[i] = deadlineWriter{set: make(chan time.Time, 2)}
		release[i], entered[i], returned[i] = make(chan struct{}), make(chan struct{}), make(chan struct{})
	}
	h := WithTransportInfo(BoundWritesAtShutdown(stopping, time.Minute, http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		i, _ := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/"))
		close(entered[i])
		<-release[i]
	})))
	start := func(i int) {
		go func() {
			defer close(returned[i])
			req, _ := http.NewRequest(http.MethodGet, "/"+strconv.Itoa(i), nil)
			h.ServeHTTP(writers[i], req)
		}()
		wait(t, ctx, entered[i], "a handler to start")
	}
	for i := range n - 1 {
		start(i)
	}
	for _, i := range []int{3, 1} { // the newest, then one in the middle
		close(release[i])
		wait(t, ctx, returned[i], "a handler to return")
	}
	before := time.Now()
	shutdown()
	for _, i := range []int{0, 2} {
		select {
		case at := <-writers[i].set:
			if at.Before(before.Add(time.Minute)) {
				t.Errorf("response %d: write deadline %s, want a minute from the shutdown", i, at)
			}
		case <-ctx.Done():
			t.Fatalf("response %d, open at shutdown, never got a write deadline", i)
		}
	}
	for _, i := range []int{1, 3} {
		if len(writers[i].set) != 0 {
			t.Errorf("response %d, whose handler returned before the shutdown, got a write deadline", i)
		}
	}
	start(4) // bounded before its handler runs
	if len(writers[4].set) != 1 {
		t.Error("a response that came after the shutdown got no write deadline")
	}
	for _, i := range []int{0, 2, 4} {
		close(release[i])
		wait(t, ctx, returned[i], "a handler to return")
	}
}

// TestBoundWritesAtShutdownCostsNoAllocation: a request passes through
// BoundWritesAtShutdown with no allocation, its response joining and
// leaving the shared set.
func TestBoundWritesAtShutdownCostsNoAllocation(t *testing.T) {
	stopping, shutdown := context.WithCancel(context.Background())
	defer shutdown()
	h := BoundWritesAtShutdown(stopping, time.Second, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	req, _ := http.NewRequest(http.MethodGet, "/", nil)
	req = req.WithContext(context.WithValue(req.Context(), transportKey{}, &transport{}))
	w := nopWriter{}
	if allocs := testing.AllocsPerRun(1000, func() { h.ServeHTTP(w, req) }); allocs != 0 {
		t.Errorf("a request allocates %v times in BoundWritesAtShutdown, want 0", allocs)
	}
}
