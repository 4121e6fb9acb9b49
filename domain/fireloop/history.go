package fireloop

import "github.com/loadreporter/loadreporter/domain"

// recordHistory hands rep to the history sink when the history session was
// due at this fire, or when its status differs from the last recorded one.
func (l *Loop) recordHistory(rep *domain.Report) {
	if l.historySub == nil {
		return
	}
	due := false
	select {
	case <-l.historySub.Reports():
		due = true
	default:
	}
	if due || l.lastRecorded == nil || l.lastRecorded.Status != rep.Status {
		l.history.Record(rep)
		l.lastRecorded = rep
	}
}
