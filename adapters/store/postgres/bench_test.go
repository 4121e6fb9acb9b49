package postgres_test

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/loadreporter/loadreporter/adapters/clock"
	"github.com/loadreporter/loadreporter/adapters/store/postgres"
	"github.com/loadreporter/loadreporter/domain"
	"github.com/loadreporter/loadreporter/domain/audit"
	"github.com/loadreporter/loadreporter/domain/recorder"
)

var (
	benchReports  = flag.Int("bench-reports", 20000, "reports BenchmarkHistory writes (8 ranks each)")
	benchWorkers  = flag.Int("bench-workers", 10, "workers the benchmark's reports are spread over")
	benchRowByRow = flag.Int("bench-rowbyrow", 2000, "reports BenchmarkHistory writes row by row for comparison")
	benchBatch    = flag.Int("bench-batch", recorder.DefaultBatchSize, "reports per Append in BenchmarkHistory's batched writes")
	benchRate     = flag.Int("bench-rate", 50000, "reports a second fed to the recorder in BenchmarkHistory's paced run")
	benchRepeat   = flag.Int("bench-repeat", 3, "runs of each query; the median is printed")
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
		SourceInstanceID: benchNames.get("bench-%d-%d", w, k/1500),
		SequenceID:       uint64(k%1500 + 1),
		ReportTime:       t,
		Worker:           domain.Worker{Addr: benchNames.get("10.1.%d.%d:30000", w/256, w%256), Type: domain.WorkerTypeRegular, Model: "llama"},
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

var benchStart = time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)

// benchNames makes each worker address and source instance id once, so
// that making reports costs the benchmark's producer little beside the
// recorder and the database.
var benchNames = nameCache{m: map[[3]any]string{}}

type nameCache struct {
	mu sync.Mutex
	m  map[[3]any]string
}

func (c *nameCache) get(format string, a, b int) string {
	key := [3]any{format, a, b}
	c.mu.Lock()
	defer c.mu.Unlock()
	s, ok := c.m[key]
	if !ok {
		s = fmt.Sprintf(format, a, b)
		c.m[key] = s
	}
	return s
}

// BenchmarkHistory measures history at fleet scale (issue 14), once
// whatever b.N is: the write rates of the store (batched Appends, through
// the recorder, paced and flat out, and row-by-row inserts for
// comparison), then every audit query, for one worker and for the fleet.
// A 1 000 000-report run takes a few minutes here:
//
//	go test ./adapters/store/postgres -run '^$' -bench History -benchtime 1x -timeout 2h \
//	    -args -bench-reports 1000000 -bench-workers 100
func BenchmarkHistory(b *testing.B) {
	if b.N > 1 {
		b.Skip("runs once; use -benchtime 1x")
	}
	ctx, cancel := context.WithTimeout(b.Context(), 3*time.Hour)
	defer cancel()
	out := os.Stdout
	n := *benchReports
	fmt.Fprintf(out, "history benchmark: %d reports × 8 ranks of %d workers\n", n, *benchWorkers)
	printLoad(out, "at start")

	s, _ := newStore(b)
	b.ResetTimer()
	batched := writeBatched(ctx, b, s.Append, n)
	b.StopTimer()
	printRate(out, fmt.Sprintf("write batched, %d reports per Append", *benchBatch), n, batched)
	b.ReportMetric(float64(n)/batched.Seconds(), "batched-reports/s")

	benchRecorder(ctx, b, out, n)
	benchRowByRowWrites(ctx, b, out, batched, n)

	for _, t := range []string{"history_reports", "history_minutes", "history_minute_entries", "history_minute_ranks", "history_rank_minute_usage"} {
		analyze(ctx, b, s.DB(), t)
	}
	printSizes(ctx, b, out, s.DB())
	printLoad(out, "before the queries")
	benchQueries(ctx, b, out, s)
	printLoad(out, "at end")
}

// printLoad prints the load average: the machine is shared, and figures
// move with it.
func printLoad(out io.Writer, when string) {
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		fmt.Fprintf(out, "load average %s: %s", when, b)
	}
}

func printRate(out io.Writer, what string, n int, d time.Duration) {
	fmt.Fprintf(out, "%-58s %8d reports in %8s: %7.0f reports/s\n", what+":", n, d.Round(time.Millisecond), float64(n)/d.Seconds())
}

