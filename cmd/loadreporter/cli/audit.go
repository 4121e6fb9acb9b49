package cli

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/loadreporter/loadreporter/adapters/rpc"
	"github.com/loadreporter/loadreporter/adapters/store/postgres"
	"github.com/loadreporter/loadreporter/cmd/loadreporter/internal/envflag"
	"github.com/loadreporter/loadreporter/domain"
	"github.com/loadreporter/loadreporter/domain/audit"
	"github.com/loadreporter/loadreporter/ports"
	"github.com/loadreporter/loadreporter/web/audittable"
)

// DefaultQueryTimeout is audit's --query-timeout.
const DefaultQueryTimeout = time.Minute

// AuditConfig is what `loadreporter audit` can be told.
type AuditConfig struct {
	Query     string
	Since     string
	Until     string
	Workers   []string
	Statuses  []domain.Status
	Ranks     []int64
	Threshold float64
	// Interval is gaps' history interval (--history-interval); 0 is the
	// reporter's own through Target, DefaultHistoryInterval through
	// DatabaseURL.
	Interval time.Duration
	Limit    int
	Format   string
	// Wide keeps every column of a text table; by default it fits
	// audittable.NarrowWidth columns.
	Wide        bool
	Target      string
	DatabaseURL string
	AuthToken   string
	// TLS dials Target with TLS; TLSInsecure skips checking its
	// certificate.
	TLS, TLSInsecure bool
	// QueryTimeout bounds the whole audit: connecting and every query
	// (0: no bound). A database that accepts connections and never answers
	// would otherwise hold the command for ever.
	QueryTimeout time.Duration
	// Notes is where CSV and JSON output says what a limit left out,
	// apart from the data (the table prints it below the rows); nil is
	// os.Stderr.
	Notes io.Writer
}

type listFlag struct{ values *[]string }

func (l listFlag) String() string {
	if l.values == nil {
		return ""
	}
	return strings.Join(*l.values, ",")
}

// Set adds the comma-separated values of s. An empty entry is refused: a
// filter that silently lost its values ("--status ,") would keep
// everything.
func (l listFlag) Set(s string) error {
	for i, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v == "" {
			return fmt.Errorf("entry %d is empty; want comma-separated values", i+1)
		}
		*l.values = append(*l.values, strings.TrimSpace(v))
	}
	return nil
}

