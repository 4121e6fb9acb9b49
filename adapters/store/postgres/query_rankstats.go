package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/loadreporter/loadreporter/domain/audit"
)

const rankStatsSQL = `
SELECT worker_addr, dp_rank, count(*), avg(token_usage), max(token_usage),
       percentile_cont(0.95) WITHIN GROUP (ORDER BY token_usage),
       max(num_waiting_reqs), avg(gen_throughput)
FROM history_ranks
WHERE ` + windowAndWorkers + `
  AND (cardinality($4::integer[]) = 0 OR dp_rank = ANY($4::integer[]))
GROUP BY worker_addr, dp_rank
ORDER BY worker_addr, dp_rank
LIMIT $5`

// RankStats returns per-rank statistics. See ports.HistoryQuery.
func (s *Store) RankStats(ctx context.Context, q audit.RankStatsQuery) (audit.RankStatsResult, error) {
	if err := q.Validate(); err != nil {
		return audit.RankStatsResult{}, err
	}
	ranks := ranks32(q.Ranks)
	limit := q.MaxResults()
	var res audit.RankStatsResult
	err := s.readTx(ctx, "rank stats", func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, rankStatsSQL, q.Since, q.Until, nonNil(q.Workers), ranks, limit+1)
		if err != nil {
			return err
		}
		res.Stats, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (audit.RankStat, error) {
			var (
				st audit.RankStat
				dp int32
			)
			err := row.Scan(&st.WorkerAddr, &dp, &st.Reports, &st.AvgTokenUsage, &st.MaxTokenUsage,
				&st.P95TokenUsage, &st.MaxWaitingReqs, &st.MeanGenThroughput)
			st.DPRank = int64(dp)
			return st, err
		})
		return err
	})
	if err != nil {
		return audit.RankStatsResult{}, err
	}
	if len(res.Stats) > limit {
		res.Stats, res.Truncated = res.Stats[:limit], true
	}
	return res, nil
}
