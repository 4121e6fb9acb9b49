package app

import (
	"log/slog"
	"regexp"
	"time"

	"github.com/loadreporter/loadreporter/domain"
	"github.com/loadreporter/loadreporter/ports"
)

// statusReminder is how often a status that stays not healthy is logged
// again, with how often it repeated and its latest last_error.
const statusReminder = 5 * time.Minute

// causeChangeHold is the least time between two lines for one kind of
// failure whose cause changed.
const causeChangeHold = 10 * time.Second

// statusLog logs changes of report status or of the kind of failure (the
// pull's outcome: error, timeout, invalid data, rank-set change), and of
// its cause (which rank, which endpoint, what was wrong), but not every
// fire and not every new wording: a stalled engine's growing age or a
// garbage engine's new value each fire is the same episode. An engine that
// stays down for an hour makes one line and a reminder every
// statusReminder, not 3 600 lines; a cause that changes is said within
// causeChangeHold.
type statusLog struct {
	log       *slog.Logger
	lastKind  string
	lastCause string    // causeOf the last_error last written
	since     time.Time // report time of the line last written
	repeats   int
}

// measurement is a number in a last_error that is a measurement (an age,
// a value), not part of the cause: any number but a rank's or a port's.
var measurement = regexp.MustCompile(`(rank |:)?\d+(\.\d+)?`)

// causeOf is a last_error without its measurements.
func causeOf(lastError string) string {
	return measurement.ReplaceAllStringFunc(lastError, func(m string) string {
		if m[0] < '0' || m[0] > '9' {
			return m // a rank or a port: part of the cause
		}
		return "#"
	})
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
		if r.Status == domain.StatusHealthy {
			return
		}
		if cause := causeOf(r.LastError); cause != s.lastCause && r.ReportTime.Sub(s.since) >= causeChangeHold {
			s.log.Warn("load reports not healthy: the cause changed", s.attrs(r, "repeated", s.repeats)...)
			s.lastCause, s.since, s.repeats = cause, r.ReportTime, 0
			return
		}
		if r.ReportTime.Sub(s.since) < statusReminder {
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
	s.lastKind, s.lastCause, s.since, s.repeats = kind, causeOf(r.LastError), r.ReportTime, 0
}

func (s *statusLog) attrs(r *domain.Report, extra ...any) []any {
	attrs := append([]any{"status", r.Status.String(), "sequence_id", r.SequenceID, "ranks", len(r.Ranks)}, extra...)
	if r.LastError != "" {
		attrs = append(attrs, "last_error", r.LastError)
	}
	return attrs
}

func (s *statusLog) SessionsChanged(map[string]int) {}
