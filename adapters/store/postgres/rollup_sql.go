package postgres

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/loadreporter/loadreporter/domain"
)

// rollUp merges the reports a transaction inserted into the rollups of
// their minutes: it reads the rows of those minutes (the worker locks keep
// other appends out of them), merges, deletes the old rows and copies the
// merged ones in.
func rollUp(ctx context.Context, tx pgx.Tx, inserted []*domain.Report) error {
	if len(inserted) == 0 {
		return nil
	}
	ru := rollupsOf(inserted)
	ks := minuteKeysOf(ru)
	stored, err := readStoredMinutes(ctx, tx, ks)
	if err != nil {
		return err
	}
	storedRanks, err := readStoredRanks(ctx, tx, ks)
	if err != nil {
		return err
	}
	ru.merge(stored, storedRanks)
	if len(stored) > 0 || len(storedRanks) > 0 {
		if err := deleteRollups(ctx, tx, ks); err != nil {
			return err
		}
	}
	return writeRollups(ctx, tx, ks, ru)
}

// rebuildRollups computes the rollups of the minutes of reports again from
// every report stored in them (for reports that reached the table by
// other ways than Append, whose minutes may or may not be rolled up).
func rebuildRollups(ctx context.Context, tx pgx.Tx, reports []*domain.Report) error {
	ks := minuteKeysOf(rollupsOf(reports))
	rows, err := tx.Query(ctx, reportSelect+` h JOIN unnest($1::text[], $2::timestamptz[]) AS k(w, m)
		  ON h.worker_addr = k.w AND h.report_time >= k.m AND h.report_time < k.m + interval '1 minute'
		WHERE h.report_time >= $3 AND h.report_time < $4`, ks.workers, ks.minutes, ks.lo, ks.hi.Add(time.Minute))
	if err != nil {
		return err
	}
	all, err := pgx.CollectRows(rows, scanReport)
	if err != nil {
		return err
	}
	if err := deleteRollups(ctx, tx, ks); err != nil {
		return err
	}
	ru := rollupsOf(all)
	ru.merge(nil, nil)
	return writeRollups(ctx, tx, ks, ru)
}

// minuteKeys are the minutes of a batch of rollups, in order, as the
// column arrays the statements take.
type minuteKeys struct {
	keys    []minuteKey
	workers []string
	minutes []time.Time
	lo, hi  time.Time
}

func minuteKeysOf(ru rollups) minuteKeys {
	ks := minuteKeys{keys: slices.SortedFunc(maps.Keys(ru.minutes), compareMinuteKeys)}
	for _, k := range ks.keys {
		ks.workers, ks.minutes = append(ks.workers, k.worker), append(ks.minutes, k.minute)
	}
	ks.lo, ks.hi = slices.MinFunc(ks.minutes, time.Time.Compare), slices.MaxFunc(ks.minutes, time.Time.Compare)
	return ks
}

func deleteRollups(ctx context.Context, tx pgx.Tx, ks minuteKeys) error {
	for _, table := range []string{"history_minutes", "history_minute_entries", "history_minute_ranks", "history_rank_minute_usage"} {
		if _, err := tx.Exec(ctx, `DELETE FROM `+ident(table)+` m USING unnest($1::text[], $2::timestamptz[]) AS k(w, m)
			WHERE m.worker_addr = k.w AND m.minute = k.m AND m.minute >= $3 AND m.minute <= $4`,
			ks.workers, ks.minutes, ks.lo, ks.hi); err != nil {
			return err
		}
	}
	return nil
}

func writeRollups(ctx context.Context, tx pgx.Tx, ks minuteKeys, ru rollups) error {
	if err := copyMinutes(ctx, tx, ks.keys, ru.minutes); err != nil {
		return err
	}
	return copyRankMinutes(ctx, tx, ru.ranks)
}

func compareMinuteKeys(a, b minuteKey) int {
	return cmp.Or(strings.Compare(a.worker, b.worker), a.minute.Compare(b.minute))
}

// minuteColumns are the columns of history_minutes in table order.
var minuteColumns = []string{
	"worker_addr", "minute", "reports", "unhealthy", "status_mask", "last_error",
	"first_time", "last_time", "first_source", "last_source", "source_count", "max_step",
	"min_spread", "max_spread", "peak_time",
}

// readStoredMinutes reads the stored history_minutes rows of ks.
func readStoredMinutes(ctx context.Context, tx pgx.Tx, ks minuteKeys) ([]*minuteRow, error) {
	rows, err := tx.Query(ctx, `SELECT worker_addr, minute, sources, errors, entries
		FROM history_minute_entries m JOIN unnest($1::text[], $2::timestamptz[]) AS k(w, m)
		  ON m.worker_addr = k.w AND m.minute = k.m
		WHERE m.minute >= $3 AND m.minute <= $4`, ks.workers, ks.minutes, ks.lo, ks.hi)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (*minuteRow, error) {
		m := &minuteRow{}
		var (
			sources, errs []string
			packed        []byte
		)
		if err := row.Scan(&m.worker, &m.minute, &sources, &errs, &packed); err != nil {
			return nil, err
		}
		m.minute = m.minute.UTC()
		var err error
		m.entries, err = unpackEntries(m.minute, packed, sources, errs)
		return m, err
	})
}

