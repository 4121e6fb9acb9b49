package app

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/loadreporter/loadreporter/adapters/rpc"
	"github.com/loadreporter/loadreporter/adapters/store/postgres"
	"github.com/loadreporter/loadreporter/domain"
	"github.com/loadreporter/loadreporter/ports"
)

// AuditQueries are the queries `loadreporter audit` answers.
var AuditQueries = []string{"reports", "outages", "rank-stats", "gaps", "imbalance"}

// AuditConfig is what `loadreporter audit` can be told.
type AuditConfig struct {
	Query       string
	Since       string
	Until       string
	Workers     []string
	Statuses    []domain.Status
	Ranks       []int64
	Threshold   float64
	Interval    time.Duration
	Limit       int
	Format      string
	Target      string
	DatabaseURL string
	AuthToken   string
}

type listFlag struct{ values *[]string }

func (l listFlag) String() string {
	if l.values == nil {
		return ""
	}
	return strings.Join(*l.values, ",")
}

func (l listFlag) Set(s string) error {
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			*l.values = append(*l.values, v)
		}
	}
	return nil
}

// ParseAudit reads `audit <query> [flags]`.
func ParseAudit(args []string, getenv func(string) string, out io.Writer) (AuditConfig, error) {
	c := AuditConfig{Since: "1h", Format: "table", Target: "127.0.0.1:8080", Threshold: 0.2}
	fs := flag.NewFlagSet("audit", flag.ContinueOnError)
	fs.SetOutput(out)
	var workers, statuses, ranks []string
	fs.StringVar(&c.Since, "since", c.Since, "window start: a duration before now (10m, 24h) or an RFC 3339 time")
	fs.StringVar(&c.Until, "until", c.Until, "window end: a duration before now or an RFC 3339 time (default now)")
	fs.Var(listFlag{&workers}, "worker", "worker_addr to keep (repeat or comma-separate; default all)")
	fs.Var(listFlag{&statuses}, "status", "reports: statuses to keep (healthy, stale, unreachable)")
	fs.Var(listFlag{&ranks}, "rank", "reports, rank-stats: dp_ranks to keep")
	fs.Float64Var(&c.Threshold, "threshold", c.Threshold, "imbalance: token_usage spread across ranks that counts (0..1)")
	fs.DurationVar(&c.Interval, "interval", c.Interval, "gaps: the history interval (default: the server's)")
	fs.IntVar(&c.Limit, "limit", c.Limit, "rows at most (default 100 reports, 1000 others; at most 10000)")
	fs.StringVar(&c.Format, "format", c.Format, "table, csv or json")
	fs.StringVar(&c.Target, "target", c.Target, "HOST:PORT of a running loadreporter to ask (its HistoryService)")
	fs.StringVar(&c.DatabaseURL, "database-url", c.DatabaseURL, "query PostgreSQL directly instead of --target")
	fs.StringVar(&c.AuthToken, "auth-token", c.AuthToken, "bearer token the target requires")
	fs.Usage = usage(fs, out, "Usage: loadreporter audit <"+strings.Join(AuditQueries, "|")+"> [flags]\n\n"+
		"Answers audit queries over the recorded history.", map[string]string{"database-url": "DATABASE_URL"})
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "-help") {
			fs.Usage()
			return c, flag.ErrHelp
		}
		return c, fmt.Errorf("audit needs a query first: one of %s", strings.Join(AuditQueries, ", "))
	}
	c.Query = args[0]
	if !slices.Contains(AuditQueries, c.Query) {
		return c, fmt.Errorf("unknown audit query %q: want one of %s", c.Query, strings.Join(AuditQueries, ", "))
	}
	if err := parseFlags(fs, args[1:], getenv, map[string]string{"database-url": "DATABASE_URL"}); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected arguments %q (flags go after the query name)", fs.Args())
	}
	c.Workers = workers
	for _, s := range statuses {
		st, err := ports.ParseStatus(s)
		if err != nil {
			return c, fmt.Errorf("--status: %s", domain.ErrorMessage(err))
		}
		c.Statuses = append(c.Statuses, st)
	}
	for _, r := range ranks {
		n, err := strconv.ParseInt(r, 10, 32)
		if err != nil || n < 0 {
			return c, fmt.Errorf("--rank %q: want a dp_rank (0, 1, …)", r)
		}
		c.Ranks = append(c.Ranks, n)
	}
	if !slices.Contains([]string{"table", "csv", "json"}, c.Format) {
		return c, fmt.Errorf("--format %q: want table, csv or json", c.Format)
	}
	if c.DatabaseURL == "" {
		if _, _, err := net.SplitHostPort(c.Target); err != nil {
			return c, fmt.Errorf("--target %q: want HOST:PORT", c.Target)
		}
	}
	return c, nil
}

