package serving

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/loadreporter/loadreporter/adapters/rpc"
	"github.com/loadreporter/loadreporter/domain/session"
)

// Defaults of the shared flags.
const (
	// MaxRequestBytes bounds one RPC message a peer sends (a router frame,
	// a query, a stream request): every request of every service is a few
	// hundred bytes, so a peer sending megabytes (or a gzip bomb that
	// inflates to gigabytes) is refused before it is buffered.
	MaxRequestBytes = 64 << 10
	// DefaultMaxStreamsPerConn is --max-streams-per-conn's default.
	DefaultMaxStreamsPerConn = 1000
	// DefaultRequestBodyTimeout is --request-body-timeout's default.
	DefaultRequestBodyTimeout = 10 * time.Second
	// DefaultShutdownGrace is --shutdown-grace's default.
	DefaultShutdownGrace = 5 * time.Second
	// DefaultMaxWatchSessions is --max-watch-sessions' default: pages'
	// streams (serve's Watch, fleet's WatchFleet) at most.
	DefaultMaxWatchSessions = session.DefaultMaxWatchSessions
)

// Port is how a command's port bounds its peers. Embed it in a command's
// configuration so its fields read c.MaxStreamsPerConn and so on.
type Port struct {
	// MaxStreamsPerConn bounds the HTTP/2 streams one connection holds
	// open.
	MaxStreamsPerConn int
	// StalledWriteTimeout ends a stream whose write has been blocked that
	// long: its client stopped reading.
	StalledWriteTimeout time.Duration
	// RequestBodyTimeout is how long a request may take to send its body.
	RequestBodyTimeout time.Duration
}

// DefaultPort is the flags' defaults.
func DefaultPort() Port {
	return Port{MaxStreamsPerConn: DefaultMaxStreamsPerConn, StalledWriteTimeout: rpc.DefaultStalledWriteTimeout,
		RequestBodyTimeout: DefaultRequestBodyTimeout}
}

// Register declares --max-streams-per-conn, --stalled-write-timeout and
// --request-body-timeout on fs, with p's values as defaults.
func (p *Port) Register(fs *flag.FlagSet) {
	fs.IntVar(&p.MaxStreamsPerConn, "max-streams-per-conn", p.MaxStreamsPerConn,
		"HTTP/2 streams one connection may hold open at once, whatever they wait for")
	fs.DurationVar(&p.StalledWriteTimeout, "stalled-write-timeout", p.StalledWriteTimeout,
		"a stream whose write stays blocked this long ends, giving back its slot: a page's stream or an ORCA stream whose client stopped reading, or a router whose keep_alives arrive while its reports do not get through")
	fs.DurationVar(&p.RequestBodyTimeout, "request-body-timeout", p.RequestBodyTimeout,
		"how long a request may take to send its body (every request but a router's Monitor stream, which bounds itself); a client trickling a body is cut off")
}

// RegisterMaxWatchSessions declares --max-watch-sessions on fs, into n,
// with *n as its default: the one bound of pages' streams, whichever
// command counts them.
func RegisterMaxWatchSessions(fs *flag.FlagSet, n *int) {
	fs.IntVar(n, "max-watch-sessions", *n,
		"live streams of pages at most (serve's Watch, apart from --max-sessions so browsers never refuse a router; fleet's WatchFleet); one more is refused with RESOURCE_EXHAUSTED")
}

// Check names the flag whose value cannot work.
func (p Port) Check() error {
	if p.MaxStreamsPerConn < 1 {
		return fmt.Errorf("--max-streams-per-conn %d: want at least 1", p.MaxStreamsPerConn)
	}
	if p.RequestBodyTimeout <= 0 {
		return fmt.Errorf("--request-body-timeout %s: must be positive", p.RequestBodyTimeout)
	}
	if p.StalledWriteTimeout <= 0 {
		return fmt.Errorf("--stalled-write-timeout %s: must be positive", p.StalledWriteTimeout)
	}
	return nil
}

// NewServer returns the http.Server of a port serving h: HTTP/1.1 and
// HTTP/2, unencrypted HTTP/2 (h2c) too unless tls (the caller sets
// TLSConfig then).
func (p Port) NewServer(h http.Handler, log *slog.Logger, tls bool) *http.Server {
	var protocols http.Protocols
	protocols.SetHTTP1(true)
	protocols.SetHTTP2(true)
	if !tls {
		protocols.SetUnencryptedHTTP2(true)
	}
	return &http.Server{
		Handler:           h,
		Protocols:         &protocols,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       idleTimeout,
		ErrorLog:          errorLog(log, time.Second, time.Now),
		HTTP2: &http.HTTP2Config{
			// Bounds the streams one connection holds open, registered or
			// not: a router fleet multiplexing on one connection fits, a
			// peer opening streams it never uses does not grow.
			MaxConcurrentStreams: p.MaxStreamsPerConn,
			// Find dead peers (a pulled cable) so blocked sends end.
			SendPingTimeout: sendPingTimeout,
			PingTimeout:     pingTimeout,
		},
	}
}

// The HTTP server's limits, which the native gRPC server mirrors.
const (
	idleTimeout     = 2 * time.Minute
	sendPingTimeout = 30 * time.Second
	pingTimeout     = 15 * time.Second
	// FirstRequestTimeout is how long a new h2c connection of the port
	// may take to send its first request before the HTTP server gets it
	// as it is: the idle timeout, as a gRPC channel connects ahead of its
	// first call. Its first bytes get the splitter's default, net/http's
	// header timeout.
	FirstRequestTimeout = idleTimeout
)

// NativeOptions are the native gRPC server's bounds: the HTTP server's.
func NativeOptions(p Port) rpc.NativeOptions {
	return rpc.NativeOptions{
		MaxStreamsPerConn: p.MaxStreamsPerConn, MaxRecvMsgBytes: MaxRequestBytes, MaxHeaderBytes: http.DefaultMaxHeaderBytes,
		IdleTimeout: idleTimeout, PingAfter: sendPingTimeout, PingTimeout: pingTimeout,
	}
}

// Wrap puts around h what every request of a port goes through, outermost
// first: the response controller of rpc.WithTransportInfo (Stalls, the
// shutdown bound and Monitor bound their writes through it), a bound of
// RequestBodyTimeout on sending the body, except for the requests whose
// path starts with one of selfBounded (a stream whose body lasts as long
// as it does and bounds itself), and, once shuttingDown ends, a bound of
// finalWrite on every write of every response still open, so that a peer
// that stopped reading cannot hold the shutdown to its grace.
func (p Port) Wrap(h http.Handler, shuttingDown context.Context, finalWrite time.Duration, selfBounded ...string) http.Handler {
	h = rpc.BoundWritesAtShutdown(shuttingDown, finalWrite, h)
	h = boundRequestBodies(p.RequestBodyTimeout, selfBounded, h)
	return rpc.WithTransportInfo(h)
}

// boundRequestBodies gives every request but those under selfBounded d to
// send its whole body; reflection's two-way streams too, as a client asks
// a few questions and closes. Without it a client trickling a body a byte
// at a time held its connection, goroutine and file descriptor as long as
// it liked, and twenty thousand of them took every descriptor (the probes
// stopped answering). Once the body is read nothing reads the stream
// again, but net/http's own watch of an HTTP/1.1 connection, which clears
// the deadline first.
func boundRequestBodies(d time.Duration, selfBounded []string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body != nil && r.Body != http.NoBody && !hasAnyPrefix(r.URL.Path, selfBounded) {
			_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(d))
		}
		next.ServeHTTP(w, r)
	})
}

func hasAnyPrefix(s string, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}
