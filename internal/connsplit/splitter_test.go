package connsplit

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/loadreporter/loadreporter/domain"
	"github.com/loadreporter/loadreporter/internal/sharedtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// wait bounds every wait of a test.
const wait = 10 * time.Second

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), wait)
	t.Cleanup(cancel)
	return ctx
}

// startSplitter serves a Splitter on 127.0.0.1 until the test ends, and
// checks that its Serve then returns nil.
func startSplitter(t *testing.T, o Options) *Splitter {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(ln, o)
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- s.Serve() }()
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		select {
		case err := <-served:
			if err != nil {
				t.Errorf("Serve after Close = %v, want nil", err)
			}
		case <-time.After(wait):
			t.Errorf("Serve did not return within %s of Close", wait)
		}
	})
	return s
}

// serveOther serves h on s.Other() as loadreporter does: HTTP/1 and
// unencrypted HTTP/2.
func serveOther(t *testing.T, s *Splitter, h http.Handler) {
	t.Helper()
	var p http.Protocols
	p.SetHTTP1(true)
	p.SetUnencryptedHTTP2(true)
	sharedtest.Serve(t, &http.Server{Handler: h, Protocols: &p, ReadHeaderTimeout: wait}, s.Other())
}

// serveGRPC serves the standard health service on s.GRPC().
func serveGRPC(t *testing.T, s *Splitter) *health.Server {
	t.Helper()
	gs := grpc.NewServer()
	hs := health.NewServer()
	healthpb.RegisterHealthServer(gs, hs)
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = gs.Serve(s.GRPC())
	}()
	t.Cleanup(func() {
		gs.Stop()
		<-served
	})
	return hs
}

// otherHandler answers on Other(): its body names the request.
func otherHandler(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	w.Header().Set("Content-Type", "text/plain")
	fmt.Fprintf(w, "other %s %s %s %s", r.Proto, r.Method, r.Header.Get("Content-Type"), body)
}

func TestGRPCClientLandsOnGRPC(t *testing.T) {
	s := startSplitter(t, Options{})
	serveOther(t, s, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("a gRPC client's request reached Other(): %s %s", r.Method, r.URL)
		http.Error(w, "wrong listener", http.StatusTeapot)
	}))
	hs := serveGRPC(t, s)
	ctx := testContext(t)

	cc, err := grpc.NewClient("passthrough:///"+s.GRPC().Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	client := healthpb.NewHealthClient(cc)

	// Unary. Without the empty SETTINGS the client never sends it, and
	// the call fails at ctx's deadline.
	got, err := client.Check(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatalf("Check: %v", err)
	}
	if got.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("Check = %v, want SERVING", got.GetStatus())
	}

	// Server streaming, on the same connection.
	watch, err := client.Watch(ctx, &healthpb.HealthCheckRequest{Service: "svc"})
	if err != nil {
		t.Fatalf("Watch: %v", err)
	}
	hs.SetServingStatus("svc", healthpb.HealthCheckResponse_SERVING)
	for _, want := range []healthpb.HealthCheckResponse_ServingStatus{healthpb.HealthCheckResponse_SERVING, healthpb.HealthCheckResponse_NOT_SERVING} {
		// The first message may be SERVICE_UNKNOWN, sent before the
		// status was set.
		for {
			m, err := watch.Recv()
			if err != nil {
				t.Fatalf("Watch.Recv (waiting for %v): %v", want, err)
			}
			if m.GetStatus() == want {
				break
			}
		}
		hs.SetServingStatus("svc", healthpb.HealthCheckResponse_NOT_SERVING)
	}

	if g, o := s.Counts(); g != 1 || o != 0 {
		t.Errorf("Counts = grpc %d, other %d; want one connection, on GRPC()", g, o)
	}
}

