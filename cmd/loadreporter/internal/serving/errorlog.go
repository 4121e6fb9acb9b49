package serving

import (
	"log"
	"log/slog"
	"strings"
	"sync"
	"time"
)

// errorLog routes net/http's own messages (TLS handshake failures,
// malformed requests) through slog, at most one line per interval with the
// number of lines held back, so a scanner hammering the port cannot flood
// the log.
func errorLog(l *slog.Logger, every time.Duration) *log.Logger {
	return log.New(&rateLimitedWriter{log: l, every: every, now: time.Now}, "", 0)
}

type rateLimitedWriter struct {
	log   *slog.Logger
	every time.Duration
	now   func() time.Time

	mu         sync.Mutex
	last       time.Time
	suppressed int
}

func (w *rateLimitedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	now := w.now()
	if !w.last.IsZero() && now.Sub(w.last) < w.every {
		w.suppressed++
		w.mu.Unlock()
		return len(p), nil
	}
	suppressed := w.suppressed
	w.last, w.suppressed = now, 0
	w.mu.Unlock()
	w.log.Warn("http server", "err", strings.TrimSpace(string(p)), "suppressed_since_last", suppressed)
	return len(p), nil
}