// writeBatched appends reports [0, n) in batches of -bench-batch.
func writeBatched(ctx context.Context, b *testing.B, appendFn func(context.Context, []*domain.Report) error, n int) time.Duration {
	began := time.Now()
	batch := make([]*domain.Report, 0, *benchBatch)
	for i := range n {
		batch = append(batch, benchReport(i, benchStart))
		if len(batch) == cap(batch) || i == n-1 {
			if err := appendFn(ctx, batch); err != nil {
				b.Fatalf("Append: %v", err)
			}
			batch = batch[:0]
		}
	}
	return time.Since(began)
}

// benchRecorder feeds n reports through the recorder with its default
// options, into a store of its own: paced at -bench-rate (does it keep
// up, or drop?), then as fast as they come with a buffer that holds them
// all (how fast can it go?).
func benchRecorder(ctx context.Context, b *testing.B, out io.Writer, n int) {
	for _, paced := range []bool{true, false} {
		s, _ := newStore(b)
		o := recorder.Options{Store: s, Clock: clock.System{}, MaxBackoff: time.Second}
		what := fmt.Sprintf("write through the recorder, fed %d/s", *benchRate)
		if !paced {
			o.BufferSize = n
			what = "write through the recorder, fed flat out"
		}
		rec, err := recorder.New(o)
		if err != nil {
			b.Fatal(err)
		}
		rec.Start()
		var (
			mu        sync.Mutex
			maxLag    time.Duration
			maxBuffer int
			done      = make(chan struct{})
		)
		go func() { // samples the lag
			for {
				st := rec.Stats()
				mu.Lock()
				maxLag, maxBuffer = max(maxLag, st.Lag), max(maxBuffer, st.Buffered)
				mu.Unlock()
				select {
				case <-done:
					return
				case <-time.After(50 * time.Millisecond):
				}
			}
		}()
		began := time.Now()
		for i := range n {
			if paced && i%500 == 0 {
				time.Sleep(time.Until(began.Add(time.Duration(float64(i) / float64(*benchRate) * float64(time.Second)))))
			}
			rec.Record(benchReport(i, benchStart))
		}
		fed := time.Since(began)
		if err := rec.Close(ctx); err != nil {
			b.Fatalf("recorder Close: %v", err)
		}
		elapsed := time.Since(began)
		close(done)
		st := rec.Stats()
		mu.Lock()
		printRate(out, what, int(st.Written), elapsed)
		fmt.Fprintf(out, "    fed in %s, %d batches, %d dropped, %d failed writes, lag up to %s, up to %d reports held\n",
			fed.Round(time.Millisecond), st.Batches, st.Dropped, st.Failures, maxLag.Round(time.Millisecond), maxBuffer)
		mu.Unlock()
	}
}

// benchRowByRowWrites writes reports one INSERT a report, a transaction
// a report, no rollups: the naive writer the batched one is measured
// against.
func benchRowByRowWrites(ctx context.Context, b *testing.B, out io.Writer, batched time.Duration, n int) {
	m := min(*benchRowByRow, n)
	s, _ := newStore(b)
	if err := s.Append(ctx, []*domain.Report{benchReport(m, benchStart)}); err != nil { // partitions
		b.Fatal(err)
	}
	began := time.Now()
	for i := range m {
		if err := insertReportRow(ctx, s.DB(), benchReport(i, benchStart)); err != nil {
			b.Fatalf("row by row: %v", err)
		}
	}
	rowTime := time.Since(began)
	printRate(out, "write row by row (1 INSERT a report)", m, rowTime)
	fmt.Fprintf(out, "batched writing is %.1f× row by row\n", rowTime.Seconds()/float64(m)/(batched.Seconds()/float64(n)))
}

// insertReportRow is the naive writer in today's layout: one INSERT of the
// report row (ranks packed with history_report_ranks' layout), one
// transaction per report, no rollups.
func insertReportRow(ctx context.Context, db postgres.DB, r *domain.Report) error {
	return pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `INSERT INTO history_reports
		(worker_addr, report_time, source_instance_id, sequence_id, status, last_error, worker_type, model, zone, token_usage_spread, ranks)
		VALUES ($1, $2, $3, $4, $5, NULLIF($6, ''), $7, NULLIF($8, ''), NULLIF($9, ''), $10, $11) ON CONFLICT DO NOTHING`,
			r.Worker.Addr, r.ReportTime, r.SourceInstanceID, int64(r.SequenceID), int16(r.Status), r.LastError,
			int16(r.Worker.Type), r.Worker.Model, r.Worker.Zone, audit.Spread(r), postgres.PackRanks(r.Ranks))
		return err
	})
}
