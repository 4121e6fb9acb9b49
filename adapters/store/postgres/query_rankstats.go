package postgres

import (
	"cmp"
	"context"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/loadreporter/loadreporter/domain/audit"
)

// RankStats reads the minutes wholly inside the window from
// history_rank_minutes and the reports of the minutes the window cuts from
// history_reports. The 95th percentile is exact: every minute keeps its
// token_usage values in order, and the percentile is found by merging them
// from the top (it lies in the top 5 % of the values).

const rankMinutesSQL = `
SELECT worker_addr, dp_rank, reports, usage_sum, usage_max, waiting_max, gen_sum, usage
FROM history_rank_minutes
WHERE minute >= $1 AND minute < $2
  AND (cardinality($3::text[]) = 0 OR worker_addr = ANY($3::text[]))
  AND (cardinality($4::integer[]) = 0 OR dp_rank = ANY($4::integer[]))`

const rankEdgesSQL = `
SELECT worker_addr, ranks FROM history_reports
WHERE ((report_time >= $1 AND report_time < $2) OR (report_time >= $3 AND report_time < $4))
  AND (cardinality($5::text[]) = 0 OR worker_addr = ANY($5::text[])) AND ranks IS NOT NULL`

// rankAcc accumulates one (worker, rank).
type rankAcc struct {
	n        int64
	sum, gen float64
	maxUsage float64
	maxWait  int64
	runs     []usageRun
	edge     []float64
}

func (a *rankAcc) add(n int64, sum, maxUsage float64, maxWait int64, gen float64) {
	if a.n == 0 {
		a.maxUsage, a.maxWait = maxUsage, maxWait
	}
	a.n += n
	a.sum += sum
	a.gen += gen
	a.maxUsage = max(a.maxUsage, maxUsage)
	a.maxWait = max(a.maxWait, maxWait)
}

type rankGroup struct {
	worker string
	dp     int32
}

// RankStats returns per-rank statistics. See ports.HistoryQuery.
func (s *Store) RankStats(ctx context.Context, q audit.RankStatsQuery) (audit.RankStatsResult, error) {
	if err := q.Validate(); err != nil {
		return audit.RankStatsResult{}, err
	}
	ranks, workers := ranks32(q.Ranks), nonNil(q.Workers)
	first, last := ceilMinute(q.Since), minuteOf(q.Until.UTC())
	edgeA, edgeB := audit.Window{Since: q.Since, Until: first}, audit.Window{Since: last, Until: q.Until}
	if !first.Before(last) { // no whole minute: the window is all edge
		edgeA, edgeB = q.Window, audit.Window{Since: q.Until, Until: q.Until}
	}
	accs := map[rankGroup]*rankAcc{}
	acc := func(g rankGroup) *rankAcc {
		a := accs[g]
		if a == nil {
			a = &rankAcc{}
			accs[g] = a
		}
		return a
	}
	err := s.readTx(ctx, "rank stats", func(tx pgx.Tx) error {
		if first.Before(last) {
			if err := readRankMinutes(ctx, tx, first, last, workers, ranks, acc); err != nil {
				return err
			}
		}
		return readRankEdges(ctx, tx, edgeA, edgeB, workers, ranks, acc)
	})
	if err != nil {
		return audit.RankStatsResult{}, err
	}
	var res audit.RankStatsResult
	for g, a := range accs {
		slices.Sort(a.edge)
		n := float64(a.n)
		res.Stats = append(res.Stats, audit.RankStat{
			WorkerAddr: g.worker, DPRank: int64(g.dp), Reports: a.n,
			AvgTokenUsage: a.sum / n, MaxTokenUsage: a.maxUsage, P95TokenUsage: p95(a),
			MaxWaitingReqs: a.maxWait, MeanGenThroughput: a.gen / n,
		})
	}
	slices.SortFunc(res.Stats, func(a, b audit.RankStat) int {
		return cmp.Or(strings.Compare(a.WorkerAddr, b.WorkerAddr), cmp.Compare(a.DPRank, b.DPRank))
	})
	res.Stats, res.Truncated = truncate(res.Stats, q.MaxResults())
	return res, nil
}

func ceilMinute(t time.Time) time.Time {
	m := minuteOf(t.UTC())
	if m.Before(t) {
		m = m.Add(time.Minute)
	}
	return m
}

func readRankMinutes(ctx context.Context, tx pgx.Tx, first, last time.Time, workers []string, ranks []int32,
	acc func(rankGroup) *rankAcc) error {
	rows, err := tx.Query(ctx, rankMinutesSQL, first, last, workers, ranks)
	if err != nil {
		return err
	}
	var (
		g                  rankGroup
		n, maxWait         int64
		sum, maxUsage, gen float64
		usage              []byte
	)
	_, err = pgx.ForEachRow(rows, []any{&g.worker, &g.dp, &n, &sum, &maxUsage, &maxWait, &gen, &usage}, func() error {
		a := acc(g)
		a.add(n, sum, maxUsage, maxWait, gen)
		a.runs = append(a.runs, usageRun{b: slices.Clone(usage)})
		return nil
	})
	return err
}

func readRankEdges(ctx context.Context, tx pgx.Tx, a, b audit.Window, workers []string, ranks []int32,
	acc func(rankGroup) *rankAcc) error {
	if !a.Since.Before(a.Until) && !b.Since.Before(b.Until) {
		return nil
	}
	rows, err := tx.Query(ctx, rankEdgesSQL, a.Since, a.Until, b.Since, b.Until, workers)
	if err != nil {
		return err
	}
	var (
		worker string
		packed []byte
	)
	_, err = pgx.ForEachRow(rows, []any{&worker, &packed}, func() error {
		ks, err := unpackRanks(packed)
		if err != nil {
			return err
		}
		for _, k := range ks {
			if len(ranks) > 0 && !slices.Contains(ranks, int32(k.DPRank)) {
				continue
			}
			r := acc(rankGroup{worker, int32(k.DPRank)})
			r.add(1, k.TokenUsage, k.TokenUsage, k.NumWaitingReqs, k.GenThroughput)
			r.edge = append(r.edge, k.TokenUsage)
		}
		return nil
	})
	return err
}

// p95 is percentile_cont(0.95) of a's values (every run ascending, edge
// sorted): the values at ascending positions lo and lo+1, found by taking
// the largest remaining value of any run n-lo times.
func p95(a *rankAcc) float64 {
	n := int(a.n)
	if n == 0 {
		return math.NaN()
	}
	pos := 0.95 * float64(n-1)
	lo := int(math.Floor(pos))
	runs := a.runs
	if len(a.edge) > 0 {
		runs = append(runs, usageRun{f: a.edge})
	}
	vLo, vHi := topValues(runs, n-lo)
	if lo+1 >= n {
		return vLo
	}
	return vLo + (pos-float64(lo))*(vHi-vLo)
}