func TestH2CClientLandsOnOtherAndKeepsItsConnection(t *testing.T) {
	s := startSplitter(t, Options{})
	serveOther(t, s, http.HandlerFunc(otherHandler))
	serveGRPC(t, s)
	ctx := testContext(t)

	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	url := "http://" + s.Other().Addr().String()

	// Each kind of first request on a connection of its own, then a
	// second request on it.
	for _, rq := range []struct{ name, path, contentType, body string }{
		{"a plain POST", "/echo", "application/json", `{"a":1}`},
		{"a Connect unary call", "/pkg.Service/Method", "application/json", `{}`},
		{"gRPC-Web", "/pkg.Service/Method", "application/grpc-web+proto", "\x00\x00\x00\x00\x00"},
	} {
		tr := &http.Transport{Protocols: &p}
		hc := &http.Client{Transport: tr}
		for _, second := range []bool{false, true} {
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+rq.path, strings.NewReader(rq.body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", rq.contentType)
			req.Header.Set("Connect-Protocol-Version", "1")
			resp, err := hc.Do(req)
			if err != nil {
				t.Fatalf("%s (second %t): %v", rq.name, second, err)
			}
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil {
				t.Fatalf("%s (second %t): reading the answer: %v", rq.name, second, err)
			}
			if want := "other HTTP/2.0 POST " + rq.contentType + " " + rq.body; resp.StatusCode != http.StatusOK || string(body) != want {
				t.Fatalf("%s (second %t): %d %q, want 200 %q", rq.name, second, resp.StatusCode, body, want)
			}
		}
		tr.CloseIdleConnections()
	}
	// One connection a client: net/http did not end it for the client's
	// ACK of the splitter's SETTINGS (ack_mystery).
	if g, o := s.Counts(); g != 0 || o != 3 {
		t.Errorf("Counts = grpc %d, other %d; want 3 connections, on Other()", g, o)
	}
}

// rawClient speaks HTTP/2 frame by frame.
type rawClient struct {
	t    *testing.T
	conn net.Conn
	fr   *http2.Framer
	hbuf bytes.Buffer
	enc  *hpack.Encoder
}

func dialRaw(t *testing.T, ctx context.Context, addr string) *rawClient {
	t.Helper()
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if dl, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(dl)
	}
	rc := &rawClient{t: t, conn: c}
	rc.fr = http2.NewFramer(c, c)
	rc.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	rc.enc = hpack.NewEncoder(&rc.hbuf)
	return rc
}

// headers encodes a request's header block.
func (rc *rawClient) headers(path, contentType string) []byte {
	rc.hbuf.Reset()
	for _, f := range []hpack.HeaderField{
		{Name: ":method", Value: "POST"}, {Name: ":scheme", Value: "http"},
		{Name: ":authority", Value: "x"}, {Name: ":path", Value: path},
		{Name: "content-type", Value: contentType},
	} {
		if err := rc.enc.WriteField(f); err != nil {
			rc.t.Fatal(err)
		}
	}
	return bytes.Clone(rc.hbuf.Bytes())
}

func (rc *rawClient) check(err error) {
	rc.t.Helper()
	if err != nil {
		rc.t.Fatal(err)
	}
}

// readSettings reads the next frame, which must be a SETTINGS (not ACK).
func (rc *rawClient) readSettings(who string) *http2.SettingsFrame {
	rc.t.Helper()
	f, err := rc.fr.ReadFrame()
	rc.check(err)
	sf, ok := f.(*http2.SettingsFrame)
	if !ok || sf.IsAck() {
		rc.t.Fatalf("%s: read %v, want SETTINGS", who, f)
	}
	return sf
}

// response reads frames until stream id ends, answering nothing, and
// returns its :status and body; a GOAWAY or RST_STREAM fails the test.
func (rc *rawClient) response(id uint32) (string, string) {
	rc.t.Helper()
	var status string
	var body bytes.Buffer
	for {
		f, err := rc.fr.ReadFrame()
		rc.check(err)
		switch f := f.(type) {
		case *http2.GoAwayFrame:
			rc.t.Fatalf("GOAWAY %v %q waiting for stream %d", f.ErrCode, f.DebugData(), id)
		case *http2.RSTStreamFrame:
			rc.t.Fatalf("RST_STREAM %v on stream %d", f.ErrCode, f.StreamID)
		case *http2.MetaHeadersFrame:
			if f.StreamID == id && status == "" {
				status = f.PseudoValue("status")
			}
			if f.StreamID == id && f.StreamEnded() {
				return status, body.String()
			}
		case *http2.DataFrame:
			if f.StreamID == id {
				body.Write(f.Data())
				if f.StreamEnded() {
					return status, body.String()
				}
			}
		}
	}
}

