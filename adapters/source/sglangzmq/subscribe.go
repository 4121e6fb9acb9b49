package sglangzmq

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"sync"
	"time"

	"github.com/go-zeromq/zmq4"
	"github.com/go-zeromq/zmq4/transport"

	"github.com/loadreporter/loadreporter/domain"
)

// dialTimeout bounds one TCP connect to a rank's socket.
const dialTimeout = 5 * time.Second

// transportName is our TCP transport in zmq4's registry; see guardedTCP.
const transportName = "sglangzmq+tcp"

var (
	registerOnce sync.Once
	registerErr  error
)

// registerTransport adds guardedTCP to zmq4's (process-wide) transport
// registry, once.
func registerTransport() error {
	registerOnce.Do(func() { registerErr = zmq4.RegisterTransport(transportName, guardedTCP{}) })
	return registerErr
}

// guardedTCP is zmq4's TCP transport with two changes. A connection is
// closed as soon as its socket's context ends: zmq4 performs the ZMTP
// handshake with no deadline and closes only connections that finished
// it, so a peer that accepts and never speaks would otherwise hold a dial,
// and with it Close, forever. And a connection is closed when the peer
// announces a frame over maxFrameBytes: zmq4 allocates whatever size a
// frame header says (up to 2^63 bytes, which panics, out of reach of any
// recover), so one bad header from whatever listens on the load port would
// otherwise end the process.
type guardedTCP struct{}

func (guardedTCP) Dial(ctx context.Context, d transport.Dialer, addr string) (net.Conn, error) {
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	g := &guardedConn{Conn: c}
	g.refused, _ = ctx.Value(refusedKey{}).(func(error))
	g.stop = context.AfterFunc(ctx, func() { _ = c.Close() })
	return g, nil
}

// refusedKey carries, in a socket's context, what its connections call
// when the frame guard refuses a frame: zmq4 does not say why a
// connection ended, nor reliably redial it.
type refusedKey struct{}

func (guardedTCP) Listen(context.Context, string) (net.Listener, error) {
	return nil, errors.New("sglangzmq: the transport only dials")
}

func (guardedTCP) Addr(ep string) (string, error) {
	host, port, err := net.SplitHostPort(ep)
	if err != nil {
		return "", err
	}
	return net.JoinHostPort(host, port), nil
}

type guardedConn struct {
	net.Conn
	stop    func() bool
	guard   frameGuard
	refused func(error) // from the socket's context; may be nil
}

// Read passes what the peer sent through the frame guard; a frame over
// the bound closes the connection and tells the socket's owner.
func (g *guardedConn) Read(p []byte) (int, error) {
	n, err := g.Conn.Read(p)
	if ferr := g.guard.scan(p[:n]); ferr != nil {
		_ = g.Conn.Close()
		if g.refused != nil {
			g.refused(ferr)
		}
		return 0, ferr
	}
	return n, err
}

// maxFrameBytes bounds one ZMTP frame a rank's socket may announce. A
// LoadStat is some 100 bytes; the handshake's frames are smaller still.
const maxFrameBytes = 1 << 20

// frameGuard follows the ZMTP 3 byte stream a peer sends (RFC 23: a
// 64-byte greeting, then frames of a flags byte, a 1-byte or, with the
// LONG flag, an 8-byte big-endian size, and the body) just far enough to
// read each frame's announced size.
type frameGuard struct {
	greetingDone int    // greeting bytes seen, up to zmtpGreetingBytes
	sizeLeft     int    // size bytes still to read; 0: the next byte is a flags byte
	size         uint64 // the size read so far
	bodyLeft     uint64 // body bytes still to pass
}

const (
	zmtpGreetingBytes = 64
	zmtpFlagLong      = 0x02
)

func (f *frameGuard) scan(p []byte) error {
	for len(p) > 0 {
		switch {
		case f.greetingDone < zmtpGreetingBytes:
			n := min(zmtpGreetingBytes-f.greetingDone, len(p))
			f.greetingDone += n
			p = p[n:]
		case f.bodyLeft > 0:
			n := min(uint64(len(p)), f.bodyLeft)
			f.bodyLeft -= n
			p = p[n:]
		case f.sizeLeft == 0: // a flags byte
			f.sizeLeft, f.size = 1, 0
			if p[0]&zmtpFlagLong != 0 {
				f.sizeLeft = 8
			}
			p = p[1:]
		default:
			f.size = f.size<<8 | uint64(p[0])
			p = p[1:]
			if f.sizeLeft--; f.sizeLeft == 0 {
				if f.size > maxFrameBytes {
					return fmt.Errorf("the peer announced a ZMTP frame of %d bytes, over the %d a load socket may send", f.size, maxFrameBytes)
				}
				f.bodyLeft = f.size
			}
		}
	}
	return nil
}

func (g *guardedConn) Close() error {
	g.stop()
	return g.Conn.Close()
}

// quiet drops zmq4's log lines; what matters reaches Pull and the Observer.
var quiet = log.New(io.Discard, "", 0)

// rankState is what the Source knows about one rank's socket. The fields
// below the line are guarded by Source.mu.
type rankState struct {
	index    int    // the socket's rank: port − base
	endpoint string // tcp://host:port, for messages
	dial     string // the same address on our transport
	topic    string

	heard   time.Time // arrival of the latest message of any kind
	have    bool      // a good message has arrived
	stat    loadStat  // the latest good message
	at      time.Time // its arrival
	err     error     // the latest message did not decode; nil once a good one follows
	seq     uint64
	haveSeq bool
	connErr string // why the latest dial failed; "" once a message arrives
}

