package tests

import (
	"bufio"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/protobuf/proto"

	pb "github.com/loadreporter/loadreporter/gen/sglang/router/loadmonitor/v1"
	"github.com/loadreporter/loadreporter/internal/sharedtest"
)

// The tests of this file run a router built on another gRPC stack, Python's
// grpcio (gRPC C-core, pinned in tests/peers/clients.txt), against the real
// service: testdata/grpcio_router.py opens the Monitor stream with grpcio's
// defaults and passes raw frames, which the test encodes and decodes with
// the generated Go types.

// grpcioWait bounds each wait for the grpcio router: its next frame, its exit.
const grpcioWait = 5 * time.Second

// needGrpcio returns the interpreter of the venv with grpcio
// (.venv-peers/clients), or skips the test (fails under CI=true) as
// needPeer does.
func needGrpcio(t *testing.T) string {
	t.Helper()
	return filepath.Join(needPeer(t, "clients"), "bin", "python")
}

// grpcioRouter is testdata/grpcio_router.py running: one Monitor stream. It
// is a router, so the helpers of helpers_test.go read it like the Go
// clients; Recv returns io.EOF when grpcio saw status OK.
type grpcioRouter struct {
	cmd     *exec.Cmd
	stdin   io.Writer
	stderr  *sharedtest.LockedBuffer
	lines   chan string
	done    chan struct{} // closed by kill: stop delivering lines
	exited  chan struct{} // closed once the process is reaped
	waitErr error         // cmd.Wait's, once exited is closed
	once    sync.Once
}

var _ router = (*grpcioRouter)(nil)

// startGrpcioRouter starts the script against target; args are the
// script's own ("gzip").
func startGrpcioRouter(t *testing.T, target string, args ...string) *grpcioRouter {
	t.Helper()
	cmd := exec.Command(needGrpcio(t), append([]string{"testdata/grpcio_router.py", target}, args...)...)
	// grpcio's defaults, but no proxy from the environment in front of
	// 127.0.0.1, and only its error logs (each one fails the test).
	cmd.Env = append(environWithout("http_proxy", "https_proxy", "grpc_proxy", "grpc_verbosity"), "GRPC_VERBOSITY=ERROR")
	p := &grpcioRouter{cmd: cmd, stderr: &sharedtest.LockedBuffer{}, lines: make(chan string, 64),
		done: make(chan struct{}), exited: make(chan struct{})}
	cmd.Stderr = p.stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p.stdin = stdin
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			select {
			case p.lines <- sc.Text():
			case <-p.done:
			}
		}
		close(p.lines)
		p.waitErr = cmd.Wait() // stdout drained: reaping is safe now
		close(p.exited)
	}()
	t.Cleanup(p.kill)
	return p
}

func (p *grpcioRouter) command(line string) error {
	_, err := io.WriteString(p.stdin, line+"\n")
	return err
}

func (p *grpcioRouter) Send(f *pb.RouterFrame) error {
	b, err := proto.Marshal(f)
	if err != nil {
		return err
	}
	return p.command("SEND " + hex.EncodeToString(b))
}

func (p *grpcioRouter) CloseSend() error { return p.command("CLOSE") }

func (p *grpcioRouter) Recv() (*pb.WorkerFrame, error) {
	select {
	case line, ok := <-p.lines:
		if !ok {
			return nil, fmt.Errorf("grpcio_router.py exited without a status; stderr:\n%s", p.stderr)
		}
		verb, arg, _ := strings.Cut(line, " ")
		switch verb {
		case "FRAME":
			b, err := hex.DecodeString(arg)
			if err != nil {
				return nil, fmt.Errorf("line %q: %w", line, err)
			}
			f := new(pb.WorkerFrame)
			if err := proto.Unmarshal(b, f); err != nil {
				return nil, fmt.Errorf("a WorkerFrame grpcio received does not decode (%x): %w", b, err)
			}
			return f, nil
		case "END":
			if code, details, _ := strings.Cut(arg, " "); code != "OK" {
				return nil, fmt.Errorf("grpcio saw status %s: %q", code, details)
			}
			return nil, io.EOF
		}
		return nil, fmt.Errorf("unexpected line from grpcio_router.py: %q", line)
	case <-time.After(grpcioWait):
		return nil, fmt.Errorf("no frame from the grpcio router within %s; its stderr:\n%s", grpcioWait, p.stderr)
	}
}

