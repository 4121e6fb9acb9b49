package fleet

import (
	"context"

	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	"github.com/loadreporter/loadreporter/client"
	lrv1 "github.com/loadreporter/loadreporter/gen/loadreporter/v1"
	"github.com/loadreporter/loadreporter/gen/loadreporter/v1/loadreporterv1connect"
	pb "github.com/loadreporter/loadreporter/gen/sglang/router/loadmonitor/v1"
	"github.com/loadreporter/loadreporter/internal/sharedtest"
)

const watchFleetPath = "/loadreporter.v1.FleetService/WatchFleet"

// stuckReader is a WatchFleet stream whose client never reads past its
// first few KiB; close ends it.
type stuckReader struct{ close func() }

// stuckHTTP1 opens WatchFleet over Connect on HTTP/1.1, as the page does,
// from a socket with a receive buffer of a few KiB, and never reads: the
// server's writes block once the kernel's buffers are full.
func stuckHTTP1(t *testing.T, addr string) stuckReader {
	t.Helper()
	d := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		return c.Control(func(fd uintptr) { _ = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 2048) })
	}}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	// An empty WatchFleetRequest in a Connect envelope: flags 0, length 0.
	req := "POST " + watchFleetPath + " HTTP/1.1\r\nHost: " + addr + "\r\nContent-Type: application/connect+proto\r\n" +
		"Connect-Protocol-Version: 1\r\nContent-Length: 5\r\n\r\n\x00\x00\x00\x00\x00"
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
	return stuckReader{close: func() { _ = c.Close() }}
}