// A client that sends its first request before it ACKs the splitter's
// SETTINGS: the ACK reaches the handed-over connection late, and must
// still be dropped.
func TestHeadersBeforeAckOnOther(t *testing.T) {
	s := startSplitter(t, Options{})
	serveOther(t, s, http.HandlerFunc(otherHandler))
	ctx := testContext(t)
	rc := dialRaw(t, ctx, s.Other().Addr().String())

	_, err := io.WriteString(rc.conn, http2.ClientPreface)
	rc.check(err)
	rc.check(rc.fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1 << 20}))
	rc.check(rc.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: rc.headers("/one", "application/json"), EndStream: true, EndHeaders: true}))

	if sf := rc.readSettings("the splitter's preface"); sf.NumSettings() != 0 {
		t.Fatalf("the splitter's SETTINGS has %d parameters, want none", sf.NumSettings())
	}
	// net/http's own SETTINGS: the connection is handed over, so the ACK
	// written now arrives after the look.
	rc.readSettings("net/http's preface")
	rc.check(rc.fr.WriteSettingsAck()) // the splitter's
	rc.check(rc.fr.WriteSettingsAck()) // net/http's

	if st, body := rc.response(1); st != "200" || body != "other HTTP/2.0 POST application/json " {
		t.Fatalf("stream 1: %s %q", st, body)
	}
	rc.check(rc.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 3, BlockFragment: rc.headers("/two", "text/plain"), EndStream: true, EndHeaders: true}))
	if st, body := rc.response(3); st != "200" || body != "other HTTP/2.0 POST text/plain " {
		t.Fatalf("stream 3: %s %q", st, body)
	}
	if g, o := s.Counts(); g != 0 || o != 1 {
		t.Errorf("Counts = grpc %d, other %d; want one connection, on Other()", g, o)
	}
}

func TestHTTP1LandsOnOtherAtOnce(t *testing.T) {
	// The look never times out here: a request that waited for 24 bytes
	// would end the test at its deadline.
	s := startSplitter(t, Options{FirstRequestTimeout: time.Hour})
	serveOther(t, s, http.HandlerFunc(otherHandler))
	ctx := testContext(t)
	for _, req := range []string{
		"GET / HTTP/1.1\r\nHost: x\r\n\r\n",
		"GET / HTTP/1.0\r\n\r\n", // 18 bytes, shorter than the HTTP/2 preface
		"PRI / HTTP/1.1\r\nHost: x\r\n\r\n",
	} {
		rc := dialRaw(t, ctx, s.Other().Addr().String())
		_, err := io.WriteString(rc.conn, req)
		rc.check(err)
		resp, err := http.ReadResponse(bufio.NewReader(rc.conn), nil)
		if err != nil {
			t.Fatalf("%q: %v", req, err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatalf("%q: %v", req, err)
		}
		if !strings.HasPrefix(string(body), "other HTTP/1.") {
			t.Fatalf("%q: %d %q", req, resp.StatusCode, body)
		}
	}
	if g, o := s.Counts(); g != 0 || o != 3 {
		t.Errorf("Counts = grpc %d, other %d; want 3 connections, on Other()", g, o)
	}
}

// acceptOne accepts one connection from l within ctx.
func acceptOne(t *testing.T, ctx context.Context, l net.Listener) net.Conn {
	t.Helper()
	type accepted struct {
		c   net.Conn
		err error
	}
	ch := make(chan accepted, 1)
	go func() {
		c, err := l.Accept()
		ch <- accepted{c, err}
	}()
	select {
	case a := <-ch:
		if a.err != nil {
			t.Fatalf("Accept: %v", a.err)
		}
		t.Cleanup(func() { a.c.Close() })
		return a.c
	case <-ctx.Done():
		// The listener's Close, at the test's end, ends the Accept.
		t.Fatalf("no connection accepted: %v", ctx.Err())
		return nil
	}
}

// A connection that shows nothing within FirstRequestTimeout reaches
// Other() with what it sent, and with no deadline of the look left on it.
func TestSilentConnectionReachesOtherAfterTimeout(t *testing.T) {
	s := startSplitter(t, Options{FirstRequestTimeout: 50 * time.Millisecond})
	ctx := testContext(t)
	ping := string(frame(t, func(f *http2.Framer) error { return f.WritePing(false, [8]byte{'!'}) }))
	for _, tc := range []struct{ name, sent, later string }{
		{"nothing", "", "!"},
		{"part of the preface", "PRI * HTTP/2", "!"},
		{"the preface and SETTINGS, no HEADERS", http2.ClientPreface + "\x00\x00\x00\x04\x00\x00\x00\x00\x00", ping},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rc := dialRaw(t, ctx, s.Other().Addr().String())
			_, err := io.WriteString(rc.conn, tc.sent)
			rc.check(err)
			got := acceptOne(t, ctx, s.Other())
			// Written after the look gave up, read with no deadline set:
			// the look's would have passed. The test's own bound closes
			// the connection instead.
			defer context.AfterFunc(ctx, func() { got.Close() })()
			_, err = io.WriteString(rc.conn, tc.later)
			rc.check(err)
			buf := make([]byte, len(tc.sent)+len(tc.later))
			if _, err := io.ReadFull(got, buf); err != nil {
				t.Fatalf("reading the handed-over connection: %v", err)
			}
			if string(buf) != tc.sent+tc.later {
				t.Fatalf("read %q, want %q", buf, tc.sent+tc.later)
			}
			// And it is the client's connection both ways.
			_, err = io.WriteString(got, "back")
			rc.check(err)
			back := make([]byte, 4)
			if strings.HasPrefix(tc.sent, http2.ClientPreface) {
				back = make([]byte, 9+4) // after the splitter's SETTINGS
			}
			_, err = io.ReadFull(rc.conn, back)
			rc.check(err)
			if !strings.HasSuffix(string(back), "back") {
				t.Fatalf("the client read %q", back)
			}
			if got.RemoteAddr().String() != rc.conn.LocalAddr().String() || got.LocalAddr().String() != rc.conn.RemoteAddr().String() {
				t.Errorf("addresses %s→%s, want %s→%s", got.RemoteAddr(), got.LocalAddr(), rc.conn.LocalAddr(), rc.conn.RemoteAddr())
			}
		})
	}
}