// readStoredRanks reads the stored ranks of the minutes of ks, with their
// values.
func readStoredRanks(ctx context.Context, tx pgx.Tx, ks minuteKeys) ([]*rankRow, error) {
	rows, err := tx.Query(ctx, `SELECT worker_addr, minute, ranks
		FROM history_minute_ranks m JOIN unnest($1::text[], $2::timestamptz[]) AS k(w, m)
		  ON m.worker_addr = k.w AND m.minute = k.m
		WHERE m.minute >= $3 AND m.minute <= $4`, ks.workers, ks.minutes, ks.lo, ks.hi)
	if err != nil {
		return nil, err
	}
	byKey := map[rankKey]*rankRow{}
	var (
		out    []*rankRow
		mk     minuteKey
		packed []byte
	)
	_, err = pgx.ForEachRow(rows, []any{&mk.worker, &mk.minute, &packed}, func() error {
		mk.minute = mk.minute.UTC()
		return unpackMinuteRanks(packed, func(k minuteRank) {
			r := &rankRow{rankKey: rankKey{mk, k.dp}, reports: k.reports, usageSum: k.usageSum, usageMax: k.usageMax,
				waitingMax: k.waitingMax, genSum: k.genSum}
			byKey[r.rankKey] = r
			out = append(out, r)
		})
	})
	if err != nil || len(out) == 0 {
		return nil, err
	}
	rows, err = tx.Query(ctx, `SELECT worker_addr, minute, dp_rank, usage
		FROM history_rank_minute_usage u JOIN unnest($1::text[], $2::timestamptz[]) AS k(w, m)
		  ON u.worker_addr = k.w AND u.minute = k.m
		WHERE u.minute >= $3 AND u.minute <= $4`, ks.workers, ks.minutes, ks.lo, ks.hi)
	if err != nil {
		return nil, err
	}
	var (
		rk    rankKey
		usage []byte
	)
	_, err = pgx.ForEachRow(rows, []any{&rk.worker, &rk.minute, &rk.dp, &usage}, func() error {
		rk.minute = rk.minute.UTC()
		if r := byKey[rk]; r != nil {
			r.usage = decodeUsage(usage)
		}
		return nil
	})
	for _, r := range out {
		if err == nil && int64(len(r.usage)) != r.reports {
			err = fmt.Errorf("history_rank_minute_usage holds %d values of %s rank %d at %s, history_minute_ranks %d",
				len(r.usage), r.worker, r.dp, r.minute.Format(time.RFC3339), r.reports)
		}
	}
	return out, err
}

// copyMinutes writes the rows of keys (all in ms) with one COPY into
// history_minutes and one into history_minute_entries.
func copyMinutes(ctx context.Context, tx pgx.Tx, keys []minuteKey, ms map[minuteKey]*minuteRow) error {
	rows := make([][]any, 0, len(keys))
	entries := make([][]any, 0, len(keys))
	for _, k := range keys {
		m := ms[k]
		s := m.summary()
		packed, sources, errs := packEntries(m.minute, m.entries)
		if len(sources) > math.MaxUint16 || len(errs) > math.MaxUint16 {
			return fmt.Errorf("worker %q has %d source instances and %d errors in the minute of %s; at most %d each",
				m.worker, len(sources), len(errs), m.minute.Format(time.RFC3339), math.MaxUint16)
		}
		rows = append(rows, []any{
			m.worker, m.minute, s.reports, s.unhealthy, s.statusMask, nullIfEmpty(s.lastError),
			s.firstTime, s.lastTime, s.firstSource, s.lastSource, len(sources), s.maxStep.Microseconds(),
			s.minSpread, s.maxSpread, s.peakTime,
		})
		entries = append(entries, []any{m.worker, m.minute, sources, errs, packed})
	}
	if _, err := tx.CopyFrom(ctx, pgx.Identifier{"history_minutes"}, minuteColumns, pgx.CopyFromRows(rows)); err != nil {
		return err
	}
	_, err := tx.CopyFrom(ctx, pgx.Identifier{"history_minute_entries"},
		[]string{"worker_addr", "minute", "sources", "errors", "entries"}, pgx.CopyFromRows(entries))
	return err
}

// copyRankMinutes writes the ranks of every minute with one COPY into
// history_minute_ranks and one into history_rank_minute_usage.
func copyRankMinutes(ctx context.Context, tx pgx.Tx, ranks map[rankKey]*rankRow) error {
	byMinute := map[minuteKey][]*rankRow{}
	usage := make([][]any, 0, len(ranks))
	for _, r := range ranks {
		byMinute[r.minuteKey] = append(byMinute[r.minuteKey], r)
		usage = append(usage, []any{r.worker, r.minute, r.dp, encodeUsage(r.usage)})
	}
	rows := make([][]any, 0, len(byMinute))
	for k, rs := range byMinute {
		slices.SortFunc(rs, func(a, b *rankRow) int { return cmp.Compare(a.dp, b.dp) })
		rows = append(rows, []any{k.worker, k.minute, packMinuteRanks(rs)})
	}
	if _, err := tx.CopyFrom(ctx, pgx.Identifier{"history_minute_ranks"},
		[]string{"worker_addr", "minute", "ranks"}, pgx.CopyFromRows(rows)); err != nil {
		return err
	}
	_, err := tx.CopyFrom(ctx, pgx.Identifier{"history_rank_minute_usage"},
		[]string{"worker_addr", "minute", "dp_rank", "usage"}, pgx.CopyFromRows(usage))
	return err
}
