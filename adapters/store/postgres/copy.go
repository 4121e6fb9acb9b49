package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/loadreporter/loadreporter/domain"
	"github.com/loadreporter/loadreporter/domain/audit"
)

// reportColumns are the columns of history_reports, as COPY writes them
// and reports are read back: the report, then its ranks packed (NULL for a
// report without ranks; see packRanks).
var reportColumns = []string{
	"worker_addr", "report_time", "source_instance_id", "sequence_id", "status", "last_error",
	"worker_type", "model", "zone", "token_usage_spread", "ranks",
}

// copyReports writes rs with one COPY into history_reports, which routes
// each row to its day's partition.
func copyReports(ctx context.Context, tx pgx.Tx, rs []*domain.Report) error {
	_, err := tx.CopyFrom(ctx, pgx.Identifier{"history_reports"}, reportColumns, &reportRows{rs: rs, i: -1})
	return err
}

// reportRows is the pgx.CopyFromSource of copyReports; it reuses one row
// of values.
type reportRows struct {
	rs  []*domain.Report
	i   int
	row [11]any
}

func (s *reportRows) Next() bool { s.i++; return s.i < len(s.rs) }
func (s *reportRows) Err() error { return nil }

func (s *reportRows) Values() ([]any, error) {
	r := s.rs[s.i]
	row := &s.row
	row[0], row[1], row[2], row[3] = r.Worker.Addr, r.ReportTime, r.SourceInstanceID, int64(r.SequenceID)
	row[4], row[5], row[6] = int16(r.Status), nullIfEmpty(r.LastError), int16(r.Worker.Type)
	row[7], row[8], row[9] = nullIfEmpty(r.Worker.Model), nullIfEmpty(r.Worker.Zone), audit.Spread(r)
	row[10] = packRanks(r.Ranks)
	return row[:], nil
}

func nullIfEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
