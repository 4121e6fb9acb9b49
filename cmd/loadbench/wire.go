package main

import (
	"context"
	"encoding/binary"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2"
)

// socketClock times each report where it leaves the socket on the client's
// side, before grpc-go decodes it and wakes the stream's goroutine. With a
// thousand streams in one client process, a fire's burst wakes a thousand
// goroutines at once, and the order they run in is the client's, not the
// server's: the receipt times the other rows use include that, which a
// router with one stream of its own never pays. Gaps between a stream's
// DATA frames at the socket leave it out.
type socketClock struct {
	inWindow *atomic.Bool
	interval time.Duration

	mu    sync.Mutex
	conns []*timedConn
}

// dial opens a TCP connection whose reads are timed.
func (s *socketClock) dial(ctx context.Context, addr string) (net.Conn, error) {
	c, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	tc := &timedConn{Conn: c, clock: s, arrivals: map[uint32][]time.Time{}}
	s.mu.Lock()
	s.conns = append(s.conns, tc)
	s.mu.Unlock()
	return tc, nil
}

// intervalErrors is every gap's distance from the interval, per stream,
// between DATA frames that completed inside the window.
func (s *socketClock) intervalErrors() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	var errs []time.Duration
	for _, c := range s.conns {
		c.mu.Lock()
		for _, at := range c.arrivals {
			errs = appendIntervalErrors(errs, at, s.interval)
		}
		c.mu.Unlock()
	}
	return errs
}

// timedConn notes when each stream's DATA frame from the server was read
// in full.
type timedConn struct {
	net.Conn
	clock *socketClock

	mu       sync.Mutex
	frames   frameScanner
	arrivals map[uint32][]time.Time // per stream, inside the window
}

func (c *timedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.parse(p[:n], time.Now())
	}
	return n, err
}

func (c *timedConn) parse(b []byte, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.frames.feed(b, func(h frameHeader) {
		if h.typ == http2.FrameData && h.length > 0 { // not END_STREAM alone
			c.arrived(h.stream, now)
		}
	})
}

// arrived records a stream's DATA frame. A message split over frames read
// within half an interval counts once, when its last frame arrived.
func (c *timedConn) arrived(stream uint32, now time.Time) {
	if !c.clock.inWindow.Load() {
		return
	}
	at := c.arrivals[stream]
	if n := len(at); n > 0 && now.Sub(at[n-1]) < c.clock.interval/2 {
		at[n-1] = now
		return
	}
	c.arrivals[stream] = append(at, now)
}

// frameHeader is what a frameScanner keeps of an HTTP/2 frame.
type frameHeader struct {
	length int
	typ    http2.FrameType
	flags  http2.Flags
	stream uint32
}

// frameScanner walks HTTP/2 frames (after any preface) fed in pieces of any
// size, keeping only the header of the frame it is in.
type frameScanner struct {
	header []byte // a frame header read in part
	cur    frameHeader
	left   int // payload bytes of cur not read yet
}

// feed scans b and calls done for each frame whose last byte b holds.
func (s *frameScanner) feed(b []byte, done func(frameHeader)) {
	const headerLen = 9
	for len(b) > 0 {
		if s.left == 0 {
			take := min(headerLen-len(s.header), len(b))
			s.header, b = append(s.header, b[:take]...), b[take:]
			if len(s.header) < headerLen {
				return
			}
			h := s.header
			s.cur = frameHeader{
				length: int(h[0])<<16 | int(h[1])<<8 | int(h[2]),
				typ:    http2.FrameType(h[3]), flags: http2.Flags(h[4]),
				stream: binary.BigEndian.Uint32(h[5:]) & (1<<31 - 1),
			}
			s.header, s.left = s.header[:0], s.cur.length
			if s.left == 0 {
				done(s.cur)
				continue
			}
		}
		take := min(s.left, len(b))
		s.left, b = s.left-take, b[take:]
		if s.left == 0 {
			done(s.cur)
		}
	}
}