func TestCloseEndsConnectionsBeingLookedAt(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(ln, Options{FirstRequestTimeout: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- s.Serve() }()
	ctx := testContext(t)

	rc := dialRaw(t, ctx, ln.Addr().String())
	_, err = io.WriteString(rc.conn, http2.ClientPreface)
	rc.check(err)
	rc.readSettings("the splitter's preface") // the look has begun

	accepts := make(chan error, 2)
	for _, l := range []net.Listener{s.GRPC(), s.Other()} {
		go func() {
			_, err := l.Accept()
			accepts <- err
		}()
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	// Close has returned: the look is over, and the client sees its
	// connection closed.
	if _, err := rc.conn.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Errorf("the client's read after Close = %v, want EOF", err)
	}
	for range 2 {
		select {
		case err := <-accepts:
			if !errors.Is(err, net.ErrClosed) {
				t.Errorf("Accept after Close = %v, want net.ErrClosed", err)
			}
		case <-ctx.Done():
			t.Fatal("an Accept did not return after Close")
		}
	}
	select {
	case err := <-served:
		if err != nil {
			t.Errorf("Serve after Close = %v, want nil", err)
		}
	case <-ctx.Done():
		t.Fatal("Serve did not return after Close")
	}
	if g, o := s.Counts(); g != 0 || o != 0 {
		t.Errorf("Counts = grpc %d, other %d; want none", g, o)
	}
}

func frame(t *testing.T, write func(*http2.Framer) error) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := write(http2.NewFramer(&b, nil)); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// What the chosen listener's connection reads is what the client sent,
// less the first SETTINGS ACK, wherever that ACK falls.
func TestHandedOverBytesAreExact(t *testing.T) {
	enc := &rawClient{t: t}
	enc.enc = hpack.NewEncoder(&enc.hbuf)
	block := enc.headers("/pkg.Service/Method", "application/grpc+proto")
	settings := frame(t, func(f *http2.Framer) error {
		return f.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1 << 20})
	})
	ack := frame(t, func(f *http2.Framer) error { return f.WriteSettingsAck() })
	window := frame(t, func(f *http2.Framer) error { return f.WriteWindowUpdate(0, 1<<20) })
	ping := frame(t, func(f *http2.Framer) error { return f.WritePing(false, [8]byte{1, 2, 3, 4, 5, 6, 7, 8}) })
	// HEADERS split over a CONTINUATION.
	headers := frame(t, func(f *http2.Framer) error {
		if err := f.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block[:5]}); err != nil {
			return err
		}
		return f.WriteContinuation(1, true, block[5:])
	})
	data := frame(t, func(f *http2.Framer) error { return f.WriteData(1, true, []byte("\x00\x00\x00\x00\x02hi")) })
	// A DATA payload that looks like a SETTINGS ACK must pass.
	lookalike := frame(t, func(f *http2.Framer) error { return f.WriteData(3, false, ack) })
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

	for _, tc := range []struct {
		name          string
		before, after []byte // sent before and after the connection is handed over
		bytewise      bool   // after is written a byte at a time
		want          []byte
	}{
		{"ACK before HEADERS, as grpc-go sends it",
			cat([]byte(http2.ClientPreface), settings, window, ack, ping, headers), cat(data, ack),
			false, cat([]byte(http2.ClientPreface), settings, window, ping, headers, data, ack)},
		{"ACK after the hand-over",
			cat([]byte(http2.ClientPreface), settings, lookalike, headers), cat(data, ack, ping, ack),
			false, cat([]byte(http2.ClientPreface), settings, lookalike, headers, data, ping, ack)},
		{"ACK after the hand-over, a byte at a time",
			cat([]byte(http2.ClientPreface), settings, headers), cat(lookalike, ack, data, ack),
			true, cat([]byte(http2.ClientPreface), settings, headers, lookalike, data, ack)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := startSplitter(t, Options{})
			ctx := testContext(t)
			rc := dialRaw(t, ctx, s.GRPC().Addr().String())
			_, err := rc.conn.Write(tc.before)
			rc.check(err)
			got := acceptOne(t, ctx, s.GRPC())
			if tc.bytewise {
				for i := range tc.after {
					_, err = rc.conn.Write(tc.after[i : i+1])
					rc.check(err)
				}
			} else {
				_, err = rc.conn.Write(tc.after)
				rc.check(err)
			}
			rc.check(rc.conn.(*net.TCPConn).CloseWrite())
			_ = got.SetReadDeadline(time.Now().Add(wait))
			read, err := io.ReadAll(got)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(read, tc.want) {
				t.Fatalf("the server read\n%q\nwant\n%q", read, tc.want)
			}
			// The client read exactly the empty SETTINGS, and the
			// server's CloseWrite reaches it.
			if _, ok := got.(interface{ CloseWrite() error }); !ok {
				t.Fatalf("%T has no CloseWrite", got)
			}
			rc.check(got.(interface{ CloseWrite() error }).CloseWrite())
			fromSplitter, err := io.ReadAll(rc.conn)
			rc.check(err)
			if want := "\x00\x00\x00\x04\x00\x00\x00\x00\x00"; string(fromSplitter) != want {
				t.Fatalf("the client read %q, want the empty SETTINGS %q", fromSplitter, want)
			}
		})
	}
}

