package main

import (
	"context"
	"encoding/binary"
	"net"
	"sync"
	"sync/atomic"
	"time"
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
			for i := 1; i < len(at); i++ {
				d := at[i].Sub(at[i-1]) - s.interval
				errs = append(errs, max(d, -d))
			}
		}
		c.mu.Unlock()
	}
	return errs
}

// timedConn parses the HTTP/2 frames the server writes (frame headers
// only) and notes when each stream's DATA frame was read in full.
type timedConn struct {
	net.Conn
	clock *socketClock

	mu       sync.Mutex
	header   []byte // a frame header read in part
	left     int    // payload bytes of the current frame not read yet
	isData   bool
	stream   uint32
	arrivals map[uint32][]time.Time // per stream, inside the window
}

func (c *timedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.parse(p[:n], time.Now())
	}
	return n, err
}

const frameHeaderLen = 9

func (c *timedConn) parse(b []byte, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for len(b) > 0 {
		if c.left == 0 && len(c.header) < frameHeaderLen {
			take := min(frameHeaderLen-len(c.header), len(b))
			c.header, b = append(c.header, b[:take]...), b[take:]
			if len(c.header) < frameHeaderLen {
				return
			}
			h := c.header
			c.header = c.header[:0]
			c.left = int(h[0])<<16 | int(h[1])<<8 | int(h[2])
			c.isData = h[3] == 0 // DATA
			c.stream = binary.BigEndian.Uint32(h[5:]) & (1<<31 - 1)
			if c.left == 0 {
				continue // an empty frame: END_STREAM alone, or a SETTINGS ack
			}
		}
		take := min(c.left, len(b))
		c.left, b = c.left-take, b[take:]
		if c.left == 0 && c.isData {
			c.arrived(c.stream, now)
		}
	}
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
