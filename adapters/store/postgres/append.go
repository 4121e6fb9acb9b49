package postgres

import (
	"context"
	"time"

	"github.com/loadreporter/loadreporter/domain"
	"github.com/loadreporter/loadreporter/domain/audit"
)

// Append stores reports with their ranks in one transaction; reports that
// are already stored are skipped. See ports.HistoryStore.
func (s *Store) Append(ctx context.Context, reports []*domain.Report) error {
	if err := audit.ValidateReports(reports); err != nil {
		return err
	}
	if len(reports) == 0 {
		return nil
	}
	if err := s.ensureDays(ctx, reports); err != nil {
		return wrapErr(ctx, "create partitions", err)
	}
	var b batch
	b.add(reports)
	tx, err := s.db.Begin(ctx)
	if err != nil {
		return wrapErr(ctx, "append", err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, insertReportsAndRanks, b.args()...); err != nil {
		return wrapErr(ctx, "append", err)
	}
	return wrapErr(ctx, "append commit", tx.Commit(ctx))
}

// batch holds reports and their ranks as the column arrays that
// insertReportsAndRanks unnests: one element per report (r…) and one per
// rank (k…).
type batch struct {
	rw, rs, re, rm, rz []string
	rt                 []time.Time
	rq                 []int64
	rst, rwt           []int16
	rsp                []float64

	kw, ks                                    []string
	kt, kst                                   []time.Time
	kq                                        []int64
	kd                                        []int32
	krun, kwait, kunc, kused, ktot, kmax, kmr []int64
	kusage, kgen, kcache, kutil               []float64
}

// add appends reports to the batch. A report twice in one batch is
// written once (its ranks too).
func (b *batch) add(reports []*domain.Report) {
	type identity struct {
		source string
		seq    uint64
	}
	seen := make(map[identity]bool, len(reports))
	for _, r := range reports {
		id := identity{r.SourceInstanceID, r.SequenceID}
		if seen[id] {
			continue
		}
		seen[id] = true
		t := r.ReportTime.UTC()
		b.addReport(r, t)
		for _, k := range r.Ranks {
			b.addRank(r, t, k)
		}
	}
}

func (b *batch) addReport(r *domain.Report, t time.Time) {
	b.rw = append(b.rw, r.Worker.Addr)
	b.rt = append(b.rt, t)
	b.rs = append(b.rs, r.SourceInstanceID)
	b.rq = append(b.rq, int64(r.SequenceID))
	b.rst = append(b.rst, int16(r.Status))
	b.re = append(b.re, r.LastError)
	b.rwt = append(b.rwt, int16(r.Worker.Type))
	b.rm = append(b.rm, r.Worker.Model)
	b.rz = append(b.rz, r.Worker.Zone)
	b.rsp = append(b.rsp, audit.Spread(r))
}

// addRank appends one rank of r, reported at t (UTC); a rank without a
// snapshot time takes the report's.
func (b *batch) addRank(r *domain.Report, t time.Time, k domain.RankLoad) {
	snap := k.SnapshotTime
	if snap.IsZero() {
		snap = t
	}
	b.kw = append(b.kw, r.Worker.Addr)
	b.kt = append(b.kt, t)
	b.ks = append(b.ks, r.SourceInstanceID)
	b.kq = append(b.kq, int64(r.SequenceID))
	b.kd = append(b.kd, int32(k.DPRank))
	b.kst = append(b.kst, snap.UTC())
	b.krun = append(b.krun, k.NumRunningReqs)
	b.kwait = append(b.kwait, k.NumWaitingReqs)
	b.kunc = append(b.kunc, k.NumWaitingUncachedTokens)
	b.kused = append(b.kused, k.NumUsedTokens)
	b.ktot = append(b.ktot, k.NumTotalTokens)
	b.kmax = append(b.kmax, k.MaxTotalNumTokens)
	b.kmr = append(b.kmr, k.MaxRunningRequests)
	b.kusage = append(b.kusage, k.TokenUsage)
	b.kgen = append(b.kgen, k.GenThroughput)
	b.kcache = append(b.kcache, k.CacheHitRate)
	b.kutil = append(b.kutil, k.Utilization)
}

// args are the parameters of insertReportsAndRanks, $1 to $27 in order.
func (b *batch) args() []any {
	return []any{b.rw, b.rt, b.rs, b.rq, b.rst, b.re, b.rwt, b.rm, b.rz, b.rsp,
		b.kw, b.kt, b.ks, b.kq, b.kd, b.kst, b.krun, b.kwait, b.kunc, b.kused, b.ktot, b.kmax, b.kmr,
		b.kusage, b.kgen, b.kcache, b.kutil}
}

// insertReportsAndRanks writes a batch in one statement. Reports already
// stored are skipped by the primary key (ON CONFLICT DO NOTHING), and only
// the ranks of the reports actually inserted are written: rank rows exist
// only together with their report (Append, retention and the default
// partition clean-up change both in one transaction), so the rank insert
// needs no conflict check, which makes it markedly cheaper.
const insertReportsAndRanks = `
WITH new AS (
    INSERT INTO history_reports
        (worker_addr, report_time, source_instance_id, sequence_id, status, last_error, worker_type, model, zone,
         token_usage_spread)
    SELECT w, t, s, q, st, NULLIF(e, ''), wt, NULLIF(m, ''), NULLIF(z, ''), sp
    FROM unnest($1::text[], $2::timestamptz[], $3::text[], $4::bigint[], $5::smallint[],
                $6::text[], $7::smallint[], $8::text[], $9::text[], $10::float8[]) AS u(w, t, s, q, st, e, wt, m, z, sp)
    ON CONFLICT DO NOTHING
    RETURNING worker_addr, report_time, source_instance_id, sequence_id
)
INSERT INTO history_ranks
    (worker_addr, report_time, source_instance_id, sequence_id, dp_rank, snapshot_time,
     num_running_reqs, num_waiting_reqs, num_waiting_uncached_tokens, num_used_tokens,
     num_total_tokens, max_total_num_tokens, max_running_requests,
     token_usage, gen_throughput, cache_hit_rate, utilization)
SELECT k.* FROM unnest($11::text[], $12::timestamptz[], $13::text[], $14::bigint[], $15::integer[], $16::timestamptz[],
                       $17::bigint[], $18::bigint[], $19::bigint[], $20::bigint[], $21::bigint[], $22::bigint[], $23::bigint[],
                       $24::float8[], $25::float8[], $26::float8[], $27::float8[])
         AS k(w, t, s, q, dp, snap, run, wait, unc, used, tot, maxt, maxr, usage, gen, hit, util)
JOIN new ON new.worker_addr = k.w AND new.report_time = k.t
        AND new.source_instance_id = k.s AND new.sequence_id = k.q`
