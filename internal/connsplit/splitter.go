package connsplit

import (
	"errors"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v5"

	"github.com/loadreporter/loadreporter/domain"
	"github.com/loadreporter/loadreporter/internal/loglimit"
)

// Defaults and bounds of Options.
const (
	// DefaultFirstRequestTimeout matches grpc-go's server handshake
	// deadline (ConnectionTimeout, 120 s in google.golang.org/grpc
	// v1.85.0 server.go defaultServerOptions): a grpc-go channel connects
	// eagerly and may send its first RPC later, so the wait is long; what
	// it costs is one goroutine and the bytes read so far per silent
	// connection, which net/http's own timeouts take over afterwards.
	DefaultFirstRequestTimeout = 2 * time.Minute
	// DefaultFirstBytesTimeout is net/http's header timeout as the port
	// sets it: a connection that sends nothing is let go no later than
	// net/http alone would have.
	DefaultFirstBytesTimeout = 10 * time.Second
	// DefaultMaxPeekBytes bounds what is buffered while looking: far more
	// than a client preface, its SETTINGS and a gRPC request's HEADERS.
	DefaultMaxPeekBytes = 64 << 10
	// MinMaxPeekBytes and MaxMaxPeekBytes bound Options.MaxPeekBytes.
	MinMaxPeekBytes = 1 << 10
	MaxMaxPeekBytes = 16 << 20
)

// Options configure a Splitter; the zero value takes every default.
type Options struct {
	// FirstRequestTimeout is how long a new connection may take to show
	// what it is: its first bytes (HTTP/1 or the HTTP/2 preface) and, for
	// HTTP/2, its first HEADERS frame. When it passes, the connection goes
	// to Other() as it is, and net/http applies its own timeouts. 0 takes
	// DefaultFirstRequestTimeout.
	FirstRequestTimeout time.Duration
	// FirstBytesTimeout is how long a new connection may take to send its
	// first bytes, up to the whole HTTP/2 preface; past it, it goes to
	// Other() as it is (net/http's ReadHeaderTimeout then bounds an HTTP/1
	// request). 0 takes DefaultFirstBytesTimeout; it must not exceed
	// FirstRequestTimeout.
	FirstBytesTimeout time.Duration
	// MaxPeekBytes bounds what is buffered while looking; a connection
	// that needs more goes to Other(). 0 takes DefaultMaxPeekBytes;
	// otherwise within [MinMaxPeekBytes, MaxMaxPeekBytes].
	MaxPeekBytes int
	// Logger receives a debug line per sorted connection and a warning
	// (one a second at most) per failed Accept; nil discards them.
	Logger *slog.Logger
}