// parseWhen reads a --since/--until value: a duration before now or an
// RFC 3339 time.
func parseWhen(flagName, v string, now time.Time) (time.Time, error) {
	if v == "" {
		return now, nil
	}
	if d, err := time.ParseDuration(v); err == nil {
		if d < 0 {
			return time.Time{}, fmt.Errorf("--%s %q: a duration before now must not be negative", flagName, v)
		}
		return now.Add(-d), nil
	}
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return t, nil
	}
	return time.Time{}, fmt.Errorf("--%s %q: want a duration before now (like 10m or 24h) or an RFC 3339 time (like 2026-11-29T07:00:00Z)", flagName, v)
}

// Audit runs one audit query and writes its result to out.
func Audit(ctx context.Context, c AuditConfig, out io.Writer) error {
	now := time.Now()
	since, err := parseWhen("since", c.Since, now)
	if err != nil {
		return err
	}
	until, err := parseWhen("until", c.Until, now)
	if err != nil {
		return err
	}
	w := ports.Window{Since: since, Until: until}
	var q ports.HistoryQuery
	if c.DatabaseURL != "" {
		s, err := postgres.Open(c.DatabaseURL, postgres.Options{MaxConns: 1})
		if err != nil {
			return err
		}
		defer s.Close()
		q = s
	} else {
		client := &http.Client{Timeout: 30 * time.Second}
		q = rpc.NewHistoryClient(client, "http://"+c.Target, c.AuthToken)
	}
	t, err := runAudit(ctx, q, c, w)
	if err != nil {
		return fmt.Errorf("audit %s: %s", c.Query, domain.ErrorMessage(err))
	}
	return t.write(out, c.Format)
}

func runAudit(ctx context.Context, q ports.HistoryQuery, c AuditConfig, w ports.Window) (*resultTable, error) {
	switch c.Query {
	case "reports":
		page, err := q.Reports(ctx, ports.ReportsQuery{Window: w, Workers: c.Workers, Statuses: c.Statuses, Ranks: c.Ranks, Limit: c.Limit})
		if err != nil {
			return nil, err
		}
		t := newTable("report_time", "worker_addr", "sequence_id", "status", "dp_rank", "running", "waiting", "token_usage", "gen_throughput", "last_error")
		for _, r := range page.Reports {
			if len(r.Ranks) == 0 {
				t.add(r.ReportTime, r.Worker.Addr, r.SequenceID, r.Status.String(), "", "", "", "", "", r.LastError)
			}
			for _, k := range r.Ranks {
				t.add(r.ReportTime, r.Worker.Addr, r.SequenceID, r.Status.String(), k.DPRank, k.NumRunningReqs, k.NumWaitingReqs, k.TokenUsage, k.GenThroughput, r.LastError)
			}
		}
		if page.NextCursor != "" {
			t.note = "more reports follow: narrow the window or raise --limit"
		}
		return t, nil
	case "outages":
		res, err := q.Outages(ctx, ports.OutagesQuery{Window: w, Workers: c.Workers, Limit: c.Limit})
		if err != nil {
			return nil, err
		}
		t := newTable("worker_addr", "start", "end", "duration", "statuses", "reports", "last_error")
		for _, o := range res.Outages {
			end := any(o.End)
			if o.Ongoing {
				end = "ongoing"
			}
			var st []string
			for _, s := range o.Statuses {
				st = append(st, s.String())
			}
			t.add(o.WorkerAddr, o.Start, end, o.Duration, strings.Join(st, "+"), o.Reports, o.LastError)
		}
		return t.truncated(res.Truncated), nil
	case "rank-stats":
		res, err := q.RankStats(ctx, ports.RankStatsQuery{Window: w, Workers: c.Workers, Ranks: c.Ranks, Limit: c.Limit})
		if err != nil {
			return nil, err
		}
		t := newTable("worker_addr", "dp_rank", "reports", "avg_token_usage", "max_token_usage", "p95_token_usage", "max_waiting", "mean_gen_throughput")
		for _, s := range res.Stats {
			t.add(s.WorkerAddr, s.DPRank, s.Reports, s.AvgTokenUsage, s.MaxTokenUsage, s.P95TokenUsage, s.MaxWaitingReqs, s.MeanGenThroughput)
		}
		return t.truncated(res.Truncated), nil
	case "gaps":
		res, err := q.Gaps(ctx, ports.GapsQuery{Window: w, Workers: c.Workers, Interval: c.Interval, Limit: c.Limit})
		if err != nil {
			return nil, err
		}
		t := newTable("kind", "worker_addr", "start", "end", "duration", "source_instance_id", "previous_source_instance_id")
		for _, g := range res.Gaps {
			t.add("gap", g.WorkerAddr, g.Start, g.End, g.Duration, "", "")
		}
		for _, r := range res.Restarts {
			t.add("restart", r.WorkerAddr, r.PreviousLastTime, r.FirstTime, r.FirstTime.Sub(r.PreviousLastTime), r.SourceInstanceID, r.PreviousSourceInstanceID)
		}
		return t.truncated(res.Truncated), nil
	case "imbalance":
		res, err := q.Imbalance(ctx, ports.ImbalanceQuery{Window: w, Workers: c.Workers, Threshold: c.Threshold, Limit: c.Limit})
		if err != nil {
			return nil, err
		}
		t := newTable("worker_addr", "start", "end", "duration", "peak_spread", "peak_time", "reports")
		for _, s := range res.Spans {
			end := any(s.End)
			if s.Ongoing {
				end = "ongoing"
			}
			t.add(s.WorkerAddr, s.Start, end, s.Duration, s.PeakSpread, s.PeakTime, s.Reports)
		}
		return t.truncated(res.Truncated), nil
	}
	return nil, errors.New("unknown query " + c.Query)
}

