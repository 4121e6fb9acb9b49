package connsplit

import (
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"

	"golang.org/x/net/http2"
)

// conn is a connection handed over: its Read first replays what the look
// read, and on an HTTP/2 connection drops the client's ACK of the empty
// SETTINGS the look sent. Every other method is the original's.
type conn struct {
	net.Conn

	// plain is set once nothing is left to replay or drop: Read is then
	// the original's, with no lock.
	plain atomic.Bool

	mu      sync.Mutex
	replay  []byte     // read while looking, not yet filtered
	filter  *ackFilter // nil on HTTP/1
	pending []byte     // filtered, not yet returned
	scratch []byte
	err     error // a read error held back behind pending bytes
}

// closeWriteConn is a conn over a connection with CloseWrite (TCP), which
// net/http calls before closing an HTTP/1 connection.
type closeWriteConn struct {
	*conn
	cw interface{ CloseWrite() error }
}

// CloseWrite shuts down the writing side of the connection.
func (c closeWriteConn) CloseWrite() error { return c.cw.CloseWrite() }

// wrap returns c reading read first; h2 says the look sent c its empty
// SETTINGS, whose ACK must not reach the server.
func wrap(c net.Conn, read []byte, h2 bool) net.Conn {
	w := &conn{Conn: c, replay: read}
	if h2 {
		w.filter = &ackFilter{preface: len(clientPreface)}
	}
	w.settle()
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		return closeWriteConn{conn: w, cw: cw}
	}
	return w
}

// settle sets plain once there is nothing left to replay or drop.
func (c *conn) settle() {
	if len(c.replay) == 0 && len(c.pending) == 0 && c.err == nil && (c.filter == nil || c.filter.done) {
		c.replay, c.pending, c.scratch, c.filter = nil, nil, nil, nil
		c.plain.Store(true)
	}
}

// Original returns the connection accepted, and whether Read now reads
// straight from it: nothing is left to replay or drop. From then on a
// server may read the original its own way; before, it must read c.
func (c *conn) Original() (original net.Conn, direct bool) {
	return c.Conn, c.plain.Load()
}

// Read reads what the client sent, less the ACK of the look's SETTINGS.
func (c *conn) Read(b []byte) (int, error) {
	if c.plain.Load() {
		return c.Conn.Read(b)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.plain.Load() {
		return c.Conn.Read(b)
	}
	if len(b) == 0 {
		return 0, nil
	}
	for {
		if len(c.pending) > 0 {
			n := copy(b, c.pending)
			c.pending = c.pending[n:]
			c.settle()
			return n, nil
		}
		if c.err != nil {
			err := c.err
			c.err = nil
			c.settle()
			return 0, err
		}
		if len(c.replay) > 0 {
			if c.filter == nil || c.filter.done {
				n := copy(b, c.replay)
				c.replay = c.replay[n:]
				c.settle()
				return n, nil
			}
			c.pending = c.filter.feed(c.pending[:0], c.replay)
			c.replay = nil
			continue
		}
		if c.filter == nil || c.filter.done {
			c.settle()
			return c.Conn.Read(b)
		}
		if cap(c.scratch) < len(b) {
			c.scratch = make([]byte, len(b))
		}
		n, err := c.Conn.Read(c.scratch[:len(b)])
		c.pending = c.filter.feed(c.pending[:0], c.scratch[:n])
		if err != nil {
			if errors.Is(err, io.EOF) {
				// Nothing follows: what was held back as a partial
				// frame header is the client's last bytes.
				c.pending = append(c.pending, c.filter.held()...)
			}
			if len(c.pending) == 0 {
				return 0, err
			}
			// Return the bytes first; a passed deadline will fail the
			// next Read again by itself, other errors are kept for it.
			if !errors.Is(err, os.ErrDeadlineExceeded) {
				c.err = err
			}
		}
	}
}

// ackFilter drops, from the bytes a client sends after its preface, the
// first SETTINGS frame with the ACK flag: the ACK of the look's empty
// SETTINGS. Until then it reads only frame headers (9 bytes) and passes
// payloads through; afterwards it passes everything.
//
// The chosen server must not see that ACK: net/http's HTTP/2 server
// (net/http h2_bundle.go processSettings in Go 1.26, and
// golang.org/x/net v0.62.0 http2/server.go processSettings) ends the
// connection with PROTOCOL_ERROR ("ack_mystery") on an ACK for SETTINGS
// it never sent. The client ACKs SETTINGS frames in the order it receives
// them, and the look's came first, so the first ACK is the look's.
type ackFilter struct {
	preface int     // preface bytes still to pass
	hdr     [9]byte // a frame header (RFC 9113 §4.1)
	nhdr    int     // bytes of hdr read
	payload int     // bytes of the current frame's payload still to pass
	done    bool
}

// feed appends to dst what of src the server must read, holding back a
// frame header until it is whole.
func (f *ackFilter) feed(dst, src []byte) []byte {
	for len(src) > 0 {
		switch {
		case f.done:
			return append(dst, src...)
		case f.preface > 0:
			n := min(f.preface, len(src))
			dst, src, f.preface = append(dst, src[:n]...), src[n:], f.preface-n
		case f.payload > 0:
			n := min(f.payload, len(src))
			dst, src, f.payload = append(dst, src[:n]...), src[n:], f.payload-n
		default:
			n := copy(f.hdr[f.nhdr:], src)
			src, f.nhdr = src[n:], f.nhdr+n
			if f.nhdr < len(f.hdr) {
				continue
			}
			f.nhdr = 0
			length := int(f.hdr[0])<<16 | int(f.hdr[1])<<8 | int(f.hdr[2])
			typ, flags := http2.FrameType(f.hdr[3]), http2.Flags(f.hdr[4])
			stream := (uint32(f.hdr[5])<<24 | uint32(f.hdr[6])<<16 | uint32(f.hdr[7])<<8 | uint32(f.hdr[8])) & (1<<31 - 1)
			// A malformed ACK (with a payload, or on a stream) is not
			// ours to judge: it passes, and the server refuses it.
			if typ == http2.FrameSettings && flags.Has(http2.FlagSettingsAck) && length == 0 && stream == 0 {
				f.done = true
				continue
			}
			dst = append(dst, f.hdr[:]...)
			f.payload = length
		}
	}
	return dst
}

// held returns, and forgets, the bytes of a frame header not yet whole.
func (f *ackFilter) held() []byte {
	h := f.hdr[:f.nhdr]
	f.nhdr = 0
	return h
}
