package postgres

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/loadreporter/loadreporter/domain"
)

// DeleteBefore drops the daily partitions that end at or before t, then
// deletes at most limit reports older than t from the default partition.
// Reports in the partition that contains t are kept until that whole day is
// older than t. See ports.HistoryStore.
func (s *Store) DeleteBefore(ctx context.Context, t time.Time, limit int) (int64, error) {
	if limit <= 0 {
		return 0, domain.Errorf(domain.CodeInvalidArgument, "limit must be > 0, got %d", limit)
	}
	days, err := s.partitionDays(ctx)
	if err != nil {
		return 0, wrapErr(ctx, "list partitions", err)
	}
	var n int64
	for _, d := range days {
		if d.AddDate(0, 0, 1).After(t) {
			continue
		}
		dropped, err := s.dropDay(ctx, d)
		if err != nil {
			return n, wrapErr(ctx, "drop partition", err)
		}
		n += dropped
	}
	deleted, err := s.deleteDefault(ctx, t, limit)
	if err != nil {
		return n, wrapErr(ctx, "delete", err)
	}
	return n + deleted, nil
}

// partitionDays lists the days of the daily partitions of history_reports.
func (s *Store) partitionDays(ctx context.Context) ([]time.Time, error) {
	tx, err := s.db.Begin(ctx)
	if err != nil {
		return nil, err
	}
	defer func() { _ = tx.Rollback(ctx) }()
	rows, err := tx.Query(ctx, `
		SELECT c.relname::text FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
		WHERE i.inhparent = 'history_reports'::regclass`)
	if err != nil {
		return nil, err
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, err
	}
	var days []time.Time
	prefix := "history_reports_p"
	for _, n := range names {
		suffix, ok := strings.CutPrefix(n, prefix)
		if !ok || len(suffix) != len(dayFormat) {
			continue
		}
		if _, err := strconv.Atoi(suffix); err != nil {
			continue
		}
		d, err := time.Parse(dayFormat, suffix)
		if err != nil {
			continue
		}
		days = append(days, d)
	}
	return days, tx.Commit(ctx)
}

// dropDay drops one day's partitions and returns how many reports they
// held.
func (s *Store) dropDay(ctx context.Context, day time.Time) (int64, error) {
	tx, err := s.db.Begin(ctx)
	if err != nil {
		return 0, err
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, `SET LOCAL lock_timeout = '`+ddlLockTimeout+`'`); err != nil {
		return 0, err
	}
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1, hashtext(current_schema()))`, partitionLock); err != nil {
		return 0, err
	}
	reports := ident("history_reports_p" + day.Format(dayFormat))
	var exists bool
	if err := tx.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, "history_reports_p"+day.Format(dayFormat)).Scan(&exists); err != nil {
		return 0, err
	}
	if !exists { // another process dropped it
		return 0, nil
	}
	var n int64
	if err := tx.QueryRow(ctx, `SELECT count(*) FROM `+reports).Scan(&n); err != nil {
		return 0, err
	}
	for _, p := range partitioned {
		if _, err := tx.Exec(ctx, `DROP TABLE IF EXISTS `+ident(p.table+"_p"+day.Format(dayFormat))); err != nil {
			return 0, err
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return 0, err
	}
	s.mu.Lock()
	delete(s.days, day)
	s.mu.Unlock()
	return n, nil
}

// deleteDefault deletes at most limit reports older than t from the
// default partition of history_reports, and the rollups of the minutes
// that end at or before t from the default partitions of the rollups (the
// store writes rollups there only for days whose partitions were dropped
// while it wrote).
func (s *Store) deleteDefault(ctx context.Context, t time.Time, limit int) (int64, error) {
	tx, err := s.db.Begin(ctx)
	if err != nil {
		return 0, err
	}
	defer func() { _ = tx.Rollback(ctx) }()
	tag, err := tx.Exec(ctx, `
		DELETE FROM history_reports_default d USING (
		    SELECT worker_addr, report_time, source_instance_id, sequence_id
		    FROM history_reports_default WHERE report_time < $1 LIMIT $2) v
		WHERE d.worker_addr = v.worker_addr AND d.report_time = v.report_time
		  AND d.source_instance_id = v.source_instance_id AND d.sequence_id = v.sequence_id`, t, limit)
	if err != nil {
		return 0, err
	}
	for _, table := range []string{"history_minutes_default", "history_minute_entries_default", "history_minute_ranks_default",
		"history_rank_minute_usage_default"} {
		if _, err := tx.Exec(ctx, `DELETE FROM `+ident(table)+` WHERE minute + interval '1 minute' <= $1`, t); err != nil {
			return 0, err
		}
	}
	return tag.RowsAffected(), tx.Commit(ctx)
}
