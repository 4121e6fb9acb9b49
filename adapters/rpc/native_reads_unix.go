//go:build unix

package rpc

import (
	"io"
	"net"
	"os"
	"syscall"

	"google.golang.org/grpc/mem"
)

// withPooledReads returns c with ReadOnReady when it replays bytes before
// a socket it can read itself, else c.
func withPooledReads(c net.Conn) net.Conn {
	rc, ok := c.(replayingConn)
	if !ok {
		return c
	}
	orig, _ := rc.Original()
	// Only the net package's own sockets: another syscall.Conn (a TLS
	// connection's, say) may carry bytes its Read transforms.
	switch orig.(type) {
	case *net.TCPConn, *net.UnixConn:
	default:
		return c
	}
	raw, err := orig.(syscall.Conn).SyscallConn()
	if err != nil {
		return c
	}
	p := &pooledConn{replayingConn: rc, raw: raw}
	p.onReadable = p.readReadable
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		return pooledCloseWriteConn{pooledConn: p, cw: cw}
	}
	return p
}

// pooledConn is a replayingConn with grpc-go's optional ReadOnReady
// (google.golang.org/grpc/internal/transport/readyreader.Reader), which
// grpc-go's server transport reads through when a connection has it.
// Every other method is the connection's. ReadOnReady is called from one
// goroutine at a time, the transport's reader.
type pooledConn struct {
	replayingConn
	raw    syscall.RawConn // the original's, read once direct
	direct bool

	// The read under way, kept here so that a read allocates nothing:
	// onReadable is readReadable, bound once.
	size       int
	pool       mem.BufferPool
	buf        *[]byte
	n          int
	err        error
	onReadable func(fd uintptr) bool
}

// ReadOnReady waits until the connection has bytes to read, then reads up
// to size of them into a buffer from pool, which it returns with them;
// while it waits it holds no buffer. Bytes the connection still replays
// come first, read through it.
func (c *pooledConn) ReadOnReady(size int, pool mem.BufferPool) (*[]byte, int, error) {
	if !c.direct {
		if _, c.direct = c.Original(); !c.direct {
			return c.readThrough(size, pool)
		}
	}
	c.size, c.pool = size, pool
	// RawConn.Read calls onReadable at once, and again each time the
	// socket becomes readable while it returns false; it fails on a
	// closed connection or a passed read deadline.
	err := c.raw.Read(c.onReadable)
	buf, n, readErr := c.buf, c.n, c.err
	c.pool, c.buf, c.err = nil, nil, nil
	switch {
	case err != nil:
		return nil, 0, err
	case readErr != nil:
		return nil, 0, readErr
	case n == 0:
		pool.Put(buf)
		return nil, 0, io.EOF // the peer closed: syscall.Read says so with 0
	}
	return buf, n, nil
}

// readReadable takes a buffer and reads into it without blocking; it
// reports false, the buffer given back, when nothing was there to read.
func (c *pooledConn) readReadable(fd uintptr) bool {
	buf := c.pool.Get(c.size)
	n, err := syscall.Read(int(fd), *buf)
	for err == syscall.EINTR {
		n, err = syscall.Read(int(fd), *buf)
	}
	if err != nil {
		c.pool.Put(buf)
		if err == syscall.EAGAIN || err == syscall.EWOULDBLOCK {
			return false
		}
		c.err = os.NewSyscallError("read", err)
		return true
	}
	c.buf, c.n = buf, n
	return true
}

// readThrough reads what the connection replays into a buffer from pool.
func (c *pooledConn) readThrough(size int, pool mem.BufferPool) (*[]byte, int, error) {
	buf := pool.Get(size)
	n, err := c.replayingConn.Read(*buf)
	if n == 0 {
		pool.Put(buf)
		return nil, 0, err
	}
	return buf, n, err
}

// pooledCloseWriteConn is a pooledConn over a connection with CloseWrite.
type pooledCloseWriteConn struct {
	*pooledConn
	cw interface{ CloseWrite() error }
}

// CloseWrite shuts down the writing side of the connection.
func (c pooledCloseWriteConn) CloseWrite() error { return c.cw.CloseWrite() }