// A handed-over connection reports its reads direct only once nothing is
// left to replay or drop, and from then on the original reads what the
// client sends.
func TestOriginalOnceNothingIsLeft(t *testing.T) {
	type original interface{ Original() (net.Conn, bool) }
	check := func(t *testing.T, got net.Conn, wantDirect bool) net.Conn {
		t.Helper()
		o, ok := got.(original)
		if !ok {
			t.Fatalf("%T has no Original", got)
		}
		orig, direct := o.Original()
		if direct != wantDirect {
			t.Fatalf("Original says direct %t, want %t", direct, wantDirect)
		}
		if _, ok := orig.(*net.TCPConn); !ok || orig.RemoteAddr().String() != got.RemoteAddr().String() {
			t.Fatalf("Original returned %T from %v, want the accepted *net.TCPConn from %v", orig, orig.RemoteAddr(), got.RemoteAddr())
		}
		return orig
	}
	readExactly := func(t *testing.T, r io.Reader, want []byte) {
		t.Helper()
		got := make([]byte, len(want))
		if _, err := io.ReadFull(r, got); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("read %q, want %q", got, want)
		}
	}

	t.Run("HTTP/2", func(t *testing.T) {
		s := startSplitter(t, Options{})
		ctx := testContext(t)
		rc := dialRaw(t, ctx, s.GRPC().Addr().String())
		settings := frame(t, func(f *http2.Framer) error { return f.WriteSettings() })
		ack := frame(t, func(f *http2.Framer) error { return f.WriteSettingsAck() })
		ping := frame(t, func(f *http2.Framer) error { return f.WritePing(false, [8]byte{7}) })
		headers := frame(t, func(f *http2.Framer) error {
			return f.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, EndHeaders: true,
				BlockFragment: rc.headers("/pkg.Service/Method", "application/grpc")})
		})
		before := bytes.Join([][]byte{[]byte(http2.ClientPreface), settings, headers}, nil)
		_, err := rc.conn.Write(before)
		rc.check(err)
		got := acceptOne(t, ctx, s.GRPC())
		_ = got.SetReadDeadline(time.Now().Add(wait))
		check(t, got, false)
		readExactly(t, got, before)
		check(t, got, false) // the look's ACK is still to drop
		_, err = rc.conn.Write(append(ack, ping...))
		rc.check(err)
		readExactly(t, got, ping)
		orig := check(t, got, true)
		_, err = rc.conn.Write(ping)
		rc.check(err)
		readExactly(t, orig, ping)
	})
	t.Run("HTTP/1", func(t *testing.T) {
		s := startSplitter(t, Options{})
		ctx := testContext(t)
		rc := dialRaw(t, ctx, s.Other().Addr().String())
		req := []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n")
		_, err := rc.conn.Write(req)
		rc.check(err)
		got := acceptOne(t, ctx, s.Other())
		_ = got.SetReadDeadline(time.Now().Add(wait))
		check(t, got, false)
		readExactly(t, got, req)
		orig := check(t, got, true)
		_, err = rc.conn.Write(req)
		rc.check(err)
		readExactly(t, orig, req)
	})
}

