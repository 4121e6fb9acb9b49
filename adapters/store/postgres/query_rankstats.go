package postgres

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/loadreporter/loadreporter/domain/audit"
)

// RankStats reads the minutes wholly inside the window from
// history_minute_ranks (a narrow row per worker and minute: each rank's
// sums and bounds) and the reports of the minutes the window cuts from
// history_reports. The 95th percentile is exact: the minutes' bounds say
// which of them can hold the two values it needs, and only those minutes'
// values are read, from history_rank_minute_usage (percentile.go).

const rankMinutesSQL = `
SELECT worker_addr, minute, ranks FROM history_minute_ranks
WHERE minute >= $1 AND minute < $2
  AND (cardinality($3::text[]) = 0 OR worker_addr = ANY($3::text[]))`

// rankUsageSQL reads the values of the minutes k names: a worker, a range
// of consecutive minutes and the ranks wanted in it (bit dp_rank of mask,
// or every rank for -1), one primary key range scan each (a worker's ranks
// tend to peak in the same minutes, so a range holds several ranks' reads
// at once). It runs with hash and merge joins off: given thousands of
// ranges, the planner would rather sort the whole table to merge-join it,
// several times slower.
const rankUsageSQL = `
SELECT u.worker_addr, u.minute, u.dp_rank, u.usage
FROM unnest($1::text[], $2::timestamptz[], $3::timestamptz[], $4::bigint[]) AS k(w, f, l, mask)
JOIN history_rank_minute_usage u ON u.worker_addr = k.w AND u.minute >= k.f AND u.minute <= k.l
WHERE u.minute >= $5 AND u.minute < $6
  AND (k.mask = -1 OR (u.dp_rank BETWEEN 0 AND 62 AND (k.mask >> u.dp_rank) & 1 = 1))`

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
	spans    []usageSpan // the whole minutes'
	edge     []float64   // values of the minutes the window cuts
	band     usageBand
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
	q.Window = heldWindow(q.Window)
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
		if err := readRankEdges(ctx, tx, edgeA, edgeB, workers, ranks, acc); err != nil {
			return err
		}
		return readBandValues(ctx, tx, first, last, accs)
	})
	if err != nil {
		return audit.RankStatsResult{}, err
	}
	var res audit.RankStatsResult
	for g, a := range accs {
		n := float64(a.n)
		res.Stats = append(res.Stats, audit.RankStat{
			WorkerAddr: g.worker, DPRank: int64(g.dp), Reports: a.n,
			AvgTokenUsage: a.sum / n, MaxTokenUsage: a.maxUsage, P95TokenUsage: a.band.p95(),
			MaxWaitingReqs: a.maxWait, MeanGenThroughput: a.gen / n,
		})
	}
	res.Finish(q.MaxResults())
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
	rows, err := tx.Query(ctx, rankMinutesSQL, first, last, workers)
	if err != nil {
		return err
	}
	var (
		worker string
		minute time.Time
		packed []byte
		// A worker's groups by rank, so a row costs one lookup by
		// worker, not one a rank; and room for a span a minute.
		byWorker = map[string]map[int32]*rankAcc{}
		room     = int(min(last.Sub(first)/time.Minute, 4*60))
	)
	_, err = pgx.ForEachRow(rows, []any{&worker, &minute, &packed}, func() error {
		mine := byWorker[worker]
		if mine == nil {
			mine = map[int32]*rankAcc{}
			byWorker[worker] = mine
		}
		return unpackMinuteRanks(packed, func(k minuteRank) {
			if len(ranks) > 0 && !slices.Contains(ranks, k.dp) {
				return
			}
			a := mine[k.dp]
			if a == nil {
				a = acc(rankGroup{worker, k.dp})
				a.spans = slices.Grow(a.spans, room)
				mine[k.dp] = a
			}
			a.add(k.reports, k.usageSum, k.usageMax, k.waitingMax, k.genSum)
			a.spans = append(a.spans, usageSpan{minute: int32(minute.Unix() / 60), n: int32(k.reports), lo: k.usageMin, hi: k.usageMax})
		})
	})
	return err
}

// readBandValues decides each group's band and reads the values of the
// minutes it must read, all groups' in one statement.
func readBandValues(ctx context.Context, tx pgx.Tx, first, last time.Time, accs map[rankGroup]*rankAcc) error {
	want := map[rankKey]*usageBand{}
	for g, a := range accs {
		a.band = bandOf(a.spans, a.edge)
		for _, r := range a.band.read {
			m := time.Unix(int64(a.spans[r].minute)*60, 0).UTC()
			want[rankKey{minuteKey{g.worker, m}, g.dp}] = &a.band
		}
	}
	if len(want) == 0 {
		return nil
	}
	workers, froms, lasts, masks := minuteRanges(want)
	if _, err := tx.Exec(ctx, `SET LOCAL enable_hashjoin = off; SET LOCAL enable_mergejoin = off`); err != nil {
		return err
	}
	rows, err := tx.Query(ctx, rankUsageSQL, workers, froms, lasts, masks, first, last)
	if err != nil {
		return err
	}
	var (
		k     rankKey
		usage []byte
		found int
	)
	_, err = pgx.ForEachRow(rows, []any{&k.worker, &k.minute, &k.dp, &usage}, func() error {
		k.minute = k.minute.UTC()
		if b := want[k]; b != nil {
			b.addRead(usage)
			found++
		}
		return nil
	})
	if err == nil && found != len(want) {
		err = fmt.Errorf("history_rank_minute_usage holds %d of the %d minutes history_minute_ranks names", found, len(want))
	}
	return err
}

// minuteRanges covers the minutes of keys with ranges of consecutive
// minutes per worker, and the ranks wanted in each, as rankUsageSQL takes
// them.
func minuteRanges(keys map[rankKey]*usageBand) (workers []string, froms, lasts []time.Time, masks []int64) {
	ks := slices.SortedFunc(maps.Keys(keys), func(a, b rankKey) int {
		return cmp.Or(compareMinuteKeys(a.minuteKey, b.minuteKey), cmp.Compare(a.dp, b.dp))
	})
	for i, k := range ks {
		bit := int64(-1)
		if k.dp >= 0 && k.dp <= 62 {
			bit = 1 << k.dp
		}
		switch {
		case i > 0 && ks[i-1].minuteKey == k.minuteKey:
		case i > 0 && ks[i-1].worker == k.worker && ks[i-1].minute.Add(time.Minute).Equal(k.minute):
			lasts[len(lasts)-1] = k.minute
		default:
			workers, froms, lasts, masks = append(workers, k.worker), append(froms, k.minute), append(lasts, k.minute), append(masks, 0)
		}
		if m := &masks[len(masks)-1]; bit == -1 || *m == -1 {
			*m = -1
		} else {
			*m |= bit
		}
	}
	return workers, froms, lasts, masks
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