// resultTable is one query's answer, rendered as a table, CSV or JSON.
type resultTable struct {
	columns []string
	rows    [][]any
	note    string
}

func newTable(columns ...string) *resultTable { return &resultTable{columns: columns} }

func (t *resultTable) add(values ...any) { t.rows = append(t.rows, values) }

func (t *resultTable) truncated(yes bool) *resultTable {
	if yes {
		t.note = "more rows exist: narrow the window or raise --limit"
	}
	return t
}

func cell(v any) string {
	switch x := v.(type) {
	case time.Time:
		if x.IsZero() {
			return ""
		}
		return x.UTC().Format(time.RFC3339Nano)
	case time.Duration:
		return x.String()
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	default:
		return fmt.Sprint(x)
	}
}

func (t *resultTable) write(out io.Writer, format string) error {
	switch format {
	case "csv":
		w := csv.NewWriter(out)
		_ = w.Write(t.columns)
		for _, r := range t.rows {
			rec := make([]string, len(r))
			for i, v := range r {
				rec[i] = cell(v)
			}
			_ = w.Write(rec)
		}
		w.Flush()
		return w.Error()
	case "json":
		objs := make([]map[string]any, len(t.rows))
		for i, r := range t.rows {
			o := make(map[string]any, len(r))
			for j, v := range r {
				switch x := v.(type) {
				case time.Time:
					o[t.columns[j]] = cell(x)
				case time.Duration:
					o[t.columns[j]+"_ms"] = x.Milliseconds()
				default:
					o[t.columns[j]] = v
				}
			}
			objs[i] = o
		}
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(objs)
	}
	tw := tabwriter.NewWriter(out, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, strings.ToUpper(strings.Join(t.columns, "\t")))
	for _, r := range t.rows {
		cells := make([]string, len(r))
		for i, v := range r {
			if f, ok := v.(float64); ok { // people read four decimals; CSV and JSON keep all
				cells[i] = strconv.FormatFloat(f, 'f', 4, 64)
				continue
			}
			cells[i] = cell(v)
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(t.rows) == 0 {
		fmt.Fprintln(out, "(no rows)")
	}
	if t.note != "" {
		fmt.Fprintln(out, "note:", t.note)
	}
	return nil
}

// Migrate applies the schema migrations to the database at url.
func Migrate(ctx context.Context, url string, out io.Writer) error {
	if url == "" {
		return errors.New("migrate needs --database-url (or DATABASE_URL)")
	}
	s, err := postgres.Open(url, postgres.Options{MaxConns: 1})
	if err != nil {
		return err
	}
	defer s.Close()
	applied, err := postgres.Migrate(ctx, s.DB())
	if err != nil {
		return fmt.Errorf("migrate %s: %w", redactURL(url), err)
	}
	if len(applied) == 0 {
		fmt.Fprintln(out, "schema is up to date")
	}
	for _, name := range applied {
		fmt.Fprintln(out, "applied", name)
	}
	return nil
}

// ParseMigrate reads `migrate [flags]`.
func ParseMigrate(args []string, getenv func(string) string, out io.Writer) (string, error) {
	var url string
	fs := flag.NewFlagSet("migrate", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.StringVar(&url, "database-url", "", "PostgreSQL URL to migrate")
	fs.Usage = usage(fs, out, "Usage: loadreporter migrate --database-url URL\n\nApplies the history schema migrations.",
		map[string]string{"database-url": "DATABASE_URL"})
	if err := parseFlags(fs, args, getenv, map[string]string{"database-url": "DATABASE_URL"}); err != nil {
		return "", err
	}
	return url, nil
}
