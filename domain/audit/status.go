package audit

import (
	"math"
	"strings"
	"time"

	"github.com/loadreporter/loadreporter/domain"
)

// ParseStatus reads a status name as the wire and the CLI spell it
// ("HEALTHY", "stale", "REPORT_STATUS_UNREACHABLE", …).
func ParseStatus(s string) (domain.Status, error) {
	name := strings.TrimPrefix(strings.ToUpper(strings.TrimSpace(s)), "REPORT_STATUS_")
	for _, st := range queryableStatuses {
		if st.String() == name {
			return st, nil
		}
	}
	return 0, domain.Errorf(domain.CodeInvalidArgument, "status %q: want HEALTHY, STALE or UNREACHABLE", s)
}

var queryableStatuses = []domain.Status{domain.StatusHealthy, domain.StatusStale, domain.StatusUnreachable}

// ValidateReports checks what Append needs: no nil report, a source
// instance id and a worker address, a report time in years 1970..9999, a
// sequence id that fits
// a signed 64-bit column, and dp_ranks that fit int32 and appear once per
// report.
func ValidateReports(reports []*domain.Report) error {
	for i, r := range reports {
		switch {
		case r == nil:
			return domain.Errorf(domain.CodeInvalidArgument, "reports[%d] is nil", i)
		case r.SourceInstanceID == "":
			return domain.Errorf(domain.CodeInvalidArgument, "reports[%d]: source_instance_id is empty", i)
		case r.Worker.Addr == "":
			return domain.Errorf(domain.CodeInvalidArgument, "reports[%d]: worker_addr is empty", i)
		case r.ReportTime.IsZero():
			return domain.Errorf(domain.CodeInvalidArgument, "reports[%d]: report_time is not set", i)
		case r.ReportTime.Year() < 1970 || r.ReportTime.Year() > 9999:
			return domain.Errorf(domain.CodeInvalidArgument, "reports[%d]: report_time %s outside years 1970..9999", i, r.ReportTime.UTC().Format(time.RFC3339))
		case r.SequenceID > math.MaxInt64:
			return domain.Errorf(domain.CodeInvalidArgument, "reports[%d]: sequence_id %d exceeds %d", i, r.SequenceID, int64(math.MaxInt64))
		}
		for j, rk := range r.Ranks {
			if rk.DPRank < 0 || rk.DPRank > math.MaxInt32 {
				return domain.Errorf(domain.CodeInvalidArgument, "reports[%d]: dp_rank %d outside [0, %d]", i, rk.DPRank, math.MaxInt32)
			}
			for _, prev := range r.Ranks[:j] {
				if prev.DPRank == rk.DPRank {
					return domain.Errorf(domain.CodeInvalidArgument, "reports[%d]: dp_rank %d appears twice", i, rk.DPRank)
				}
			}
		}
	}
	return nil
}