// expectExit asserts the script ended by itself with exit status 0 and
// grpcio logged no error.
func (p *grpcioRouter) expectExit(t *testing.T) {
	t.Helper()
	select {
	case <-p.exited:
	case <-time.After(grpcioWait):
		t.Fatalf("grpcio_router.py still running %s after its stream ended", grpcioWait)
	}
	if p.waitErr != nil || p.stderr.String() != "" {
		t.Fatalf("grpcio_router.py: exit %v, stderr:\n%s", p.waitErr, p.stderr)
	}
}

// kill ends the script if it still runs, and reaps it.
func (p *grpcioRouter) kill() {
	p.once.Do(func() {
		close(p.done)
		_ = p.cmd.Process.Kill()
		<-p.exited
	})
}

// sendOK sends f or fails the test.
func sendOK(t *testing.T, r router, f *pb.RouterFrame) {
	t.Helper()
	if err := r.Send(f); err != nil {
		t.Fatal(err)
	}
}

// expectAck asserts the next frame is the registration's acknowledgement.
func expectAck(t *testing.T, r router, leaseMs, renewAfterMs int64) {
	t.Helper()
	f := recvFrame(t, r)
	if a := f.GetRegistered(); a == nil || a.GetLeaseTtlMs() != leaseMs || a.GetRenewAfterMs() != renewAfterMs {
		t.Fatalf("first frame %v, want registered{lease_ttl_ms:%d renew_after_ms:%d}", f, leaseMs, renewAfterMs)
	}
}

// checkEngineReport asserts rep is HEALTHY and carries the ranks
// countingEngine gives, value for value.
func checkEngineReport(t *testing.T, rep *pb.LoadReport, ranks int) {
	t.Helper()
	if rep.GetStatus() != pb.ReportStatus_REPORT_STATUS_HEALTHY || rep.LastError != nil || rep.GetSourceInstanceId() == "" {
		t.Fatalf("report %d: status %v, last_error %q, source %q", rep.GetSequenceId(), rep.GetStatus(), rep.GetLastError(), rep.GetSourceInstanceId())
	}
	var got []int32
	var running int64 // the pull count mod 100, the same on every rank
	for i, r := range rep.GetRanks() {
		if i == 0 {
			running = r.GetNumRunningReqs()
		}
		got = append(got, r.GetDpRank())
		if r.GetNumRunningReqs() != running || r.GetNumWaitingReqs() != 1 || r.GetNumUsedTokens() != 1000 ||
			r.GetMaxTotalNumTokens() != 4000 || r.GetMaxRunningRequests() != 256 || r.GetTokenUsage() != 0.25 ||
			r.GetSnapshotTimeUnixMs() <= 0 {
			t.Fatalf("report %d, rank %d: %v, want the engine's values", rep.GetSequenceId(), r.GetDpRank(), r)
		}
	}
	want := make([]int32, ranks)
	for i := range want {
		want[i] = int32(i)
	}
	if slices.Sort(got); !slices.Equal(got, want) {
		t.Fatalf("report %d has ranks %v, want 0..%d", rep.GetSequenceId(), got, ranks-1)
	}
}