// ParseAudit reads `audit <query> [flags]`.
func ParseAudit(args []string, getenv func(string) string, out io.Writer) (AuditConfig, error) {
	c := AuditConfig{Since: "1h", Format: "table", Target: "127.0.0.1:8080", Threshold: audittable.DefaultThreshold,
		QueryTimeout: DefaultQueryTimeout}
	fs := flag.NewFlagSet("audit", flag.ContinueOnError)
	fs.SetOutput(out)
	var workers, statuses, ranks []string
	fs.StringVar(&c.Since, "since", c.Since, "window start: a duration before now (10m, 24h) or an RFC 3339 time")
	fs.StringVar(&c.Until, "until", c.Until, "window end: a duration before now or an RFC 3339 time (empty: now)")
	fs.Var(listFlag{&workers}, "worker", "worker_addr to keep (repeat or comma-separate; none: every worker)")
	fs.Var(listFlag{&statuses}, "status", "reports: statuses to keep (healthy, stale, unreachable)")
	fs.Var(listFlag{&ranks}, "rank", "reports, rank-stats: dp_ranks to keep")
	fs.Float64Var(&c.Threshold, "threshold", c.Threshold, "imbalance: token_usage spread across ranks that counts (0..1)")
	fs.DurationVar(&c.Interval, "history-interval", c.Interval, "gaps: the interval the history was recorded at, "+
		"serve's --history-interval, which it must match (a gap is a silence longer than twice it); "+
		"0: with --target the reporter's own, with --database-url "+audittable.DefaultHistoryInterval.String()+", what serve records at unless told otherwise")
	fs.DurationVar(&c.Interval, "interval", c.Interval, "deprecated spelling of --history-interval")
	fs.IntVar(&c.Limit, "limit", c.Limit, fmt.Sprintf("reports: reports at most, the first of the window (0: every report of the window, up to %d); "+
		"others: rows at most (0: %d); at most %d", audittable.MaxReports, audit.DefaultResultLimit, audit.MaxLimit))
	fs.StringVar(&c.Format, "format", c.Format, "table, csv or json")
	fs.BoolVar(&c.Wide, "wide", c.Wide, fmt.Sprintf("table: every column, and long text whole (without it: the columns read first, fitting %d characters; csv and json always hold everything)", audittable.NarrowWidth))
	fs.StringVar(&c.Target, "target", c.Target, "HOST:PORT of a running loadreporter to ask (its HistoryService)")
	fs.StringVar(&c.DatabaseURL, "database-url", c.DatabaseURL, "query PostgreSQL directly instead of --target")
	fs.StringVar(&c.AuthToken, "auth-token", c.AuthToken, "bearer token the target requires")
	fs.BoolVar(&c.TLS, "tls", c.TLS, "dial --target with TLS (a reporter started with --tls-cert)")
	fs.BoolVar(&c.TLSInsecure, "tls-insecure", c.TLSInsecure, "with --tls, do not verify the target's certificate")
	fs.DurationVar(&c.QueryTimeout, "query-timeout", c.QueryTimeout, "the longest the audit may take, connecting and every query included (0: no limit)")
	extra := map[string]string{"database-url": "DATABASE_URL", "interval": envflag.CommandLineOnly}
	fs.Usage = envflag.Usage(fs, out, "Usage: loadreporter audit <"+strings.Join(audittable.Names(), "|")+"> [flags]\n\n"+
		"Answers audit queries over the recorded history.\n\n"+
		wrap("Column Ongoing (outages, imbalance): "+audittable.OngoingHelp+".", 78), extra)
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "-help") {
			fs.Usage()
			return c, flag.ErrHelp
		}
		return c, fmt.Errorf("audit needs a query first: one of %s", strings.Join(audittable.Names(), ", "))
	}
	c.Query = args[0]
	if !slices.Contains(audittable.Names(), c.Query) {
		return c, fmt.Errorf("unknown audit query %q: want one of %s", c.Query, strings.Join(audittable.Names(), ", "))
	}
	if err := envflag.Parse(fs, args[1:], getenv, extra); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected arguments %q (flags go after the query name)", fs.Args())
	}
	c.Workers = workers
	for _, s := range statuses {
		st, err := audit.ParseStatus(s)
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
	if c.QueryTimeout < 0 {
		return c, fmt.Errorf("--query-timeout %s: want a duration ≥ 0 (0: no limit)", c.QueryTimeout)
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

// errQueryTimeout is the cause of the end of an audit's --query-timeout.
var errQueryTimeout = errors.New("audit: --query-timeout ended")

// source names what the audit asks: the database (its password hidden)
// or the reporter.
func (c AuditConfig) source() string {
	if c.DatabaseURL != "" {
		return "the database at " + envflag.RedactURL(c.DatabaseURL)
	}
	return "the reporter at " + c.Target
}

// wrap breaks text into lines of at most width bytes, between words.
func wrap(text string, width int) string {
	var b strings.Builder
	line := 0
	for _, w := range strings.Fields(text) {
		if line > 0 && line+1+len(w) > width {
			b.WriteByte('\n')
			line = 0
		} else if line > 0 {
			b.WriteByte(' ')
			line++
		}
		b.WriteString(w)
		line += len(w)
	}
	return b.String()
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
	if audittable.DurationTooLong(v) {
		return time.Time{}, fmt.Errorf("--%s %q: too long for a duration (at most about 292 years, e.g. 2562047h)", flagName, v)
	}
	return time.Time{}, fmt.Errorf("--%s %q: want a duration before now (like 10m or 24h) or an RFC 3339 time (like 2026-11-29T07:00:00Z)", flagName, v)
}

// Audit runs one audit query and writes its result to out as c.Format
// says: the dashboard's table (table), or the same CSV or JSON its
// download holds. A reports query reads every page of the window, up to
// audittable.MaxReports reports, as the download does.
func Audit(ctx context.Context, c AuditConfig, out io.Writer) error {
	now := time.Now().Truncate(time.Millisecond) // what every store and the wire can hold
	since, err := parseWhen("since", c.Since, now)
	if err != nil {
		return err
	}
	until, err := parseWhen("until", c.Until, now)
	if err != nil {
		return err
	}
	if c.QueryTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, c.QueryTimeout, errQueryTimeout)
		defer cancel()
	}
	var q ports.HistoryQuery
	interval := c.Interval
	if c.DatabaseURL != "" {
		if interval == 0 {
			// Through --target, 0 lets the reporter apply its own.
			interval = audittable.DefaultHistoryInterval
		}
		// A connection attempt gives up within its usual bound, or after
		// the --query-timeout, which then names itself.
		o := postgres.Options{MaxConns: 1}
		if c.QueryTimeout > 0 && c.QueryTimeout <= postgres.DefaultConnectTimeout {
			o.ConnectTimeout = c.QueryTimeout + time.Second
		}
		s, err := openStore(c.DatabaseURL, o)
		if err != nil {
			return err
		}
		defer s.Close()
		q = s
	} else {
		client, base := &http.Client{Timeout: 30 * time.Second}, "http://"+c.Target
		if c.TLS {
			client.Transport = &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: c.TLSInsecure}} //nolint:gosec // opt-in flag
			base = "https://" + c.Target
		}
		q = rpc.NewHistoryClient(client, base, c.AuthToken)
	}
	query := audittable.Query{
		Name: c.Query, Window: audit.Window{Since: since, Until: until},
		Workers: c.Workers, Statuses: c.Statuses, Ranks: c.Ranks,
		Threshold: c.Threshold, Interval: interval, Limit: c.Limit,
		// Without a limit, every page, like the dashboard's CSV download;
		// with one, that many reports.
		AllPages: c.Limit == 0,
	}
	var enc audittable.Encoder
	switch c.Format {
	case "csv":
		enc = audittable.NewCSVEncoder(out)
	case "json":
		enc = audittable.NewJSONEncoder(out)
	default:
		enc = audittable.NewTextEncoder(out)
	}
	note := ""
	for t, err := range audittable.Pages(ctx, q, query) {
		if err != nil {
			if errors.Is(context.Cause(ctx), errQueryTimeout) {
				return fmt.Errorf("audit %s: no answer from %s within --query-timeout %s (raise it for a long window; 0: no limit)",
					c.Query, c.source(), c.QueryTimeout)
			}
			if c.DatabaseURL != "" && connectTimedOut(err) {
				return fmt.Errorf("audit %s: %s did not answer while connecting (connect_timeout %s): %s",
					c.Query, c.source(), connectTimeout(c.DatabaseURL), dbError(err, c.DatabaseURL))
			}
			if c.DatabaseURL != "" {
				return fmt.Errorf("audit %s: %s", c.Query, dbError(err, c.DatabaseURL))
			}
			// The reporter's message: it keeps its database's errors to itself.
			msg := domain.ErrorMessage(err)
			if msg == "" {
				msg = "the target refused the call (" + strings.ToLower(domain.ErrorCode(err)) + ")"
			}
			return fmt.Errorf("audit %s: %s%s", c.Query, msg, targetHint(err, c.TLS, c.AuthToken != ""))
		}
		if c.Format == "table" && !c.Wide {
			t = audittable.Narrow(t)
		}
		if err := enc.Encode(t); err != nil {
			return err
		}
		note = t.Note
	}
	if err := enc.Close(); err != nil {
		return err
	}
	// A script reading CSV or JSON cannot see a note in its data; it must
	// still learn that rows are missing.
	if note != "" && c.Format != "table" {
		notes := c.Notes
		if notes == nil {
			notes = os.Stderr
		}
		fmt.Fprintf(notes, "loadreporter: audit %s: note: %s\n", c.Query, note)
	}
	return nil
}

