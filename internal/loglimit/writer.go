package loglimit

import (
	"io"
	"log/slog"
	"strings"
	"time"
)

// Writer is an io.Writer that logs each write as one warning through a
// *slog.Logger: a fixed message and attributes, the write's text as "err"
// and the lines held back since the last one as "suppressed", at most as
// often as its Limiter allows. It suits a *log.Logger that a library
// writes its own errors to (http.Server.ErrorLog, httputil.ReverseProxy's
// ErrorLog). Safe for concurrent use.
type Writer struct {
	log   *slog.Logger
	lines *Limiter
	now   func() time.Time
	msg   string
}

var _ io.Writer = (*Writer)(nil)

// NewWriter returns a Writer logging msg and attrs through log, one line
// as often as lines allows; lines may be shared with the caller's other
// log lines, so that they are held back together. A nil now is time.Now,
// a nil lines lets every line through.
func NewWriter(log *slog.Logger, lines *Limiter, now func() time.Time, msg string, attrs ...any) *Writer {
	if now == nil {
		now = time.Now
	}
	if lines == nil {
		lines = &Limiter{}
	}
	return &Writer{log: log.With(attrs...), lines: lines, now: now, msg: msg}
}

// Write logs p, or counts it held back; it never fails.
func (w *Writer) Write(p []byte) (int, error) {
	if ok, suppressed := w.lines.Allow(w.now()); ok {
		w.log.Warn(w.msg, "err", strings.TrimSpace(string(p)), "suppressed", suppressed)
	}
	return len(p), nil
}