// TestGrpcioRouter drives SPEC §2's stream protocol from a grpcio router.
// It runs alone (no t.Parallel): it times the cadence to within ±50 ms.
func TestGrpcioRouter(t *testing.T) {
	needGrpcio(t)
	c := testConfig()
	c.Sessions.MinLease = 100 * time.Millisecond
	m := startMain(t, c, &countingEngine{ranks: 4})

	t.Run("ack, reports at the interval, keep_alive, update_config, stop", func(t *testing.T) {
		r := startGrpcioRouter(t, m.Addr())
		sendOK(t, r, registerFrame("grpcio-main", 100, 5000))
		expectAck(t, r, 5000, 1666)

		// One report per 100 ms: sequence and report time increase, the
		// ranks are the engine's.
		var times []int64
		var lastSeq uint64
		source := ""
		for i := range 6 {
			rep := recvReport(t, r)
			checkEngineReport(t, rep, 4)
			if i > 0 && (rep.GetSequenceId() <= lastSeq || rep.GetReportTimeUnixMs() <= times[i-1] || rep.GetSourceInstanceId() != source) {
				t.Fatalf("report %d (time %d, source %s) after report %d (time %d, source %s)", rep.GetSequenceId(),
					rep.GetReportTimeUnixMs(), rep.GetSourceInstanceId(), lastSeq, times[i-1], source)
			}
			lastSeq, source = rep.GetSequenceId(), rep.GetSourceInstanceId()
			times = append(times, rep.GetReportTimeUnixMs())
		}
		// The first report is due at once, the next on the shared grid:
		// four grid intervals from the second report to the sixth.
		if span := times[5] - times[1]; span < 350 || span >= 750 {
			t.Fatalf("4 intervals of 100 ms took %d ms (report times %v)", span, times)
		}

		// A 600 ms lease (room for a loaded machine's hiccups), renewed
		// after every report for two and a half leases: keep_alive keeps
		// the session.
		lease := int64(600)
		sendOK(t, r, updateFrame(nil, &lease))
		for end := time.Now().Add(1500 * time.Millisecond); time.Now().Before(end); {
			checkEngineReport(t, recvReport(t, r), 4)
			sendOK(t, r, keepAliveFrame)
		}

		// update_config to 300 ms (and back to a long lease): the next
		// report is on the new grid at least half an interval away, then
		// one every 300 ms.
		interval, lease := int64(300), int64(5000)
		sent := time.Now().UnixMilli()
		sendOK(t, r, updateFrame(&interval, &lease))
		var after []int64
		for len(after) < 3 {
			rep := recvReport(t, r)
			checkEngineReport(t, rep, 4)
			// Reports pulled before the update reached the service were on
			// their way already.
			if rep.GetReportTimeUnixMs() >= sent+50 {
				after = append(after, rep.GetReportTimeUnixMs())
			}
		}
		if first := after[0] - sent; first < 100 {
			t.Fatalf("first report %d ms after update_config to 300 ms, want at least half an interval", first)
		}
		if span := after[2] - after[0]; span < 500 || span >= 900 {
			t.Fatalf("2 intervals after update_config to 300 ms took %d ms (report times %v)", span, after)
		}

		sendOK(t, r, stopFrame)
		expectCleanEnd(t, r)
		r.expectExit(t)
	})

	t.Run("half-closed, the session lives until its lease runs out", func(t *testing.T) {
		r := startGrpcioRouter(t, m.Addr())
		sendOK(t, r, registerFrame("grpcio-halfclose", 100, 300))
		expectAck(t, r, 300, 100)
		checkEngineReport(t, recvReport(t, r), 4)
		closed := time.Now()
		if err := r.CloseSend(); err != nil {
			t.Fatal(err)
		}
		reports := 0
		for {
			f := recvFrame(t, r)
			if rep := f.GetReport(); rep != nil {
				checkEngineReport(t, rep, 4)
				reports++
				continue
			}
			if e := f.GetError(); e.GetCode() != "LEASE_EXPIRED" || e.GetMessage() == "" {
				t.Fatalf("after %d reports: %v, want error LEASE_EXPIRED with a message", reports, f)
			}
			break
		}
		if took := time.Since(closed); reports == 0 || took < 200*time.Millisecond {
			t.Fatalf("half-closed stream: %d reports, LEASE_EXPIRED after %s; want reports until the 300 ms lease ran out", reports, took)
		}
		expectCleanEnd(t, r)
		r.expectExit(t)
	})

	t.Run("closed before any frame ends OK", func(t *testing.T) {
		r := startGrpcioRouter(t, m.Addr())
		if err := r.CloseSend(); err != nil {
			t.Fatal(err)
		}
		if f, err := r.Recv(); !errors.Is(err, io.EOF) {
			t.Fatalf("got %v, %v; want status OK and no frame", f, err)
		}
		r.expectExit(t)
	})

	tooSmall := int64(5)
	for _, ec := range []struct {
		name   string
		frames []*pb.RouterFrame
		code   string
	}{
		{"keep_alive first", []*pb.RouterFrame{keepAliveFrame}, "INVALID_FIRST_FRAME"},
		{"update_config to 5 ms", []*pb.RouterFrame{registerFrame("grpcio-bad", 100, 1000), updateFrame(&tooSmall, nil)}, "INVALID_ARGUMENT"},
	} {
		t.Run(ec.name, func(t *testing.T) {
			r := startGrpcioRouter(t, m.Addr())
			for _, f := range ec.frames {
				sendOK(t, r, f)
			}
			if e := recvError(t, r); e.GetCode() != ec.code || e.GetMessage() == "" { // then status OK
				t.Fatalf("error %q %q, want %s with a message", e.GetCode(), e.GetMessage(), ec.code)
			}
			r.expectExit(t)
		})
	}
}

