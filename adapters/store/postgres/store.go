package postgres

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/loadreporter/loadreporter/domain"
	"github.com/loadreporter/loadreporter/domain/audit"
	"github.com/loadreporter/loadreporter/ports"
)

// Store keeps report history in PostgreSQL. It is safe for concurrent use.
type Store struct {
	db      DB
	closeDB func()

	mu   sync.Mutex
	days map[time.Time]bool // UTC days whose partitions exist
}

var (
	_ ports.HistoryStore = (*Store)(nil)
	_ ports.HistoryQuery = (*Store)(nil)
)

// Options configure Open.
type Options struct {
	// MaxConns bounds the pool's connections (default DefaultMaxConns).
	MaxConns int
}

// Open returns a Store on a connection pool to the database at url (a
// postgres:// URL or a key=value DSN). It does not connect yet and does not
// migrate: call Migrate(ctx, store.DB()) first. Close releases the pool.
func Open(url string, o Options) (*Store, error) {
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		return nil, domain.Errorf(domain.CodeInvalidArgument, "database-url: %v", err)
	}
	p, err := newPool(cfg, o.MaxConns)
	if err != nil {
		return nil, domain.Errorf(domain.CodeInvalidArgument, "database-url: %v", err)
	}
	s := New(p)
	s.closeDB = p.Close
	return s, nil
}

// New returns a Store on db (for example a *pgxpool.Pool). Closing the
// Store does not close db.
func New(db DB) *Store {
	return &Store{db: db, days: map[time.Time]bool{}}
}

// DB returns the database the store uses, for Migrate.
func (s *Store) DB() DB { return s.db }

