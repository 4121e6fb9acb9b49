package tests

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/loadreporter/loadreporter/cmd/loadreporter/app"
)

// databaseURL returns a PostgreSQL URL whose search_path is a fresh schema
// dropped at cleanup, or skips (fails under CI=true) when none is reachable.
func databaseURL(t *testing.T) string {
	t.Helper()
	base := os.Getenv("DATABASE_URL")
	if base == "" {
		base = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("PostgreSQL unreachable at DATABASE_URL=%s under CI: %v", base, err)
		}
		t.Skipf("PostgreSQL unreachable (%v): start it, or set DATABASE_URL, to run this test", err)
	}
	schema := fmt.Sprintf("lr_e2e_%d", rand.Uint32())
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		t.Fatal(err)
	}
	_ = conn.Close(ctx)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if c, err := pgx.Connect(ctx, base); err == nil {
			_, _ = c.Exec(ctx, "DROP SCHEMA "+schema+" CASCADE")
			_ = c.Close(ctx)
		}
	})
	sep := "?"
	if strings.Contains(base, "?") {
		sep = "&"
	}
	return base + sep + "search_path=" + schema
}

// TestOutageAudit: switching the simulated engine into error mode for a
// few fires leaves one outage in the history, which the audit CLI, the
// HistoryService RPC (plain JSON POST) and a direct PostgreSQL query all
// report the same way.
func TestOutageAudit(t *testing.T) {
	for _, store := range []string{"memory", "postgres"} {
		t.Run(store, func(t *testing.T) {
			c := testConfig()
			c.HistoryInterval = 100 * time.Millisecond
			if store == "postgres" {
				c.DatabaseURL = databaseURL(t)
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
			audit := func(args ...string) string {
				t.Helper()
				out.Reset()
				cfg, err := app.ParseAudit(append(args, "--target", m.Addr()), func(string) string { return "" }, &out)
				if err != nil {
					t.Fatal(err)
				}
				// The history writer batches: wait until the outage's end is stored.
				for {
					out.Reset()
					if err := app.Audit(ctx, cfg, &out); err != nil {
						t.Fatal(err)
					}
					done := !strings.Contains(out.String(), "ongoing") && !strings.Contains(out.String(), "(no rows)") &&
						strings.Contains(out.String(), "UNREACHABLE")
					if done || ctx.Err() != nil {
						return out.String()
					}
					time.Sleep(50 * time.Millisecond)
				}
			}
			table := audit("outages", "--since", "10m")
			lines := strings.Split(strings.TrimSpace(table), "\n")
			if len(lines) != 2 || !strings.Contains(lines[1], "UNREACHABLE") || !strings.Contains(lines[1], "simulated engine error") {
				t.Fatalf("outages:\n%s", table)
			}
			csv := audit("outages", "--since", "10m", "--format", "csv")
			if !strings.HasPrefix(csv, "worker_addr,start,end,duration,statuses,reports,last_error\n") {
				t.Fatalf("csv:\n%s", csv)
			}

			// The same answer from the RPC, as a browser or curl asks it.
			body := fmt.Sprintf(`{"window":{"sinceUnixMs":%d}}`, time.Now().Add(-10*time.Minute).UnixMilli())
			resp, err := http.Post("http://"+m.Addr()+"/loadreporter.v1.HistoryService/ListOutages", "application/json", strings.NewReader(body))
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
				cfg, err := app.ParseAudit([]string{"outages", "--since", "10m", "--database-url", c.DatabaseURL, "--format", "json"},
					func(string) string { return "" }, &out)
				if err != nil {
					t.Fatal(err)
				}
				out.Reset()
				if err := app.Audit(ctx, cfg, &out); err != nil {
					t.Fatal(err)
				}
				if strings.Count(out.String(), `"worker_addr"`) != 1 || !strings.Contains(out.String(), `"statuses": "UNREACHABLE"`) {
					t.Fatalf("direct query:\n%s", out.String())
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
					cfg, err := app.ParseAudit(append(strings.Fields(args), "--target", m.Addr()), func(string) string { return "" }, &out)
					if err == nil {
						err = app.Audit(ctx, cfg, &out)
					}
					if err == nil || !strings.Contains(err.Error(), want) {
						t.Errorf("%s: err = %v, want it to mention %q", args, err, want)
					}
				}
			})
		})
	}
}
