package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/loadreporter/loadreporter/domain"
	"github.com/loadreporter/loadreporter/domain/audit"
)

// reportColumns are the columns of history_reports, as COPY writes them
// and reports are read back: the report, then its ranks as parallel
// arrays ordered by dp_rank (NULL for a report without ranks).
var reportColumns = []string{
	"worker_addr", "report_time", "source_instance_id", "sequence_id", "status", "last_error",
	"worker_type", "model", "zone", "token_usage_spread",
	"dp_rank", "snapshot_time", "num_running_reqs", "num_waiting_reqs", "num_waiting_uncached_tokens",
	"num_used_tokens", "num_total_tokens", "max_total_num_tokens", "max_running_requests",
	"token_usage", "gen_throughput", "cache_hit_rate", "utilization",
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
	row [23]any
}

func (s *reportRows) Next() bool { s.i++; return s.i < len(s.rs) }
func (s *reportRows) Err() error { return nil }

func (s *reportRows) Values() ([]any, error) {
	r := s.rs[s.i]
	row := &s.row
	row[0], row[1], row[2], row[3] = r.Worker.Addr, r.ReportTime, r.SourceInstanceID, int64(r.SequenceID)
	row[4], row[5], row[6] = int16(r.Status), nullIfEmpty(r.LastError), int16(r.Worker.Type)
	row[7], row[8], row[9] = nullIfEmpty(r.Worker.Model), nullIfEmpty(r.Worker.Zone), audit.Spread(r)
	if len(r.Ranks) == 0 {
		for i := 10; i < len(row); i++ {
			row[i] = nil
		}
		return row[:], nil
	}
	n := len(r.Ranks)
	dp, snap := make([]int32, n), make([]time.Time, n)
	ints := make([]int64, 7*n)
	floats := make([]float64, 4*n)
	for i, k := range r.Ranks {
		dp[i], snap[i] = int32(k.DPRank), k.SnapshotTime
		ints[i], ints[n+i], ints[2*n+i] = k.NumRunningReqs, k.NumWaitingReqs, k.NumWaitingUncachedTokens
		ints[3*n+i], ints[4*n+i], ints[5*n+i], ints[6*n+i] = k.NumUsedTokens, k.NumTotalTokens, k.MaxTotalNumTokens, k.MaxRunningRequests
		floats[i], floats[n+i], floats[2*n+i], floats[3*n+i] = k.TokenUsage, k.GenThroughput, k.CacheHitRate, k.Utilization
	}
	row[10], row[11] = dp, snap
	for j := range 7 {
		row[12+j] = ints[j*n : (j+1)*n]
	}
	for j := range 4 {
		row[19+j] = floats[j*n : (j+1)*n]
	}
	return row[:], nil
}

func nullIfEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