// Close releases the pool Open made.
func (s *Store) Close() {
	if s.closeDB != nil {
		s.closeDB()
	}
}

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
	var (
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
	)
	type identity struct {
		source string
		seq    uint64
	}
	seen := make(map[identity]bool, len(reports))
	for _, r := range reports {
		// A report twice in one batch is written once (its ranks too).
		id := identity{r.SourceInstanceID, r.SequenceID}
		if seen[id] {
			continue
		}
		seen[id] = true
		t := r.ReportTime.UTC()
		rw = append(rw, r.Worker.Addr)
		rt = append(rt, t)
		rs = append(rs, r.SourceInstanceID)
		rq = append(rq, int64(r.SequenceID))
		rst = append(rst, int16(r.Status))
		re = append(re, r.LastError)
		rwt = append(rwt, int16(r.Worker.Type))
		rm = append(rm, r.Worker.Model)
		rz = append(rz, r.Worker.Zone)
		rsp = append(rsp, audit.Spread(r))
		for _, k := range r.Ranks {
			snap := k.SnapshotTime
			if snap.IsZero() {
				snap = t
			}
			kw = append(kw, r.Worker.Addr)
			kt = append(kt, t)
			ks = append(ks, r.SourceInstanceID)
			kq = append(kq, int64(r.SequenceID))
			kd = append(kd, int32(k.DPRank))
			kst = append(kst, snap.UTC())
			krun = append(krun, k.NumRunningReqs)
			kwait = append(kwait, k.NumWaitingReqs)
			kunc = append(kunc, k.NumWaitingUncachedTokens)
			kused = append(kused, k.NumUsedTokens)
			ktot = append(ktot, k.NumTotalTokens)
			kmax = append(kmax, k.MaxTotalNumTokens)
			kmr = append(kmr, k.MaxRunningRequests)
			kusage = append(kusage, k.TokenUsage)
			kgen = append(kgen, k.GenThroughput)
			kcache = append(kcache, k.CacheHitRate)
			kutil = append(kutil, k.Utilization)
		}
	}
	tx, err := s.db.Begin(ctx)
	if err != nil {
		return wrapErr(ctx, "append", err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, insertReportsAndRanks, rw, rt, rs, rq, rst, re, rwt, rm, rz, rsp,
		kw, kt, ks, kq, kd, kst, krun, kwait, kunc, kused, ktot, kmax, kmr, kusage, kgen, kcache, kutil); err != nil {
		return wrapErr(ctx, "append", err)
	}
	return wrapErr(ctx, "append commit", tx.Commit(ctx))
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

// Partitioned tables, and the prefix of their daily partitions' names.
var partitioned = []string{"history_reports", "history_ranks"}

const dayFormat = "20060102"

// partitionLock is the first key of the advisory lock partition changes
// take (the second is a hash of the schema), so that two processes never
// create or drop the same partition at once.
const partitionLock = 0x6c727074 // "lrpt"

// ddlLockTimeout bounds how long partition changes wait for the tables'
// locks, so a long audit query never makes writers queue behind them.
const ddlLockTimeout = "5s"

func utcDay(t time.Time) time.Time {
	t = t.UTC()
	return time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
}

// ensureDays makes sure the partitions of every day in reports exist, and
// the next day's, so that writing after midnight finds its partition.
func (s *Store) ensureDays(ctx context.Context, reports []*domain.Report) error {
	var want []time.Time
	s.mu.Lock()
	seen := map[time.Time]bool{}
	var last time.Time
	for _, r := range reports {
		d := utcDay(r.ReportTime)
		if d.After(last) {
			last = d
		}
		if !s.days[d] && !seen[d] {
			seen[d] = true
			want = append(want, d)
		}
	}
	if next := last.AddDate(0, 0, 1); !s.days[next] && !seen[next] {
		want = append(want, next)
	}
	s.mu.Unlock()
	for _, d := range want {
		if err := s.ensurePartition(ctx, d); err != nil {
			return err
		}
		s.mu.Lock()
		s.days[d] = true
		s.mu.Unlock()
	}
	return nil
}

// ensurePartition creates and attaches day's partitions unless they exist.
// A new partition is created as a plain table, given the rows of its day
// that the default partition caught, and attached: ATTACH takes a weaker
// lock on the parent than CREATE TABLE … PARTITION OF, so reads and writes
// of other days go on.
func (s *Store) ensurePartition(ctx context.Context, day time.Time) error {
	tx, err := s.db.Begin(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, `SET LOCAL lock_timeout = '`+ddlLockTimeout+`'`); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1, hashtext(current_schema()))`, partitionLock); err != nil {
		return err
	}
	from, to := day, day.AddDate(0, 0, 1)
	// Bounds are literals (DDL takes no parameters) made from a day this
	// function formats itself.
	bounds := fmt.Sprintf(`FOR VALUES FROM ('%s 00:00:00+00') TO ('%s 00:00:00+00')`,
		from.Format(time.DateOnly), to.Format(time.DateOnly))
	for _, parent := range partitioned {
		name := parent + "_p" + day.Format(dayFormat)
		var exists bool
		if err := tx.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, name).Scan(&exists); err != nil {
			return err
		}
		if exists {
			continue
		}
		p, def, id := ident(parent), ident(parent+"_default"), ident(name)
		stmts := []string{
			`CREATE TABLE ` + id + ` (LIKE ` + p + ` INCLUDING DEFAULTS)`,
			`WITH moved AS (DELETE FROM ` + def + ` WHERE report_time >= $1 AND report_time < $2 RETURNING *)
			 INSERT INTO ` + id + ` SELECT * FROM moved`,
			`ALTER TABLE ` + p + ` ATTACH PARTITION ` + id + ` ` + bounds,
		}
		for i, q := range stmts {
			var args []any
			if i == 1 {
				args = []any{from, to}
			}
			if _, err := tx.Exec(ctx, q, args...); err != nil {
				return err
			}
		}
	}
	return tx.Commit(ctx)
}

func ident(name string) string { return pgx.Identifier{name}.Sanitize() }

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
	for _, parent := range partitioned {
		if _, err := tx.Exec(ctx, `DROP TABLE IF EXISTS `+ident(parent+"_p"+day.Format(dayFormat))); err != nil {
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

// deleteDefault deletes at most limit reports older than t, with their
// ranks, from the default partitions.
func (s *Store) deleteDefault(ctx context.Context, t time.Time, limit int) (int64, error) {
	tx, err := s.db.Begin(ctx)
	if err != nil {
		return 0, err
	}
	defer func() { _ = tx.Rollback(ctx) }()
	tag, err := tx.Exec(ctx, `
		WITH victims AS (
		    SELECT worker_addr, report_time, source_instance_id, sequence_id
		    FROM history_reports_default WHERE report_time < $1 LIMIT $2
		), ranks AS (
		    DELETE FROM history_ranks_default k USING victims v
		    WHERE k.worker_addr = v.worker_addr AND k.report_time = v.report_time
		      AND k.source_instance_id = v.source_instance_id AND k.sequence_id = v.sequence_id
		)
		DELETE FROM history_reports_default d USING victims v
		WHERE d.worker_addr = v.worker_addr AND d.report_time = v.report_time
		  AND d.source_instance_id = v.source_instance_id AND d.sequence_id = v.sequence_id`, t, limit)
	if err != nil {
		return 0, err
	}
	return tag.RowsAffected(), tx.Commit(ctx)
}

// Ping checks that the database answers (for readiness checks).
func (s *Store) Ping(ctx context.Context) error {
	tx, err := s.db.Begin(ctx)
	if err != nil {
		return wrapErr(ctx, "ping", err)
	}
	return wrapErr(ctx, "ping", tx.Rollback(ctx))
}