// runRank keeps one rank subscribed until ctx ends: one socket at a time,
// replaced when the watchdog finds it silent or its dial fails.
func (s *Source) runRank(ctx context.Context, r *rankState) {
	for {
		s.session(ctx, r)
		if ctx.Err() != nil {
			return
		}
		if f := s.cfg.Observer.Resubscribed; f != nil {
			f(r.index)
		}
		// Real time, like zmq4's own pause between dials: this is the
		// transport's back-off, not a load timestamp.
		t := time.NewTimer(s.cfg.ReconnectInterval)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// session runs one SUB socket for r until ctx ends, its dial fails, or the
// watchdog finds r silent for ResubscribeAfter. Within a session, zmq4
// redials a lost connection by itself (WithAutomaticReconnect, with no
// limit on attempts) and sends the subscription again on the new
// connection, which is what a scheduler restart needs.
func (s *Source) session(parent context.Context, r *rankState) {
	ctx, cancel := context.WithCancel(parent)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		s.watch(ctx, cancel, r)
	}()
	// A refused frame is this rank's error until a good message comes,
	// and the session starts over at once (zmq4 often does not redial a
	// connection the guard closed; the watchdog would take
	// ResubscribeAfter).
	sockCtx := context.WithValue(ctx, refusedKey{}, func(err error) {
		s.frameRefused(r, err)
		cancel()
	})
	sock := zmq4.NewSub(sockCtx,
		zmq4.WithAutomaticReconnect(true),
		zmq4.WithDialerMaxRetries(-1),
		zmq4.WithDialerRetry(s.cfg.ReconnectInterval),
		zmq4.WithDialerTimeout(dialTimeout),
		zmq4.WithLogger(quiet),
	)
	defer func() {
		_ = sock.Close()
		cancel()
		wg.Wait()
	}()
	// Subscribing before dialling: zmq4 sends the subscription on every
	// connection it adds, the first one and each redial's.
	if err := sock.SetOption(zmq4.OptionSubscribe, r.topic); err != nil {
		s.dialFailed(ctx, r, err)
		return
	}
	if err := sock.Dial(r.dial); err != nil {
		s.dialFailed(ctx, r, err)
		return
	}
	for {
		msg, err := sock.Recv()
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			continue // a lost connection; zmq4 is dialling again
		}
		if msg.Type == zmq4.CmdMsg {
			continue
		}
		s.receive(r, msg.Frames)
	}
}

// watch cancels the session when r has heard nothing for ResubscribeAfter
// on the Source's clock.
func (s *Source) watch(ctx context.Context, cancel context.CancelFunc, r *rankState) {
	since := s.cfg.Clock.Now()
	for {
		s.mu.Lock()
		if r.heard.After(since) {
			since = r.heard
		}
		s.mu.Unlock()
		t := s.cfg.Clock.NewTimer(since.Add(s.cfg.ResubscribeAfter))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C():
		}
		s.mu.Lock()
		silent := !r.heard.After(since)
		s.mu.Unlock()
		if silent {
			cancel()
			return
		}
	}
}

// frameRefused records that r's peer sent a frame the guard refused.
func (s *Source) frameRefused(r *rankState, err error) {
	s.mu.Lock()
	r.err = domain.Errorf(domain.CodeInvalidSnapshot, "rank %d (%s): %s", r.index, r.endpoint, err)
	s.mu.Unlock()
}

func (s *Source) dialFailed(ctx context.Context, r *rankState, err error) {
	if ctx.Err() != nil {
		return
	}
	s.mu.Lock()
	r.connErr = domain.Shorten(err.Error(), 200)
	s.mu.Unlock()
}

// receive records one message from r: the latest good LoadStat with its
// arrival time, or what was wrong with it, and what its sequence number
// says about messages lost or a restarted scheduler.
func (s *Source) receive(r *rankState, f [][]byte) {
	now := s.cfg.Clock.Now()
	seq, ours, err := frames(f, r.topic)
	code := domain.CodeSourceFailed
	var st loadStat
	if err == nil && ours {
		if st, err = decodeLoadStat(f[2]); err != nil {
			code = domain.CodeInvalidSnapshot
		}
	}
	var reset bool
	var missed uint64
	s.mu.Lock()
	r.heard = now
	if err == nil && !ours {
		s.mu.Unlock()
		return
	}
	if ours {
		switch {
		case !r.haveSeq: // the first message compares with nothing
		case seq <= r.seq:
			reset = true
		case seq-r.seq > 1:
			missed = seq - r.seq - 1
		}
		r.seq, r.haveSeq = seq, true
	}
	r.connErr = ""
	if err != nil {
		err = domain.Errorf(code, "rank %d (%s): %s", r.index, r.endpoint, err)
		r.err = err
	} else {
		r.stat, r.at, r.have, r.err = st, now, true, nil
	}
	s.mu.Unlock()

	obs := s.cfg.Observer
	switch {
	case reset && obs.SequenceReset != nil:
		obs.SequenceReset(r.index)
	case missed > 0 && obs.SequenceGap != nil:
		obs.SequenceGap(r.index, missed)
	}
	if err != nil && obs.BadMessage != nil {
		obs.BadMessage(r.index, err)
	}
}
