//go:build unix

package rpc

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/mem"
)

// maxIdleConnHeap bounds the live heap an idle native connection holds
// on the server. Measured on linux/amd64 with grpc-go v1.85.0 over 20
// connections, each with one Monitor stream registered and ended: 6.8 to
// 7.9 KiB, as a plain grpc-go server's on a *net.TCPConn; 39.7 to 41.4
// KiB with either 32 KiB buffer held for the connection's life (the read
// buffer, without PooledReads; the write buffer, with
// grpc.SharedWriteBuffer(false)); 72.6 to 73.0 KiB with both.
const maxIdleConnHeap = 16 << 10

// TestNativeIdleConnectionHeap: an idle native connection, served as the
// port serves it, holds neither a read buffer (PooledReads) nor a write
// buffer (grpc-go's server takes it from a pool per flush by default) of
// its own. It runs alone (no t.Parallel), as TestNativeMonitorStreamHeap
// does, and without the race detector.
func TestNativeIdleConnectionHeap(t *testing.T) {
	if testing.Short() {
		t.Skip("opens connections from a second process")
	}
	if raceEnabled {
		t.Skip("the race detector allocates for what it watches: run without -race")
	}
	const conns = 20
	// The first connections a process serves leave what it keeps for
	// every later one (grpc-go's pools and caches).
	connHeap(t, "warm-up", conns, startHeapMonitor)
	connHeap(t, "warm-up", conns, startPlainGRPC)
	ours := connHeap(t, "ours", conns, startHeapMonitor)
	plain := connHeap(t, "plain", conns, startPlainGRPC)
	t.Logf("live heap an idle native connection holds: %d B; an idle connection to a plain grpc-go server: %d B", ours, plain)
	if ours > maxIdleConnHeap {
		t.Errorf("an idle native connection holds %d B of live heap (a plain grpc-go server's %d B); want at most %d B: is a 32 KiB read or write buffer held per connection?",
			ours, plain, maxIdleConnHeap)
	}
}

// connHeap serves start's server, opens conns connections to it from a
// child process, each with one Monitor stream registered and ended, and
// returns the live heap per connection they hold, after a collection,
// over the heap before.
func connHeap(t *testing.T, name string, conns int, start func(t *testing.T) heapServer) int64 {
	t.Helper()
	ctx := testContext(t)
	srv := start(t)
	before := liveHeap()
	r := startRouters(t, ctx, srv, conns, 0)
	defer r.stop()
	r.expect("warm")
	waitFor(t, ctx, "the warm-up streams ended", func() bool { return srv.open() == 0 })
	held := (liveHeap() - before) / int64(conns)
	if path := os.Getenv(heapProfileEnv); path != "" {
		writeHeapProfile(t, fmt.Sprintf("%s.conn.%s", path, name))
	}
	return held
}

// readyReader is the optional interface grpc-go's server transport reads
// a connection through when it has it.
type readyReader interface {
	ReadOnReady(bufSize int, pool mem.BufferPool) (b *[]byte, n int, err error)
}

func readyOf(t *testing.T, c net.Conn) readyReader {
	t.Helper()
	rr, ok := c.(readyReader)
	if !ok {
		t.Fatalf("%T has no ReadOnReady", c)
	}
	return rr
}

// countingPool hands out its one buffer and counts what it hands out and
// takes back.
type countingPool struct {
	buf        []byte
	gets, puts atomic.Int64
}

func (p *countingPool) Get(n int) *[]byte {
	p.gets.Add(1)
	p.buf = p.buf[:n]
	return &p.buf
}

func (p *countingPool) Put(*[]byte) { p.puts.Add(1) }

func (p *countingPool) held() int64 { return p.gets.Load() - p.puts.Load() }

// tcpPair returns both ends of a TCP connection on 127.0.0.1, closed when
// the test ends.
func tcpPair(t *testing.T) (server *net.TCPConn, client net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	client, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close() })
	c, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c.(*net.TCPConn), client
}

