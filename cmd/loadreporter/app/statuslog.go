package app

import (
	"log/slog"

	"github.com/loadreporter/loadreporter/domain"
	"github.com/loadreporter/loadreporter/ports"
)

// statusLog logs report status changes and changes of last_error, not every
// fire: an engine that stays down for an hour makes one line, not 36 000.
type statusLog struct {
	log        *slog.Logger
	lastStatus domain.Status
	lastError  string
	repeats    int
}

func newStatusLog(log *slog.Logger) *statusLog { return &statusLog{log: log} }

func (s *statusLog) Fired(f ports.FireResult) {
	r := f.Report
	if r.Status == s.lastStatus && r.LastError == s.lastError {
		s.repeats++
		return
	}
	attrs := []any{"status", r.Status.String(), "sequence_id", r.SequenceID, "ranks", len(r.Ranks)}
	if s.repeats > 0 {
		attrs = append(attrs, "previous_repeated", s.repeats)
	}
	if r.LastError != "" {
		attrs = append(attrs, "last_error", r.LastError)
	}
	switch r.Status {
	case domain.StatusHealthy:
		s.log.Info("load reports healthy", attrs...)
	default:
		s.log.Warn("load reports not healthy", attrs...)
	}
	s.lastStatus, s.lastError, s.repeats = r.Status, r.LastError, 0
}

func (s *statusLog) SessionsChanged(map[string]int) {}