// TestGrpcioRouterGzip: a grpcio channel with gzip compression sends its
// frames compressed, which both of the port's servers read. On net/http's
// grpcio decompresses the reports the service compresses (those over
// fanout.MinBytes: 64 ranks); on grpc-go's the reports come as their one
// shared encoding (grpc-encoding identity, which gRPC allows whatever the
// request used). A tap between them shows the compressed flag of every
// message.
func TestGrpcioRouterGzip(t *testing.T) {
	t.Parallel()
	needGrpcio(t)
	for _, algorithm := range []string{"gzip", "deflate"} {
		for _, native := range []bool{true, false} {
			name := algorithm + "/grpc-go"
			if !native {
				name = algorithm + "/net-http"
			}
			t.Run(name, func(t *testing.T) { grpcioCompressed(t, algorithm, native) })
		}
	}
}

// grpcioCompressed runs a grpcio router whose channel compresses with
// algorithm: its register arrives compressed and every report goes back
// compressed the same way on net/http's server, as it is on grpc-go's
// (deflate routers could not connect before).
func grpcioCompressed(t *testing.T, algorithm string, native bool) {
	const ranks = 64
	c := testConfig()
	c.Server.NativeGRPC = native
	m := startMain(t, c, &countingEngine{ranks: ranks})
	tap := startWireTap(t, m.Addr())
	r := startGrpcioRouter(t, tap.addr, algorithm)
	id := "grpcio-" + algorithm + "-" + strings.Repeat("x", 200) // compresses well: grpcio sends it compressed
	sendOK(t, r, registerFrame(id, 100, 5000))
	expectAck(t, r, 5000, 1666)
	for range 3 {
		checkEngineReport(t, recvReport(t, r), ranks)
	}
	sendOK(t, r, stopFrame)
	expectCleanEnd(t, r)
	r.expectExit(t)

	tap.close(t)
	reqHeaders, reqs := tap.stream(true)
	respHeaders, resps := tap.stream(false)
	if reqHeaders["grpc-encoding"] != algorithm || len(reqs) == 0 || reqs[0].flag != 1 {
		t.Errorf("grpcio's request: grpc-encoding %q, messages %v; want %s, the register compressed (flag 1)", reqHeaders["grpc-encoding"], reqs, algorithm)
	}
	// The ack, then the reports (a report after stop may follow).
	if native {
		if enc := respHeaders["grpc-encoding"]; enc != "" && enc != "identity" || len(resps) < 4 ||
			slices.ContainsFunc(resps, func(m wireMsg) bool { return m.flag != 0 }) {
			t.Errorf("grpc-go's response: grpc-encoding %q, messages %v; want identity, every frame as it is (flag 0)",
				respHeaders["grpc-encoding"], resps)
		}
		return
	}
	if respHeaders["grpc-encoding"] != algorithm || len(resps) < 4 ||
		slices.ContainsFunc(resps[1:], func(m wireMsg) bool { return m.flag != 1 }) {
		t.Errorf("the service's response: grpc-encoding %q, messages %v; want %s, every report compressed (flag 1)",
			respHeaders["grpc-encoding"], resps, algorithm)
	}
}

// TestGrpcioRouterShutdown: a grpcio router connected while the service
// shuts down gets SHUTTING_DOWN then status OK, exits cleanly, and does not
// hold the shutdown up.
func TestGrpcioRouterShutdown(t *testing.T) {
	t.Parallel()
	needGrpcio(t)
	c := testConfig()
	m, err := appInit(c, &countingEngine{ranks: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() }) // idempotent; the test closes it first
	r := startGrpcioRouter(t, m.Addr())
	sendOK(t, r, registerFrame("grpcio-shutdown", 100, 5000))
	expectAck(t, r, 5000, 1666)
	checkEngineReport(t, recvReport(t, r), 2)

	start := time.Now()
	closed := make(chan error, 1)
	go func() { closed <- m.Close() }()
	if e := recvError(t, r); e.GetCode() != "SHUTTING_DOWN" || e.GetMessage() == "" { // then status OK
		t.Fatalf("error %q %q, want SHUTTING_DOWN with a message", e.GetCode(), e.GetMessage())
	}
	r.expectExit(t)
	select {
	case err := <-closed:
		if err != nil {
			t.Fatalf("close: %v", err)
		}
	case <-time.After(c.Server.ShutdownGrace + grpcioWait):
		t.Fatal("shutdown did not end")
	}
	if took := time.Since(start); took > c.Server.ShutdownGrace/2 {
		t.Fatalf("shutdown with a grpcio router connected took %s (grace %s)", took, c.Server.ShutdownGrace)
	}
}

