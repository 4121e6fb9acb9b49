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
	for _, table := range []string{"history_minutes", "history_minute_entries", "history_rank_minutes"} {
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

// readStoredRanks reads the stored history_rank_minutes rows of ks.
func readStoredRanks(ctx context.Context, tx pgx.Tx, ks minuteKeys) ([]*rankRow, error) {
	rows, err := tx.Query(ctx, `SELECT worker_addr, minute, dp_rank, reports, usage_sum, usage_max, waiting_max, gen_sum, usage
		FROM history_rank_minutes m JOIN unnest($1::text[], $2::timestamptz[]) AS k(w, m)
		  ON m.worker_addr = k.w AND m.minute = k.m
		WHERE m.minute >= $3 AND m.minute <= $4`, ks.workers, ks.minutes, ks.lo, ks.hi)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (*rankRow, error) {
		r := &rankRow{}
		var usage []byte
		err := row.Scan(&r.worker, &r.minute, &r.dp, &r.reports, &r.usageSum, &r.usageMax, &r.waitingMax, &r.genSum, &usage)
		r.minute = r.minute.UTC()
		r.usage = decodeUsage(usage)
		return r, err
	})
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

// copyRankMinutes writes rank rows with one COPY.
func copyRankMinutes(ctx context.Context, tx pgx.Tx, ranks map[rankKey]*rankRow) error {
	rows := make([][]any, 0, len(ranks))
	for _, r := range ranks {
		rows = append(rows, []any{r.worker, r.minute, r.dp, r.reports, r.usageSum, r.usageMax, r.waitingMax, r.genSum, encodeUsage(r.usage)})
	}
	_, err := tx.CopyFrom(ctx, pgx.Identifier{"history_rank_minutes"},
		[]string{"worker_addr", "minute", "dp_rank", "reports", "usage_sum", "usage_max", "waiting_max", "gen_sum", "usage"},
		pgx.CopyFromRows(rows))
	return err
}