// targetHint says what an operator likely got wrong when --target
// refused the call: the token, TLS on one side only, a certificate of its
// own, or the front's port instead of the reporter's.
func targetHint(err error, withTLS, withToken bool) string {
	msg := domain.ErrorMessage(err)
	switch {
	case domain.ErrorCode(err) == domain.CodeUnauthenticated && withToken:
		return " (the target refused the token given with --auth-token; the front answers with its engine's rules: is --target the reporter's --listen port?)"
	case domain.ErrorCode(err) == domain.CodeUnauthenticated:
		return " (give the reporter's token with --auth-token, or LOADREPORTER_AUTH_TOKEN)"
	case withTLS && strings.Contains(msg, "x509:"):
		return " (a certificate this machine does not trust: add --tls-insecure, or install its CA)"
	case strings.Contains(msg, "404 Not Found") || strings.Contains(msg, "invalid content-type"):
		return " (nothing answers the history there: is --target the front, not the reporter's --listen port?)"
	case !withTLS && (strings.Contains(msg, "400 Bad Request") || strings.Contains(msg, "malformed HTTP response")):
		return " (a TLS reporter answers plaintext with 400: add --tls)"
	case withTLS && answeredInPlaintext(msg):
		return " (the reporter speaks plaintext: drop --tls)"
	}
	return ""
}