// wireTap forwards TCP connections to a gRPC server and decodes what
// passes: the first HEADERS of each direction of stream 1 and the
// compressed flag and size of each length-prefixed message.
type wireTap struct {
	addr   string
	ln     net.Listener
	wg     sync.WaitGroup
	mu     sync.Mutex
	conns  []net.Conn
	header [2]map[string]string // [1]: from the client
	msgs   [2][]wireMsg
}

type wireMsg struct {
	flag byte
	size int
}

func startWireTap(t *testing.T, server string) *wireTap {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	w := &wireTap{addr: ln.Addr().String(), ln: ln}
	w.wg.Go(func() {
		for {
			client, err := ln.Accept()
			if err != nil {
				return
			}
			upstream, err := net.Dial("tcp", server)
			if err != nil {
				_ = client.Close()
				continue
			}
			w.mu.Lock()
			w.conns = append(w.conns, client, upstream)
			w.mu.Unlock()
			w.wg.Go(func() { w.forward(client, upstream, 1) })
			w.wg.Go(func() { w.forward(upstream, client, 0) })
		}
	})
	t.Cleanup(func() { w.close(t) })
	return w
}

// forward copies from to to, and decodes what it copies; fromClient is 1
// for the client's direction.
func (w *wireTap) forward(from, to net.Conn, fromClient int) {
	pr, pw := io.Pipe()
	decoded := make(chan struct{})
	go func() {
		defer close(decoded)
		w.decode(bufio.NewReader(pr), fromClient)
		_, _ = io.Copy(io.Discard, pr) // the copy never waits for the decoder
	}()
	_, _ = io.Copy(io.MultiWriter(to, pw), from)
	_ = pw.Close()
	_ = to.(*net.TCPConn).CloseWrite()
	<-decoded
}

// decode reads one direction's HTTP/2 frames until they end or do not
// parse; the client's direction starts with the connection preface.
func (w *wireTap) decode(br *bufio.Reader, fromClient int) {
	if fromClient == 1 {
		if _, err := io.ReadFull(br, make([]byte, len(http2.ClientPreface))); err != nil {
			return
		}
	}
	fr := http2.NewFramer(nil, br)
	fr.SetMaxReadFrameSize(1 << 24)
	fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	var buf []byte
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			return
		}
		w.mu.Lock()
		switch f := f.(type) {
		case *http2.MetaHeadersFrame:
			if f.StreamID == 1 && w.header[fromClient] == nil {
				w.header[fromClient] = map[string]string{}
				for _, h := range f.Fields {
					w.header[fromClient][h.Name] = h.Value
				}
			}
		case *http2.DataFrame:
			if f.StreamID != 1 {
				break
			}
			for buf = append(buf, f.Data()...); len(buf) >= 5; {
				n := int(binary.BigEndian.Uint32(buf[1:5]))
				if len(buf) < 5+n {
					break
				}
				w.msgs[fromClient] = append(w.msgs[fromClient], wireMsg{flag: buf[0], size: n})
				buf = buf[5+n:]
			}
		}
		w.mu.Unlock()
	}
}

// close stops accepting and waits until every connection has ended (the
// peers closed them), closing the ones that outlive grpcioWait.
func (w *wireTap) close(t *testing.T) {
	_ = w.ln.Close()
	ended := make(chan struct{})
	go func() { w.wg.Wait(); close(ended) }()
	select {
	case <-ended:
		return
	case <-time.After(grpcioWait):
	}
	w.mu.Lock()
	for _, c := range w.conns {
		_ = c.Close()
	}
	w.mu.Unlock()
	<-ended
	t.Errorf("a connection through the tap was still open %s after the test", grpcioWait)
}

// stream returns what the tap saw of stream 1 in one direction.
func (w *wireTap) stream(fromClient bool) (map[string]string, []wireMsg) {
	i := 0
	if fromClient {
		i = 1
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.header[i], slices.Clone(w.msgs[i])
}