// withDefaults validates o and fills in its defaults.
func (o Options) withDefaults() (Options, error) {
	switch {
	case o.FirstRequestTimeout < 0:
		return o, domain.Errorf(domain.CodeInvalidArgument,
			"connsplit: Options.FirstRequestTimeout must be > 0 (0 takes the default %s), got %s", DefaultFirstRequestTimeout, o.FirstRequestTimeout)
	case o.MaxPeekBytes != 0 && (o.MaxPeekBytes < MinMaxPeekBytes || o.MaxPeekBytes > MaxMaxPeekBytes):
		return o, domain.Errorf(domain.CodeInvalidArgument,
			"connsplit: Options.MaxPeekBytes must be within [%d, %d] (0 takes the default %d), got %d", MinMaxPeekBytes, MaxMaxPeekBytes, DefaultMaxPeekBytes, o.MaxPeekBytes)
	}
	if o.FirstRequestTimeout == 0 {
		o.FirstRequestTimeout = DefaultFirstRequestTimeout
	}
	if o.FirstBytesTimeout == 0 {
		o.FirstBytesTimeout = min(DefaultFirstBytesTimeout, o.FirstRequestTimeout)
	}
	if o.FirstBytesTimeout < 0 || o.FirstBytesTimeout > o.FirstRequestTimeout {
		return o, domain.Errorf(domain.CodeInvalidArgument,
			"connsplit: Options.FirstBytesTimeout must be > 0 and at most FirstRequestTimeout %s (0 takes the default %s), got %s",
			o.FirstRequestTimeout, DefaultFirstBytesTimeout, o.FirstBytesTimeout)
	}
	if o.MaxPeekBytes == 0 {
		o.MaxPeekBytes = DefaultMaxPeekBytes
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o, nil
}

// Splitter accepts connections on a listener and hands each to GRPC() or
// Other() by its first request. Its methods are safe for concurrent use.
type Splitter struct {
	ln    net.Listener
	opt   Options
	grpc  *listener
	other *listener

	acceptLog loglimit.Limiter
	serving   atomic.Bool
	done      chan struct{} // closed by Close

	mu      sync.Mutex
	closed  bool
	looking map[net.Conn]struct{} // connections not yet handed over
	lookers sync.WaitGroup        // one per connection in looking
}

// New returns a Splitter over ln; it accepts nothing before Serve.
func New(ln net.Listener, o Options) (*Splitter, error) {
	if ln == nil {
		return nil, domain.Errorf(domain.CodeInvalidArgument, "connsplit: the listener is nil")
	}
	o, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	return &Splitter{
		ln:        ln,
		opt:       o,
		grpc:      newListener(ln.Addr()),
		other:     newListener(ln.Addr()),
		acceptLog: loglimit.Limiter{Every: time.Second},
		done:      make(chan struct{}),
		looking:   map[net.Conn]struct{}{},
	}, nil
}

// GRPC returns the listener whose connections' first request is native
// gRPC, for grpc.Server.Serve. Closing it closes only it: connections
// sorted to it afterwards are closed.
func (s *Splitter) GRPC() net.Listener { return s.grpc }

// Other returns the listener of every other connection (HTTP/1.x, HTTP/2
// whose first request is not native gRPC, connections that showed nothing
// within FirstRequestTimeout), for an http.Server serving HTTP/1 and
// unencrypted HTTP/2. Closing it closes only it.
func (s *Splitter) Other() net.Listener { return s.other }

// Counts returns how many connections GRPC() and Other() have accepted.
func (s *Splitter) Counts() (grpc, other uint64) {
	return s.grpc.accepted.Load(), s.other.accepted.Load()
}

// Serve accepts connections on the listener until it fails or is closed,
// retrying temporary failures with backoff as net/http does. It returns
// nil after Close, else the Accept error, and the Splitter is closed
// when it returns. It may be called once.
func (s *Splitter) Serve() error {
	if !s.serving.CompareAndSwap(false, true) {
		return domain.Errorf(domain.CodeFailedPrecondition, "connsplit: Serve called twice")
	}
	// net/http's Server.Serve waits 5 ms after a temporary Accept error,
	// doubling to 1 s.
	retry := backoff.ExponentialBackOff{InitialInterval: 5 * time.Millisecond, Multiplier: 2, MaxInterval: time.Second}
	for {
		c, err := s.ln.Accept()
		if err != nil {
			if s.isClosed() {
				return nil
			}
			if t, ok := err.(interface{ Temporary() bool }); ok && t.Temporary() {
				wait := retry.NextBackOff()
				if ok, held := s.acceptLog.Allow(time.Now()); ok {
					s.opt.Logger.Warn("connsplit: accept failed; retrying", "addr", s.ln.Addr().String(), "error", err, "retry_in", wait, "suppressed", held)
				}
				t := time.NewTimer(wait)
				select {
				case <-t.C:
				case <-s.done:
					t.Stop()
					return nil
				}
				continue
			}
			_ = s.Close()
			return err
		}
		retry.Reset()
		s.start(c)
	}
}

// start looks at c in a goroutine of its own, unless the Splitter is
// closed.
func (s *Splitter) start(c net.Conn) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		_ = c.Close()
		return
	}
	s.looking[c] = struct{}{}
	s.lookers.Add(1)
	s.mu.Unlock()
	go func() {
		defer s.lookers.Done()
		s.look(c)
	}()
}

// forget drops c from the connections being looked at.
func (s *Splitter) forget(c net.Conn) {
	s.mu.Lock()
	delete(s.looking, c)
	s.mu.Unlock()
}

func (s *Splitter) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// Close closes the listener, GRPC() and Other() (their Accept returns
// net.ErrClosed) and the connections still being looked at, and returns
// once their goroutines have ended. Connections already handed over
// belong to their server. It returns the listener's Close error.
func (s *Splitter) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	looking := make([]net.Conn, 0, len(s.looking))
	for c := range s.looking {
		looking = append(looking, c)
	}
	s.mu.Unlock()

	close(s.done)
	err := s.ln.Close()
	if errors.Is(err, net.ErrClosed) {
		err = nil
	}
	_ = s.grpc.Close()
	_ = s.other.Close()
	for _, c := range looking {
		_ = c.Close()
	}
	s.lookers.Wait()
	return err
}

// listener is GRPC() or Other(): its Accept takes the connections the
// Splitter sorted to it.
type listener struct {
	addr     net.Addr
	conns    chan net.Conn // unbuffered: a connection is handed over only to a running Accept
	done     chan struct{}
	once     sync.Once
	accepted atomic.Uint64
}

func newListener(addr net.Addr) *listener {
	return &listener{addr: addr, conns: make(chan net.Conn), done: make(chan struct{})}
}

// Accept returns the next connection sorted to l, or an error wrapping
// net.ErrClosed once l or its Splitter is closed.
func (l *listener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		// Counted here, before the server sees c, so that Counts never
		// lags behind what a server has answered.
		l.accepted.Add(1)
		return c, nil
	case <-l.done:
		return nil, &net.OpError{Op: "accept", Net: l.addr.Network(), Addr: l.addr, Err: net.ErrClosed}
	}
}

// Close makes Accept return net.ErrClosed; connections sorted to l from
// now on are closed.
func (l *listener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

// Addr returns the address of the Splitter's listener.
func (l *listener) Addr() net.Addr { return l.addr }

// hand gives c to l's Accept, or closes it when l is closed first; it
// reports whether c was handed over.
func (l *listener) hand(c net.Conn) bool {
	select {
	case l.conns <- c:
		return true
	case <-l.done:
		_ = c.Close()
		return false
	}
}