// ReadOnReady reads the replayed bytes first, then the peer's straight
// from the socket; holds no buffer while it waits; fails at a passed read
// deadline; says io.EOF when the peer closes; allocates nothing. Writes
// and CloseWrite reach the connection.
func TestReadOnReady(t *testing.T) {
	ctx := testContext(t)
	server, peer := tcpPair(t)
	rc := &replayConn{TCPConn: server, replay: []byte("replayed ")}
	c := withPooledReads(rc)
	rr := readyOf(t, c)
	pool := &countingPool{buf: make([]byte, 0, 1<<10)}
	read := func() (string, error) {
		b, n, err := rr.ReadOnReady(1<<10, pool)
		if b == nil {
			return "", err
		}
		s := string((*b)[:n])
		pool.Put(b)
		return s, err
	}
	expect := func(want string) {
		t.Helper()
		got, err := read()
		if err != nil || got != want {
			t.Fatalf("ReadOnReady read %q, %v; want %q", got, err, want)
		}
	}
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))

	if _, err := peer.Write([]byte("from the peer")); err != nil {
		t.Fatal(err)
	}
	expect("replayed ")
	expect("from the peer")
	if n := rc.readsAfter.Load(); n != 0 {
		t.Errorf("%d reads went through the connection's Read once it had nothing to replay; want none", n)
	}

	gets := pool.gets.Load()
	got := make(chan string, 1)
	go func() {
		s, err := read()
		if err != nil {
			s = err.Error()
		}
		got <- s
	}()
	waitFor(t, ctx, "ReadOnReady looked and waits", func() bool { return pool.gets.Load() > gets && pool.held() == 0 })
	if _, err := peer.Write([]byte("later")); err != nil {
		t.Fatal(err)
	}
	select {
	case s := <-got:
		if s != "later" {
			t.Fatalf("the waiting ReadOnReady read %q, want %q", s, "later")
		}
	case <-ctx.Done():
		t.Fatal("the waiting ReadOnReady read nothing")
	}

	if !raceEnabled {
		one := []byte{1}
		if allocs := testing.AllocsPerRun(20, func() {
			_, _ = peer.Write(one)
			expect("\x01")
		}); allocs != 0 {
			t.Errorf("a ReadOnReady allocates %v times, want 0", allocs)
		}
	}

	_ = c.SetReadDeadline(time.Now().Add(-time.Second))
	if _, err := read(); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("ReadOnReady past its read deadline: %v, want os.ErrDeadlineExceeded", err)
	}
	_ = c.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
	if _, err := read(); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("ReadOnReady waiting past its read deadline: %v, want os.ErrDeadlineExceeded", err)
	}
	if h := pool.held(); h != 0 {
		t.Errorf("%d buffers held after failed reads, want 0", h)
	}
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))

	if _, err := c.Write([]byte("answer")); err != nil {
		t.Fatal(err)
	}
	cw, ok := c.(interface{ CloseWrite() error })
	if !ok {
		t.Fatalf("%T has no CloseWrite", c)
	}
	if err := cw.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	_ = peer.SetReadDeadline(time.Now().Add(10 * time.Second))
	if b, err := io.ReadAll(peer); err != nil || string(b) != "answer" {
		t.Errorf("the peer read %q, %v; want %q and EOF", b, err, "answer")
	}

	_ = peer.Close()
	if s, err := read(); err != io.EOF {
		t.Errorf("ReadOnReady after the peer closed: %q, %v; want io.EOF", s, err)
	}
	if h := pool.held(); h != 0 {
		t.Errorf("%d buffers held at EOF, want 0", h)
	}
}

// While the connection has bytes to replay, ReadOnReady reads them
// through it, however many reads that takes.
func TestReadOnReadyReplaysThroughTheConnection(t *testing.T) {
	server, peer := tcpPair(t)
	rc := &replayConn{TCPConn: server, replay: []byte("0123456789")}
	rr := readyOf(t, withPooledReads(rc))
	pool := &countingPool{buf: make([]byte, 0, 4)}
	if _, err := peer.Write([]byte("after")); err != nil {
		t.Fatal(err)
	}
	_ = server.SetReadDeadline(time.Now().Add(10 * time.Second))
	var got []byte
	for len(got) < len("0123456789after") {
		b, n, err := rr.ReadOnReady(4, pool)
		if err != nil {
			t.Fatalf("ReadOnReady after %q: %v", got, err)
		}
		got = append(got, (*b)[:n]...)
		pool.Put(b)
	}
	if string(got) != "0123456789after" {
		t.Fatalf("read %q, want %q", got, "0123456789after")
	}
}

// Only a connection that replays bytes before a socket of the net
// package's own is given ReadOnReady: grpc-go reads a bare *net.TCPConn
// its own way, and another connection's bytes may not be the socket's.
func TestPooledReadsOnlyOverSockets(t *testing.T) {
	server, _ := tcpPair(t)
	if c := withPooledReads(server); c != net.Conn(server) {
		t.Errorf("a bare *net.TCPConn became %T", c)
	}
	p1, p2 := net.Pipe()
	defer p1.Close()
	defer p2.Close()
	overPipe := pipeReplayConn{p1}
	if c := withPooledReads(overPipe); c != net.Conn(overPipe) {
		t.Errorf("a connection over a pipe became %T", c)
	}
}

// pipeReplayConn is a connection with nothing to replay over a net.Pipe.
type pipeReplayConn struct{ net.Conn }

func (c pipeReplayConn) Original() (net.Conn, bool) { return c.Conn, true }
