package ports

import "github.com/loadreporter/loadreporter/domain"

// ReportSink receives the reports the fire loop decides to keep in history.
// Record must never block: the fire loop calls it between pulls.
type ReportSink interface {
	Record(*domain.Report)
}
