package rpc

import (
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"
)

// DefaultStalledWriteTimeout is how long a write to a stream without a
// lease may stay blocked before the stream ends.
const DefaultStalledWriteTimeout = 30 * time.Second

// Stalls ends the streams behind it whose client stopped reading: a write
// or flush blocked for longer than the bound resets the stream. Nothing
// else ends a stream that holds no lease (a browser's Watch, an ORCA
// client): without it, one that stops reading keeps its --max-sessions
// slot, which a router could use, and its goroutine until the connection
// dies. Monitor streams are not wrapped: a router's lease bounds them.
//
// It works through WithTransportInfo's response controller, so mount the
// wrapped handlers inside it.
type Stalls struct {
	bound time.Duration
	log   *slog.Logger
	lines logLimiter
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
	return &Stalls{bound: bound, log: log, lines: logLimiter{every: DefaultAbuseLogInterval}}
}

// Ended is how many streams Stalls has ended.
func (s *Stalls) Ended() uint64 { return s.ended.Load() }

// Wrap bounds the writes of route's handler; it takes what a service's
// Handler returns: mux.Handle(stalls.Wrap(watch.Handler())).
func (s *Stalls) Wrap(route string, h http.Handler) (string, http.Handler) {
	return route, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sw := &stallWriter{ResponseWriter: w, s: s, tr: transportFrom(r.Context()), route: route, peer: r.RemoteAddr}
		defer sw.stop()
		h.ServeHTTP(sw, r)
	})
}

// stallWriter arms a timer around each write and flush; the timer, if it
// fires, sets the stream's write deadline to now, which fails the blocked
// write and resets the stream.
type stallWriter struct {
	http.ResponseWriter
	s           *Stalls
	tr          *transport
	route, peer string
	timer       *time.Timer
}

func (w *stallWriter) Write(p []byte) (int, error) {
	w.arm()
	defer w.timer.Stop()
	return w.ResponseWriter.Write(p)
}

// Flush is where an HTTP/2 stream waits for the client's flow-control
// window, so it is bounded too.
func (w *stallWriter) Flush() {
	w.arm()
	defer w.timer.Stop()
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the stream itself.
func (w *stallWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *stallWriter) arm() {
	if w.timer == nil {
		w.timer = time.AfterFunc(w.s.bound, w.expire)
		return
	}
	w.timer.Reset(w.s.bound)
}

func (w *stallWriter) stop() {
	if w.timer != nil {
		w.timer.Stop()
	}
}

func (w *stallWriter) expire() {
	if !w.tr.setWriteDeadline(time.Now()) {
		return // the handler returned, or nothing can bound the stream
	}
	w.s.ended.Add(1)
	if ok, suppressed := w.s.lines.allow(time.Now()); ok {
		w.s.log.Warn("a stream's client stopped reading; the stream ends", "route", w.route, "peer", w.peer,
			"blocked_for", w.s.bound, "suppressed", suppressed)
	}
}
