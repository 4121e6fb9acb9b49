package rpc

import (
	"context"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/loadreporter/loadreporter/internal/loglimit"
)

// DefaultStalledWriteTimeout is how long a write to a stream without a
// lease may stay blocked before the stream ends.
const DefaultStalledWriteTimeout = 30 * time.Second

// Stalls ends streams whose client stopped reading: a write or flush
// blocked for longer than the bound resets the stream. Nothing else ends a
// stream that holds no lease (a browser's Watch, an ORCA client): without
// it, one that stops reading keeps its session slot, and its goroutine,
// until the connection dies. A router's lease does not bound it either
// when only the way back is lost (an MTU black hole: its small
// keep_alives arrive, full-size reports do not), so Monitor's writer uses
// it too (Guard).
//
// It works through WithTransportInfo's response controller, so mount the
// wrapped handlers inside it.
type Stalls struct {
	bound time.Duration
	log   *slog.Logger
	lines loglimit.Limiter
	ended atomic.Uint64
}

// NewStalls returns a Stalls ending streams blocked for bound (0: the
// default), logging to log (nil: the default logger).
func NewStalls(bound time.Duration, log *slog.Logger) *Stalls {
	if bound <= 0 {
		bound = DefaultStalledWriteTimeout
	}
	if log == nil {
		log = slog.Default()
	}
	return &Stalls{bound: bound, log: log, lines: loglimit.Limiter{Every: DefaultAbuseLogInterval}}
}

// Ended is how many streams Stalls has ended.
func (s *Stalls) Ended() uint64 { return s.ended.Load() }

// Wrap bounds the writes of route's handler; it takes what a service's
// Handler returns: mux.Handle(stalls.Wrap(watch.Handler())).
func (s *Stalls) Wrap(route string, h http.Handler) (string, http.Handler) {
	return route, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sw := &stallWriter{ResponseWriter: w, guard: s.Guard(r.Context(), route, r.RemoteAddr)}
		defer sw.guard.Disarm()
		h.ServeHTTP(sw, r)
	})
}

// Guard returns the guard of one stream, whose context carries
// WithTransportInfo's transport. A nil *Stalls gives a guard that does
// nothing.
func (s *Stalls) Guard(ctx context.Context, route, peer string) *StallGuard {
	if s == nil {
		return nil
	}
	return &StallGuard{s: s, tr: transportFrom(ctx), route: route, peer: peer}
}

// StallGuard bounds one stream's writes: Arm before a write, Disarm after.
// If the bound passes in between, the stream's write deadline is set to
// now, which fails the write and resets the stream. Its methods are called
// from one goroutine at a time; a nil guard does nothing.
type StallGuard struct {
	s           *Stalls
	tr          *transport
	route, peer string
	timer       *time.Timer
}

// Arm starts the bound of a write.
func (g *StallGuard) Arm() {
	switch {
	case g == nil:
	case g.timer == nil:
		g.timer = time.AfterFunc(g.s.bound, g.expire)
	default:
		g.timer.Reset(g.s.bound)
	}
}

// Disarm ends the bound of the write that returned.
func (g *StallGuard) Disarm() {
	if g != nil && g.timer != nil {
		g.timer.Stop()
	}
}

func (g *StallGuard) expire() {
	// Counted first: once the deadline is set the stream ends, and whoever
	// sees it end must find it counted.
	g.s.ended.Add(1)
	if !g.tr.setWriteDeadline(time.Now()) {
		g.s.ended.Add(^uint64(0)) // the handler returned, or nothing can bound the stream
		return
	}
	if ok, suppressed := g.s.lines.Allow(time.Now()); ok {
		g.s.log.Warn("a stream's client stopped reading; the stream ends", "route", g.route, "peer", g.peer,
			"blocked_for", g.s.bound, "suppressed", suppressed)
	}
}

// stallWriter arms its guard around each write and flush.
type stallWriter struct {
	http.ResponseWriter
	guard *StallGuard
}

func (w *stallWriter) Write(p []byte) (int, error) {
	w.guard.Arm()
	defer w.guard.Disarm()
	return w.ResponseWriter.Write(p)
}

// Flush is where an HTTP/2 stream waits for the client's flow-control
// window, so it is bounded too.
func (w *stallWriter) Flush() {
	w.guard.Arm()
	defer w.guard.Disarm()
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the stream itself.
func (w *stallWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