// The filter gives the same bytes however the stream is cut.
func TestAckFilterAnyCut(t *testing.T) {
	settings := frame(t, func(f *http2.Framer) error {
		return f.WriteSettings(http2.Setting{ID: http2.SettingEnablePush, Val: 0})
	})
	ack := frame(t, func(f *http2.Framer) error { return f.WriteSettingsAck() })
	ping := frame(t, func(f *http2.Framer) error { return f.WritePing(true, [8]byte{8}) })
	in := bytes.Join([][]byte{[]byte(http2.ClientPreface), settings, ping, ack, ping, ack}, nil)
	want := bytes.Join([][]byte{[]byte(http2.ClientPreface), settings, ping, ping, ack}, nil)
	for i := range len(in) + 1 {
		for j := i; j <= len(in); j++ {
			f := &ackFilter{preface: len(http2.ClientPreface)}
			out := f.feed(nil, in[:i])
			out = f.feed(out, in[i:j])
			out = f.feed(out, in[j:])
			if !bytes.Equal(out, want) {
				t.Fatalf("cut at %d and %d: %q, want %q", i, j, out, want)
			}
		}
	}
}

// A first request is native gRPC as grpc-go's server takes it.
func TestNativeGRPC(t *testing.T) {
	for _, tc := range []struct {
		method, contentType string
		want                bool
	}{
		{"POST", "application/grpc", true},
		{"POST", "application/grpc+proto", true},
		{"POST", "application/grpc;charset=utf-8", true},
		{"POST", "application/grpc+json", false}, // one codec, protobuf: connect serves JSON
		{"POST", "application/grpc+json; charset=utf-8", false},
		{"POST", "application/grpc-web", false},
		{"POST", "application/grpc-web+proto", false},
		{"POST", "application/grpc-web-text", false},
		{"POST", "application/grpcx", false},
		{"POST", "application/proto", false},
		{"POST", "application/json", false},
		{"POST", "", false},
		{"GET", "application/grpc", false},
	} {
		fields := []hpack.HeaderField{{Name: ":method", Value: tc.method}}
		if tc.contentType != "" {
			fields = append(fields, hpack.HeaderField{Name: "content-type", Value: tc.contentType})
		}
		if got := nativeGRPC(&http2.MetaHeadersFrame{Fields: fields}); got != tc.want {
			t.Errorf("%s %q: native gRPC %t, want %t", tc.method, tc.contentType, got, tc.want)
		}
	}
}

