package postgres_test

import (
	"context"
	"flag"
	"fmt"
	"math"
	"os"
	"testing"
	"time"

	"github.com/loadreporter/loadreporter/adapters/store/postgres"
	"github.com/loadreporter/loadreporter/domain"
	"github.com/loadreporter/loadreporter/domain/audit"
)

var (
	benchReports  = flag.Int("bench-reports", 20000, "reports BenchmarkHistory writes in batches (8 ranks each)")
	benchWorkers  = flag.Int("bench-workers", 10, "workers the benchmark's reports are spread over")
	benchRowByRow = flag.Int("bench-rowbyrow", 2000, "reports BenchmarkHistory writes row by row for comparison")
	benchBatch    = flag.Int("bench-batch", 500, "reports per Append in BenchmarkHistory")
)

// benchReport is report i of a synthetic fleet: each worker reports once a
// second with 8 ranks; every 500th report starts a 5-report outage, every
// 600th is followed by a 10 s recording gap, every 1 500th comes from a
// new process, and token usage drifts apart across ranks in waves
// (imbalance).
func benchReport(i int, start time.Time) *domain.Report {
	workers := *benchWorkers
	w, k := i%workers, i/workers // k: this worker's k-th report
	t := start.Add(time.Duration(k)*time.Second + time.Duration(k/600)*10*time.Second)
	r := &domain.Report{
		SourceInstanceID: fmt.Sprintf("bench-%d-%d", w, k/1500),
		SequenceID:       uint64(k%1500 + 1),
		ReportTime:       t,
		Worker:           domain.Worker{Addr: fmt.Sprintf("10.1.%d.%d:30000", w/256, w%256), Type: domain.WorkerTypeRegular, Model: "llama"},
		Status:           domain.StatusHealthy,
	}
	if k%500 < 5 && k >= 500 {
		r.Status, r.LastError = domain.StatusUnreachable, "load snapshot pull timed out"
		return r
	}
	wave := math.Sin(float64(k) / 300)
	for dp := range int64(8) {
		usage := 0.5 + 0.4*wave*float64(dp-4)/4
		r.Ranks = append(r.Ranks, domain.RankLoad{
			DPRank: dp, SnapshotTime: t.Add(-time.Millisecond),
			NumRunningReqs: 10 + dp, NumWaitingReqs: int64(k % 7), NumWaitingUncachedTokens: 100,
			NumUsedTokens: int64(usage * 100000), NumTotalTokens: 100000, MaxTotalNumTokens: 100000, MaxRunningRequests: 64,
			TokenUsage: usage, GenThroughput: 1000 + float64(dp), CacheHitRate: 0.3, Utilization: usage,
		})
	}
	return r
}

func rowsOf(r *domain.Report) int { return 1 + len(r.Ranks) }

