package serving

import (
	"log"
	"log/slog"
	"time"

	"github.com/loadreporter/loadreporter/internal/loglimit"
)

// errorLog routes net/http's own messages (TLS handshake failures,
// malformed requests) through slog, at most one line per interval with the
// number of lines held back, so a scanner hammering the port cannot flood
// the log.
func errorLog(l *slog.Logger, every time.Duration, now func() time.Time) *log.Logger {
	return log.New(loglimit.NewWriter(l, &loglimit.Limiter{Every: every}, now, "http server"), "", 0)
}