func TestOptionsValidation(t *testing.T) {
	for _, tc := range []struct {
		o     Options
		field string
	}{
		{Options{FirstRequestTimeout: -time.Second}, "Options.FirstRequestTimeout"},
		{Options{MaxPeekBytes: -1}, "Options.MaxPeekBytes"},
		{Options{MaxPeekBytes: 100}, "Options.MaxPeekBytes"},
		{Options{MaxPeekBytes: MaxMaxPeekBytes + 1}, "Options.MaxPeekBytes"},
		{Options{FirstBytesTimeout: -time.Second}, "Options.FirstBytesTimeout"},
		{Options{FirstRequestTimeout: time.Second, FirstBytesTimeout: 2 * time.Second}, "Options.FirstBytesTimeout"},
	} {
		_, err := New(fakeListener{}, tc.o)
		if err == nil || !strings.Contains(err.Error(), tc.field) || domain.ErrorCode(err) != domain.CodeInvalidArgument {
			t.Errorf("New(%+v) = %v, want an INVALID_ARGUMENT naming %s", tc.o, err, tc.field)
		}
	}
	s, err := New(fakeListener{}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if s.opt.FirstRequestTimeout != DefaultFirstRequestTimeout || s.opt.FirstBytesTimeout != DefaultFirstBytesTimeout || s.opt.MaxPeekBytes != DefaultMaxPeekBytes || s.opt.Logger == nil {
		t.Errorf("defaults: %+v", s.opt)
	}
	if _, err := New(nil, Options{}); err == nil {
		t.Error("New(nil) succeeded")
	}
}

// A connection whose look needs more than MaxPeekBytes goes to Other().
func TestPeekLimitSendsToOther(t *testing.T) {
	s := startSplitter(t, Options{MaxPeekBytes: MinMaxPeekBytes, FirstRequestTimeout: time.Hour})
	ctx := testContext(t)
	rc := dialRaw(t, ctx, s.Other().Addr().String())
	_, err := io.WriteString(rc.conn, http2.ClientPreface)
	rc.check(err)
	pad := bytes.Repeat([]byte{0}, 8)
	var sent int
	for sent = len(http2.ClientPreface); sent <= MinMaxPeekBytes; sent += 9 + 8 {
		rc.check(rc.fr.WritePing(false, [8]byte(pad)))
	}
	got := acceptOne(t, ctx, s.Other())
	buf := make([]byte, len(http2.ClientPreface))
	_, err = io.ReadFull(got, buf)
	rc.check(err)
	if string(buf) != http2.ClientPreface {
		t.Fatalf("read %q", buf)
	}
}

type fakeListener struct{ net.Listener }

func (fakeListener) Addr() net.Addr { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)} }

// temporaryListener fails its first Accept with a temporary error.
type temporaryListener struct {
	net.Listener
	failed bool
}

type temporaryError struct{}

func (temporaryError) Error() string   { return "too many open files" }
func (temporaryError) Timeout() bool   { return false }
func (temporaryError) Temporary() bool { return true }

func (l *temporaryListener) Accept() (net.Conn, error) {
	if !l.failed {
		l.failed = true
		return nil, temporaryError{}
	}
	return l.Listener.Accept()
}

func TestTemporaryAcceptErrorIsRetried(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	logs := &sharedtest.LockedBuffer{}
	s, err := New(&temporaryListener{Listener: ln}, Options{Logger: newLogger(logs)})
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- s.Serve() }()
	serveOther(t, s, http.HandlerFunc(otherHandler))
	ctx := testContext(t)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+ln.Addr().String()+"/", nil)
	if err != nil {
		t.Fatal(err)
	}
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		t.Fatalf("after a temporary Accept error: %v", err)
	}
	resp.Body.Close()
	if n := len(logs.Lines("accept failed; retrying")); n != 1 {
		t.Errorf("%d lines on the Accept error, want 1:\n%s", n, logs)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-served; err != nil {
		t.Errorf("Serve = %v", err)
	}
}

func newLogger(w io.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// TestSilentConnectionGoesAtTheFirstBytesTimeout: a connection that has
// not shown the whole HTTP/2 preface reaches Other() at the short bound,
// not the long one kept for a gRPC channel's first call.
func TestSilentConnectionGoesAtTheFirstBytesTimeout(t *testing.T) {
	s := startSplitter(t, Options{FirstRequestTimeout: time.Hour, FirstBytesTimeout: 50 * time.Millisecond})
	ctx := testContext(t)
	for _, sent := range []string{"", "PRI * HTTP/2", "GET / HTT"} {
		rc := dialRaw(t, ctx, s.Other().Addr().String())
		_, err := io.WriteString(rc.conn, sent)
		rc.check(err)
		got := acceptOne(t, ctx, s.Other()) // the test's 10 s bound, not the hour
		buf := make([]byte, len(sent))
		if _, err := io.ReadFull(got, buf); err != nil || string(buf) != sent {
			t.Fatalf("%q: read %q, %v", sent, buf, err)
		}
		got.Close()
	}
}