// BenchmarkHistory writes -bench-reports reports in batches through
// Store.Append and -bench-rowbyrow reports one INSERT per row (each report
// in its own transaction), prints rows/s for both, then times each audit
// query over the batched data set. It runs once whatever b.N is:
//
//	go test ./adapters/store/postgres -run '^$' -bench History -benchtime 1x
//	go test ./adapters/store/postgres -run '^$' -bench History -benchtime 1x -timeout 2h \
//	    -args -bench-reports 1000000 -bench-workers 100
func BenchmarkHistory(b *testing.B) {
	if b.N > 1 {
		b.Skip("runs once; use -benchtime 1x")
	}
	ctx, cancel := context.WithTimeout(b.Context(), 3*time.Hour)
	defer cancel()
	start := time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)
	out := os.Stdout

	// Batched.
	s, _ := newStore(b)
	n := *benchReports
	b.ResetTimer()
	began := time.Now()
	rows := 0
	batch := make([]*domain.Report, 0, *benchBatch)
	for i := range n {
		r := benchReport(i, start)
		rows += rowsOf(r)
		batch = append(batch, r)
		if len(batch) == cap(batch) || i == n-1 {
			if err := s.Append(ctx, batch); err != nil {
				b.Fatalf("Append: %v", err)
			}
			batch = batch[:0]
		}
	}
	batched := time.Since(began)
	b.StopTimer()
	batchedRate := float64(rows) / batched.Seconds()
	fmt.Fprintf(out, "batched:    %d reports, %d rows in %s: %.0f rows/s (%.0f reports/s, %d reports per Append)\n",
		n, rows, batched.Round(time.Millisecond), batchedRate, float64(n)/batched.Seconds(), *benchBatch)

	// Row by row, in a schema of its own.
	rb, _ := newStore(b)
	m := min(*benchRowByRow, n)
	// Partitions first, so both runs write into the same shape of table.
	if err := rb.Append(ctx, []*domain.Report{benchReport(0, start), benchReport(m-1, start)}); err != nil {
		b.Fatalf("Append: %v", err)
	}
	began = time.Now()
	rows = 0
	for i := 2; i < m+2; i++ {
		r := benchReport(i, start)
		rows += rowsOf(r)
		if err := insertRowByRow(ctx, rb, r); err != nil {
			b.Fatalf("row by row: %v", err)
		}
	}
	single := time.Since(began)
	singleRate := float64(rows) / single.Seconds()
	fmt.Fprintf(out, "row by row: %d reports, %d rows in %s: %.0f rows/s (%.0f reports/s)\n",
		m, rows, single.Round(time.Millisecond), singleRate, float64(m)/single.Seconds())
	fmt.Fprintf(out, "batched writing is %.1f× row by row\n", batchedRate/singleRate)
	b.ReportMetric(batchedRate, "batched-rows/s")
	b.ReportMetric(singleRate, "rowbyrow-rows/s")

	// Audit queries over the batched set, with fresh statistics as a
	// long-running database would have.
	execIn(b, s, `ANALYZE history_reports`)
	execIn(b, s, `ANALYZE history_ranks`)
	last := benchReport(n-1, start).ReportTime
	all := audit.Window{Since: start, Until: last.Add(time.Second)}
	one := []string{benchReport(0, start).Worker.Addr}
	queries := []struct {
		name string
		run  func() (int, error)
	}{
		{"reports, first page of 100, all workers", func() (int, error) {
			p, err := s.Reports(ctx, audit.ReportsQuery{Window: all})
			return len(p.Reports), err
		}},
		{"reports, one worker, UNREACHABLE, page of 1000", func() (int, error) {
			p, err := s.Reports(ctx, audit.ReportsQuery{Window: all, Workers: one, Statuses: []domain.Status{domain.StatusUnreachable}, Limit: 1000})
			return len(p.Reports), err
		}},
		{"reports, last page of 100, newest first", func() (int, error) {
			p, err := s.Reports(ctx, audit.ReportsQuery{Window: all, Descending: true})
			return len(p.Reports), err
		}},
		{"outages, one worker", func() (int, error) {
			o, err := s.Outages(ctx, audit.OutagesQuery{Window: all, Workers: one, Limit: audit.MaxLimit})
			return len(o.Outages), err
		}},
		{"outages, all workers", func() (int, error) {
			o, err := s.Outages(ctx, audit.OutagesQuery{Window: all, Limit: audit.MaxLimit})
			return len(o.Outages), err
		}},
		{"rank stats, all workers", func() (int, error) {
			st, err := s.RankStats(ctx, audit.RankStatsQuery{Window: all, Limit: audit.MaxLimit})
			return len(st.Stats), err
		}},
		{"rank stats, one worker, last hour", func() (int, error) {
			st, err := s.RankStats(ctx, audit.RankStatsQuery{Window: audit.Window{Since: last.Add(-time.Hour), Until: all.Until}, Workers: one})
			return len(st.Stats), err
		}},
		{"gaps and restarts, all workers", func() (int, error) {
			g, err := s.Gaps(ctx, audit.GapsQuery{Window: all, Interval: time.Second, Limit: audit.MaxLimit})
			return len(g.Gaps) + len(g.Restarts), err
		}},
		{"imbalance > 0.5, all workers", func() (int, error) {
			im, err := s.Imbalance(ctx, audit.ImbalanceQuery{Window: all, Threshold: .5, Limit: audit.MaxLimit})
			return len(im.Spans), err
		}},
		{"imbalance > 0.5, one worker", func() (int, error) {
			im, err := s.Imbalance(ctx, audit.ImbalanceQuery{Window: all, Workers: one, Threshold: .5, Limit: audit.MaxLimit})
			return len(im.Spans), err
		}},
	}
	for _, q := range queries {
		began := time.Now()
		got, err := q.run()
		if err != nil {
			b.Fatalf("%s: %v", q.name, err)
		}
		fmt.Fprintf(out, "query %-48s %6d rows in %s\n", q.name+":", got, time.Since(began).Round(time.Microsecond))
	}
}

// insertRowByRow is the naive writer the batched one is measured against:
// one INSERT statement per row, one transaction per report.
func insertRowByRow(ctx context.Context, s *postgres.Store, r *domain.Report) error {
	tx, err := s.DB().Begin(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, `INSERT INTO history_reports
		(worker_addr, report_time, source_instance_id, sequence_id, status, last_error, worker_type, model, zone, token_usage_spread)
		VALUES ($1, $2, $3, $4, $5, NULLIF($6, ''), $7, NULLIF($8, ''), NULLIF($9, ''), $10) ON CONFLICT DO NOTHING`,
		r.Worker.Addr, r.ReportTime, r.SourceInstanceID, int64(r.SequenceID), int16(r.Status), r.LastError,
		int16(r.Worker.Type), r.Worker.Model, r.Worker.Zone, audit.Spread(r)); err != nil {
		return err
	}
	for _, k := range r.Ranks {
		if _, err := tx.Exec(ctx, `INSERT INTO history_ranks
			(worker_addr, report_time, source_instance_id, sequence_id, dp_rank, snapshot_time,
			 num_running_reqs, num_waiting_reqs, num_waiting_uncached_tokens, num_used_tokens,
			 num_total_tokens, max_total_num_tokens, max_running_requests,
			 token_usage, gen_throughput, cache_hit_rate, utilization)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17) ON CONFLICT DO NOTHING`,
			r.Worker.Addr, r.ReportTime, r.SourceInstanceID, int64(r.SequenceID), int32(k.DPRank), k.SnapshotTime,
			k.NumRunningReqs, k.NumWaitingReqs, k.NumWaitingUncachedTokens, k.NumUsedTokens,
			k.NumTotalTokens, k.MaxTotalNumTokens, k.MaxRunningRequests,
			k.TokenUsage, k.GenThroughput, k.CacheHitRate, k.Utilization); err != nil {
			return err
		}
	}
	return tx.Commit(ctx)
}