// stuckH2 opens WatchFleet over gRPC on unencrypted HTTP/2, on a
// connection of its own whose stream window is 16 KiB, and never reads:
// the server's writes block on HTTP/2 flow control, the connection itself
// staying alive (pings answered), as a page in a frozen tab.
func stuckH2(t *testing.T, addr string) stuckReader {
	t.Helper()
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	conns := make(chan net.Conn, 1) // the reader's one connection, closed by close
	tr := &http.Transport{Protocols: &p, HTTP2: &http.HTTP2Config{MaxReceiveBufferPerStream: 16 << 10},
		DialContext: func(ctx context.Context, network, address string) (net.Conn, error) {
			c, err := (&net.Dialer{}).DialContext(ctx, network, address)
			if err == nil {
				conns <- c
			}
			return c, err
		}}
	ctx, cancel := context.WithCancel(context.Background())
	fc := loadreporterv1connect.NewFleetServiceClient(&http.Client{Transport: tr}, "http://"+addr, connect.WithGRPC())
	st, err := fc.WatchFleet(ctx, connect.NewRequest(&lrv1.WatchFleetRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	c := <-conns
	return stuckReader{close: func() {
		cancel()
		_ = c.Close()
		_ = st.Close()
		tr.CloseIdleConnections()
	}}
}

// heapInUse is the heap in use after a collection.
func heapInUse() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse
}

// TestStuckReadersAreCut: readers that never read, over HTTP/1.1 and over
// HTTP/2, are all admitted, each holds a blocked write, and once
// --stalled-write-timeout passes every one is cut (Stalls counts them,
// their slots come back); once they are gone the process's goroutines and
// heap are back to what they were before them. Without the bound they were
// held until the connection died: 100 of them took the fleet command from
// 22 to 34 MB, 1 024-rank reports from 27 to 85 MB. It runs alone (no
// t.Parallel): the goroutines and heap it counts are the process's.
func TestStuckReadersAreCut(t *testing.T) {
	addr := serveWorker(t, &reportingWorker{ranks: 1024})
	m := startMain(t, []string{addr}, nil, "--stalled-write-timeout", "300ms")
	ctx := testCtx(t, 60*time.Second)
	waitFresh(t, ctx, m)
	// A reader that reads, for the baseline: the stream's goroutines and
	// the fleet's own are running.
	reading := loadreporterv1connect.NewFleetServiceClient(http.DefaultClient, "http://"+m.Addr())
	rs, err := reading.WatchFleet(ctx, connect.NewRequest(&lrv1.WatchFleetRequest{}))
	if err != nil || !rs.Receive() {
		t.Fatalf("a reading stream: %v %v", err, rs.Err())
	}
	go func() {
		for rs.Receive() {
		}
	}()
	defer rs.Close()
	baseGoroutines, baseHeap := runtime.NumGoroutine(), heapInUse()

	const perProtocol = 5
	var readers []stuckReader
	for range perProtocol {
		readers = append(readers, stuckHTTP1(t, m.Addr()), stuckH2(t, m.Addr()))
	}
	t0 := time.Now()
	// Admitted, each stream is live or already cut.
	eventually(t, ctx, "every stuck reader admitted", func() bool {
		return m.stream.streams.count()+int64(m.stalls.Ended()) == 2*perProtocol+1
	})
	stuckGoroutines, stuckHeap := runtime.NumGoroutine(), heapInUse()
	eventually(t, ctx, "every stuck reader cut", func() bool {
		return m.stalls.Ended() == 2*perProtocol && m.stream.streams.count() == 1
	})
	t.Logf("cut after %s", time.Since(t0))
	for _, r := range readers {
		r.close()
	}
	eventually(t, ctx, "goroutines back to the baseline", func() bool { return runtime.NumGoroutine() <= baseGoroutines+2 })
	eventually(t, ctx, "the heap back to the baseline", func() bool { return heapInUse() <= baseHeap+2<<20 })
	t.Logf("goroutines %d before the readers, %d with %d stuck, %d after; heap in use %.1f MB, %.1f MB, %.1f MB",
		baseGoroutines, stuckGoroutines, 2*perProtocol, runtime.NumGoroutine(),
		float64(baseHeap)/1e6, float64(stuckHeap)/1e6, float64(heapInUse())/1e6)
}

// TestStreamsPastTheCapAreRefused: past --max-watch-sessions live streams
// the next is refused at once with RESOURCE_EXHAUSTED naming the flag, and
// a stream that ends gives its slot back.
func TestStreamsPastTheCapAreRefused(t *testing.T) {
	t.Parallel()
	addr := serveWorker(t, &reportingWorker{ranks: 2})
	m := startMain(t, []string{addr}, nil, "--max-watch-sessions", "2")
	ctx := testCtx(t, 40*time.Second)
	fc := loadreporterv1connect.NewFleetServiceClient(http.DefaultClient, "http://"+m.Addr())
	open := func() (*connect.ServerStreamForClient[lrv1.WatchFleetResponse], context.CancelFunc) {
		sctx, cancel := context.WithCancel(ctx)
		st, err := fc.WatchFleet(sctx, connect.NewRequest(&lrv1.WatchFleetRequest{}))
		if err != nil {
			t.Fatal(err)
		}
		return st, cancel
	}
	var cancels []context.CancelFunc
	for i := range 2 {
		st, cancel := open()
		cancels = append(cancels, cancel)
		if !st.Receive() {
			t.Fatalf("stream %d under the cap: %v", i, st.Err())
		}
	}
	st, cancel := open()
	defer cancel()
	if st.Receive() || connect.CodeOf(st.Err()) != connect.CodeResourceExhausted ||
		!strings.Contains(st.Err().Error(), "--max-watch-sessions") {
		t.Fatalf("the stream past the cap: %v, want RESOURCE_EXHAUSTED naming --max-watch-sessions", st.Err())
	}
	cancels[0]()
	eventually(t, ctx, "the ended stream's slot given back", func() bool { return m.stream.streams.count() == 1 })
	if st, cancel := open(); !st.Receive() {
		cancel()
		t.Fatalf("a stream once a slot is free: %v", st.Err())
	} else {
		cancel()
	}
	cancels[1]()
}

// TestHostileReportDoesNotMultiply: a worker sending reports of 3 MB
// (750 KiB each of model, zone, worker_addr and last_error) costs
// each reader of WatchFleet, and GET /v1/fleet/loads, a few KiB: the
// client keeps 512 bytes of each (client.MaxMetadataBytes,
// client.MaxLastErrorBytes), and the fleet sends what the client kept.
func TestHostileReportDoesNotMultiply(t *testing.T) {
	t.Parallel()
	huge := strings.Repeat("m", 750<<10)
	addr := serveWorker(t, &reportingWorker{ranks: 4, lastError: huge,
		worker: &pb.Worker{WorkerAddr: huge, Model: proto.String(huge), Zone: proto.String(huge)}})
	m := startMain(t, []string{addr}, nil)
	ctx := testCtx(t, 40*time.Second)
	eventually(t, ctx, "a report", func() bool { return m.fleet.Views()[0].Report != nil })

	const readers, boundBytes = 8, 8 << 10
	fc := loadreporterv1connect.NewFleetServiceClient(http.DefaultClient, "http://"+m.Addr())
	for i := range readers {
		st, err := fc.WatchFleet(ctx, connect.NewRequest(&lrv1.WatchFleetRequest{}))
		if err != nil || !st.Receive() {
			t.Fatalf("reader %d: %v %v", i, err, st.Err())
		}
		msg := st.Msg()
		w := msg.GetWorkers()[0]
		if n := proto.Size(msg); n > boundBytes || len(w.GetReport().GetWorker().GetModel()) > client.MaxMetadataBytes ||
			len(w.GetReport().GetLastError()) > client.MaxLastErrorBytes || len(w.GetReason()) > 2*client.MaxLastErrorBytes {
			t.Fatalf("reader %d got %d bytes (model %d, zone %d, addr %d, last_error %d, reason %d); want at most %d",
				i, n, len(w.GetReport().GetWorker().GetModel()), len(w.GetReport().GetWorker().GetZone()),
				len(w.GetReport().GetWorker().GetWorkerAddr()), len(w.GetReport().GetLastError()), len(w.GetReason()), boundBytes)
		}
		_ = st.Close()
	}
	for _, path := range []string{"/v1/fleet/loads", "/"} {
		resp, err := http.Get("http://" + m.Addr() + path)
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || len(body) > 4*boundBytes {
			t.Fatalf("GET %s: %d bytes, %v", path, len(body), err)
		}
	}
}

// TestCloseCutsStuckReadersAndSucceeds: closing the fleet view while
// readers that stopped reading hold blocked writes (none cut yet: the
// stalled-write bound is a minute) ends within the final-write bound,
// not the grace, and returns nil: cutting them is what shutting down is
// for. It took the whole 5 s grace and exited 1.
func TestCloseCutsStuckReadersAndSucceeds(t *testing.T) {
	t.Parallel()
	addr := serveWorker(t, &reportingWorker{ranks: 1024})
	logs := &sharedtest.LockedBuffer{}
	m := startMain(t, []string{addr}, logs, "--shutdown-grace", "1m", "--final-write-timeout", "200ms")
	ctx := testCtx(t, 40*time.Second)
	waitFresh(t, ctx, m)
	var readers []stuckReader
	for range 4 {
		readers = append(readers, stuckHTTP1(t, m.Addr()), stuckH2(t, m.Addr()))
	}
	defer func() {
		for _, r := range readers {
			r.close()
		}
	}()
	eventually(t, ctx, "every reader's write blocked", func() bool { return m.stream.sending.Load() == 8 })
	closed := make(chan error, 1)
	go func() { closed <- m.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Fatalf("close with stuck readers: %v", err)
		}
	case <-ctx.Done():
		t.Fatal("close with stuck readers waited for the grace")
	}
	// Every stream was open at the close, and writes were still blocked
	// (how many of the eight: a loaded machine may let the kernel take a
	// last write of one before the close counts them).
	if log := logs.String(); strings.Contains(log, "grace ended") || !strings.Contains(log, "streams_open=8 streams_writing=") ||
		strings.Contains(log, "streams_writing=0 ") {
		t.Fatalf("log:\n%s", log)
	}
	if err := m.Close(); err != nil {
		t.Fatalf("a second close: %v", err)
	}
}
