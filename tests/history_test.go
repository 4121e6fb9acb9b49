package tests

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"

	"github.com/loadreporter/loadreporter/adapters/store/postgres/pgtest"
	lrcli "github.com/loadreporter/loadreporter/cmd/loadreporter/cli"
	"github.com/loadreporter/loadreporter/web/audittable"
)

// checkOutage checks an audit row of the outage TestOutageAudit causes,
// by column name.
func checkOutage(t *testing.T, what string, row map[string]string) {
	t.Helper()
	start, errStart := time.Parse(time.RFC3339Nano, row["start"])
	end, errEnd := time.Parse(time.RFC3339Nano, row["end"])
	ms, errMs := strconv.ParseFloat(row["duration_ms"], 64)
	n, errN := strconv.ParseInt(row["reports"], 10, 64)
	if row["worker_addr"] == "" || errStart != nil || errEnd != nil || !end.After(start) || row["ongoing"] != "false" ||
		errMs != nil || math.Abs(ms-float64(end.Sub(start))/float64(time.Millisecond)) > 1 || row["statuses"] != "UNREACHABLE" ||
		errN != nil || n < 1 || !strings.Contains(row["last_error"], "simulated engine error") {
		t.Fatalf("%s outage = %q", what, row)
	}
}

func mustFloat(t *testing.T, s string) float64 {
	t.Helper()
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func isRFC3339(s string) bool {
	_, err := time.Parse(time.RFC3339Nano, s)
	return err == nil
}

// TestOutageAudit: switching the simulated engine into error mode for a
// few fires leaves one outage in the history, which the audit CLI, the
// HistoryService RPC (plain JSON POST) and a direct PostgreSQL query all
// report the same way.
func TestOutageAudit(t *testing.T) {
	t.Parallel()
	for _, store := range []string{"memory", "postgres"} {
		t.Run(store, func(t *testing.T) {
			c := testConfig()
			c.History.Interval = 100 * time.Millisecond
			if store == "postgres" {
				c.History.DatabaseURL = freshDatabase(t)
			}
			m := startMain(t, c, nil)
			sim := m.Engine().Sim
			router := openGRPC(t, testCtx(t, 20*time.Second), m.Addr())
			_ = router.Send(registerFrame("audit-router", 50, 10000))
			recvFrame(t, router)
			waitStatus := func(want string) {
				t.Helper()
				for {
					if rep := recvReport(t, router); rep.GetStatus().String() == "REPORT_STATUS_"+want {
						return
					}
				}
			}
			waitStatus("HEALTHY")
			if err := sim.SetMode("error"); err != nil {
				t.Fatal(err)
			}
			waitStatus("UNREACHABLE")
			recvReport(t, router)
			if err := sim.SetMode("normal"); err != nil {
				t.Fatal(err)
			}
			waitStatus("HEALTHY")
			_ = router.Send(stopFrame)

			ctx := testCtx(t, 20*time.Second)
			var out bytes.Buffer
			// cli runs `loadreporter audit args…`; audit asks the running
			// service, as an operator does by default.
			cli := func(args ...string) string {
				t.Helper()
				out.Reset()
				cfg, err := lrcli.ParseAudit(args, func(string) string { return "" }, &out)
				if err != nil {
					t.Fatal(err)
				}
				out.Reset()
				if err := lrcli.Audit(ctx, cfg, &out); err != nil {
					t.Fatal(err)
				}
				return out.String()
			}
			audit := func(args ...string) string {
				t.Helper()
				return cli(append(args, "--target", m.Addr())...)
			}
			// The CLI writes the dashboard's CSV (web/audittable).
			header := []string{"worker_addr", "start", "end", "ongoing", "duration_ms", "statuses", "reports", "last_error"}
			var recs [][]string
			// The history writer batches: wait until the outage's end is stored.
			eventually(t, ctx, "the outage's end in the history", func() bool {
				text := audit("outages", "--since", "10m", "--format", "csv")
				var err error
				if recs, err = csv.NewReader(strings.NewReader(text)).ReadAll(); err != nil {
					t.Fatalf("csv: %v\n%s", err, text)
				}
				return len(recs) == 2 && recs[1][3] == "false"
			})
			if len(recs) != 2 || !slices.Equal(recs[0], header) {
				t.Fatalf("csv: %q", recs)
			}
			row := map[string]string{}
			for i, name := range header {
				row[name] = recs[1][i]
			}
			checkOutage(t, "csv", row)

			// The text table fits a terminal, long text cut; --wide holds it whole.
			for _, wide := range []bool{false, true} {
				args := []string{"outages", "--since", "10m"}
				lastError := row["last_error"]
				if wide {
					args = append(args, "--wide")
				} else if r := []rune(lastError); len(r) > 21 {
					lastError = string(r[:20]) + "…"
				}
				table := audit(args...)
				lines := strings.Split(strings.TrimSpace(table), "\n")
				if len(lines) != 2 || strings.Join(strings.Fields(lines[0]), " ") != "Worker Start End Ongoing Duration Statuses Reports Last error" ||
					!strings.Contains(lines[1], row["worker_addr"]) || !strings.Contains(lines[1], "UNREACHABLE") ||
					!strings.Contains(lines[1], lastError) {
					t.Fatalf("outages (wide %t):\n%s", wide, table)
				}
			}

			// gaps needs no interval: through --target the reporter applies
			// its own --history-interval, straight from the database serve's
			// default does.
			if gaps := audit("gaps", "--since", "10m"); !strings.HasPrefix(gaps, "Kind") {
				t.Errorf("gaps through --target:\n%s", gaps)
			}
			if store == "postgres" {
				if gaps := cli("gaps", "--since", "10m", "--database-url", c.History.DatabaseURL); !strings.HasPrefix(gaps, "Kind") {
					t.Errorf("gaps from the database:\n%s", gaps)
				}
			}

			// The dashboard's CSV download of the same window holds the same
			// bytes as the CLI asking through the reporter's RPC (which
			// carries milliseconds) and asking the database directly: every
			// surface writes times and durations to the millisecond.
			since := time.Now().Add(-10 * time.Minute).UTC().Truncate(time.Millisecond).Format(time.RFC3339Nano)
			until := time.Now().UTC().Truncate(time.Millisecond).Format(time.RFC3339Nano)
			resp, err := http.Get("http://" + m.Addr() + "/audit.csv?" + url.Values{
				"query": {"outages"}, "since": {since}, "until": {until}, "worker": {row["worker_addr"]},
			}.Encode())
			if err != nil {
				t.Fatal(err)
			}
			download, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			viaRPC := audit("outages", "--since", since, "--until", until, "--format", "csv")
			if resp.StatusCode != http.StatusOK || strings.Count(string(download), "\n") != 2 || viaRPC != string(download) {
				t.Errorf("dashboard CSV (%d):\n%s\nCLI CSV through --target:\n%s", resp.StatusCode, download, viaRPC)
			}
			if store == "postgres" {
				if fromDB := cli("outages", "--since", since, "--until", until, "--database-url", c.History.DatabaseURL, "--format", "csv"); fromDB != string(download) {
					t.Errorf("CLI CSV from the database:\n%s\ndashboard CSV:\n%s", fromDB, download)
				}
			}

			// The same answer from the RPC, as a browser or curl asks it.
			body := fmt.Sprintf(`{"window":{"sinceUnixMs":%d}}`, time.Now().Add(-10*time.Minute).UnixMilli())
			resp, err = http.Post("http://"+m.Addr()+"/loadreporter.v1.HistoryService/ListOutages", "application/json", strings.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			var b bytes.Buffer
			_, _ = b.ReadFrom(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || strings.Count(b.String(), `"workerAddr"`) != 1 || !strings.Contains(b.String(), "REPORT_STATUS_UNREACHABLE") {
				t.Fatalf("%d %s", resp.StatusCode, b.String())
			}

			if store == "postgres" {
				js := cli("outages", "--since", "10m", "--database-url", c.History.DatabaseURL, "--format", "json")
				if strings.Count(js, `"worker_addr"`) != 1 || !strings.Contains(js, `"statuses": "UNREACHABLE"`) {
					t.Fatalf("direct query:\n%s", js)
				}
				// The CSV's columns as keys, typed: numbers, booleans, RFC 3339 times.
				var objs []map[string]any
				if err := json.Unmarshal([]byte(js), &objs); err != nil || len(objs) != 1 || len(objs[0]) != len(header) {
					t.Fatalf("direct query (%v):\n%s", err, js)
				}
				o := objs[0]
				ms, okMs := o["duration_ms"].(float64)
				n, okN := o["reports"].(float64)
				start, _ := o["start"].(string)
				end, _ := o["end"].(string)
				if o["ongoing"] != false || !okMs || ms <= 0 || !okN || n != mustFloat(t, row["reports"]) ||
					o["worker_addr"] != row["worker_addr"] || o["last_error"] != row["last_error"] || !isRFC3339(start) || !isRFC3339(end) {
					t.Fatalf("direct query:\n%s", js)
				}
			}

			t.Run("bad arguments name themselves", func(t *testing.T) {
				for args, want := range map[string]string{
					"outages --since yesterday":            "--since",
					"outages --since 1h --until 2h":        "until",
					"imbalance --since 1h --threshold 2":   "threshold",
					"reports --since 1h --limit 99999":     "limit",
					"reports --since 1h --status sideways": "--status",
					"reports --since 1h --format xml":      "--format",
					"frobnicate --since 1h":                "unknown audit query",
				} {
					cfg, err := lrcli.ParseAudit(append(strings.Fields(args), "--target", m.Addr()), func(string) string { return "" }, &out)
					if err == nil {
						err = lrcli.Audit(ctx, cfg, &out)
					}
					if err == nil || !strings.Contains(err.Error(), want) {
						t.Errorf("%s: err = %v, want it to mention %q", args, err, want)
					}
				}
			})
		})
	}
}

// TestDashboardOverPostgreSQL: the history and audit pages read the
// PostgreSQL history the same way they read the in-memory one.
func TestDashboardOverPostgreSQL(t *testing.T) {
	t.Parallel()
	c := testConfig()
	c.History.Interval = 100 * time.Millisecond
	c.History.DatabaseURL = freshDatabase(t)
	m := startMain(t, c, nil)
	sim := m.Engine().Sim
	ctx := testCtx(t, 20*time.Second)
	base := "http://" + m.Addr()
	page := func(path string) *goquery.Document {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		doc, err := goquery.NewDocumentFromReader(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != 200 {
			t.Fatalf("%s: HTTP %d: %.300s", path, resp.StatusCode, strings.Join(strings.Fields(doc.Text()), " "))
		}
		return doc
	}
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		eventuallyEvery(t, ctx, 100*time.Millisecond, what, ok)
	}
	waitFor("recorded reports", func() bool {
		return page("/history?window=15m").Find(`[data-testid="report-row"]`).Length() >= 5
	})
	doc := page("/history?window=15m")
	for rank := range 4 {
		if doc.Find(fmt.Sprintf(`[data-testid="chart-token-usage"] [data-testid="series-%d"]`, rank)).Length() != 1 {
			t.Fatalf("the token usage chart has no line for rank %d", rank)
		}
	}
	_ = sim.SetMode("error")
	waitFor("an UNREACHABLE report", func() bool { r := m.FireLoop().Latest(); return r != nil && r.Status.String() == "UNREACHABLE" })
	_ = sim.SetMode("normal")
	waitFor("the outage on /audit", func() bool {
		rows := page("/audit?query=outages&last=10m").Find(`[data-testid="result-row"]`)
		return rows.Length() == 1 && strings.Contains(rows.Text(), "UNREACHABLE") && !strings.Contains(rows.Text(), audittable.OngoingText)
	})
}

// freshDatabase is a URL to a fresh schema, dropped at cleanup.
func freshDatabase(t *testing.T) string {
	t.Helper()
	u, _ := pgtest.FreshSchema(t)
	return u
}
