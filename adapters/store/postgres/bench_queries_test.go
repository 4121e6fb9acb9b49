package postgres_test

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/loadreporter/loadreporter/adapters/store/postgres"
	"github.com/loadreporter/loadreporter/domain"
	"github.com/loadreporter/loadreporter/domain/audit"
	"github.com/loadreporter/loadreporter/ports"
)

// analyze gathers fresh statistics for table (if db's schema has it), as
// a long-running database would have them.
func analyze(ctx context.Context, t testing.TB, db postgres.DB, table string) {
	tx, err := db.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	var exists bool
	if err := tx.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, table).Scan(&exists); err != nil {
		t.Fatal(err)
	}
	if exists {
		if _, err := tx.Exec(ctx, `ANALYZE `+table); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
}

// printSizes prints the size on disk of the store's tables, indexes
// included.
func printSizes(ctx context.Context, t testing.TB, out io.Writer, db postgres.DB) {
	tx, err := db.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	var parts []string
	rows, err := tx.Query(ctx, `
		SELECT p.relname::text, pg_size_pretty(sum(pg_total_relation_size(c.oid)))
		FROM pg_class p JOIN pg_inherits i ON i.inhparent = p.oid JOIN pg_class c ON c.oid = i.inhrelid
		WHERE p.relkind = 'p' AND p.relnamespace = current_schema()::regnamespace
		GROUP BY p.relname ORDER BY p.relname`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var name, size string
		if err := rows.Scan(&name, &size); err != nil {
			t.Fatal(err)
		}
		parts = append(parts, name+" "+size)
	}
	fmt.Fprintf(out, "size: %s\n", strings.Join(parts, ", "))
}

// benchQuery is one audit query, asked of a store; it returns how many
// rows the answer has.
type benchQuery struct {
	name, scope string
	run         func(ctx context.Context, s ports.HistoryQuery) (int, error)
}

// benchQueries times every query (the median of -bench-repeat runs).
func benchQueries(ctx context.Context, b *testing.B, out io.Writer, s ports.HistoryQuery) {
	fmt.Fprintf(out, "%-42s %-11s %23s\n", "query (median of "+fmt.Sprint(*benchRepeat)+" runs)", "scope", "time")
	for _, q := range benchQueryList() {
		var ds []time.Duration
		var rows int
		for range max(*benchRepeat, 1) {
			began := time.Now()
			n, err := q.run(ctx, s)
			ds = append(ds, time.Since(began))
			if err != nil {
				b.Fatalf("%s, %s: %v", q.name, q.scope, err)
			}
			rows = n
		}
		slices.Sort(ds)
		fmt.Fprintf(out, "%-42s %-11s %5d rows %12s\n", q.name, q.scope, rows, ds[len(ds)/2].Round(10*time.Microsecond))
	}
}

// benchQueryList is every audit query the benchmark times, each for one
// worker and for the fleet, over the whole data set (the last hour for
// rank statistics too).
func benchQueryList() []benchQuery {
	last := benchReport(max(*benchReports-1, 0), benchStart).ReportTime
	all := audit.Window{Since: benchStart, Until: last.Add(time.Second)}
	hour := audit.Window{Since: last.Add(-time.Hour), Until: all.Until}
	one := []string{benchReport(0, benchStart).Worker.Addr}
	var qs []benchQuery
	for _, sc := range []struct {
		scope   string
		workers []string
	}{{"one worker", one}, {"fleet", nil}} {
		w := sc.workers
		qs = append(qs,
			benchQuery{"reports, first page of 100", sc.scope, func(ctx context.Context, s ports.HistoryQuery) (int, error) {
				p, err := s.Reports(ctx, audit.ReportsQuery{Window: all, Workers: w})
				return len(p.Reports), err
			}},
			benchQuery{"reports, newest first, page of 100", sc.scope, func(ctx context.Context, s ports.HistoryQuery) (int, error) {
				p, err := s.Reports(ctx, audit.ReportsQuery{Window: all, Workers: w, Descending: true})
				return len(p.Reports), err
			}},
			benchQuery{"reports, UNREACHABLE, page of 1000", sc.scope, func(ctx context.Context, s ports.HistoryQuery) (int, error) {
				p, err := s.Reports(ctx, audit.ReportsQuery{Window: all, Workers: w, Statuses: []domain.Status{domain.StatusUnreachable}, Limit: 1000})
				return len(p.Reports), err
			}},
			benchQuery{"outages", sc.scope, func(ctx context.Context, s ports.HistoryQuery) (int, error) {
				o, err := s.Outages(ctx, audit.OutagesQuery{Window: all, Workers: w, Limit: audit.MaxLimit})
				return len(o.Outages), err
			}},
			benchQuery{"rank stats", sc.scope, func(ctx context.Context, s ports.HistoryQuery) (int, error) {
				st, err := s.RankStats(ctx, audit.RankStatsQuery{Window: all, Workers: w, Limit: audit.MaxLimit})
				return len(st.Stats), err
			}},
			benchQuery{"rank stats, last hour", sc.scope, func(ctx context.Context, s ports.HistoryQuery) (int, error) {
				st, err := s.RankStats(ctx, audit.RankStatsQuery{Window: hour, Workers: w, Limit: audit.MaxLimit})
				return len(st.Stats), err
			}},
			benchQuery{"gaps and restarts", sc.scope, func(ctx context.Context, s ports.HistoryQuery) (int, error) {
				g, err := s.Gaps(ctx, audit.GapsQuery{Window: all, Workers: w, Interval: time.Second, Limit: audit.MaxLimit})
				return len(g.Gaps) + len(g.Restarts), err
			}},
			benchQuery{"imbalance > 0.5", sc.scope, func(ctx context.Context, s ports.HistoryQuery) (int, error) {
				im, err := s.Imbalance(ctx, audit.ImbalanceQuery{Window: all, Workers: w, Threshold: .5, Limit: audit.MaxLimit})
				return len(im.Spans), err
			}},
		)
	}
	slices.SortStableFunc(qs, func(a, b benchQuery) int { return strings.Compare(a.name, b.name) })
	return qs
}
