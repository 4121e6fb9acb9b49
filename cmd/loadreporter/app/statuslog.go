package app

import (
	"log/slog"
	"time"

	"github.com/loadreporter/loadreporter/domain"
	"github.com/loadreporter/loadreporter/ports"
)

// statusReminder is how often a status that stays not healthy is logged
// again, with how often it repeated and its latest last_error.
const statusReminder = 5 * time.Minute

// statusLog logs changes of report status or of the kind of failure (the
// pull's outcome: error, timeout, invalid data, rank-set change), not every
// fire and not every new wording: a stalled engine's growing age or a
// garbage engine's new value each fire is the same episode. An engine that
// stays down for an hour makes one line and a reminder every
// statusReminder, not 3 600 lines.
type statusLog struct {
	log      *slog.Logger
	lastKind string
	since    time.Time // report time of the line last written
	repeats  int
}

func newStatusLog(log *slog.Logger) *statusLog { return &statusLog{log: log} }

func (s *statusLog) Fired(f ports.FireResult) {
	r := f.Report
	kind := r.Status.String()
	if r.Status != domain.StatusHealthy {
		kind += "/" + string(f.Outcome)
	}
	if kind == s.lastKind {
		s.repeats++
		if r.Status == domain.StatusHealthy || r.ReportTime.Sub(s.since) < statusReminder {
			return
		}
		s.log.Warn("load reports still not healthy", s.attrs(r, "repeated", s.repeats)...)
		s.since, s.repeats = r.ReportTime, 0
		return
	}
	attrs := s.attrs(r)
	if s.repeats > 0 {
		attrs = append(attrs, "previous_repeated", s.repeats)
	}
	switch r.Status {
	case domain.StatusHealthy:
		s.log.Info("load reports healthy", attrs...)
	default:
		s.log.Warn("load reports not healthy", attrs...)
	}
	s.lastKind, s.since, s.repeats = kind, r.ReportTime, 0
}

func (s *statusLog) attrs(r *domain.Report, extra ...any) []any {
	attrs := append([]any{"status", r.Status.String(), "sequence_id", r.SequenceID, "ranks", len(r.Ranks)}, extra...)
	if r.LastError != "" {
		attrs = append(attrs, "last_error", r.LastError)
	}
	return attrs
}

func (s *statusLog) SessionsChanged(map[string]int) {}
