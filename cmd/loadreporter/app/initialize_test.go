package app

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"go.uber.org/goleak"

	"github.com/loadreporter/loadreporter/adapters/store/postgres/pgtest"
)

// TestWhatProvidersOpenIsReleased: the engine, the PostgreSQL pool and the
// recorder are built before NewServer. When NewServer fails (no
// --tls-cert file), InitializeMain must release them before it returns the
// error; a Main that is built but never started releases them on Close.
// Either way no goroutine and no database connection is left.
func TestWhatProvidersOpenIsReleased(t *testing.T) {
	for name, run := range map[string]func(t *testing.T, c Config){
		"a late provider fails": func(t *testing.T, c Config) {
			c.Security.TLSCert = filepath.Join(t.TempDir(), "missing-cert.pem")
			c.Security.TLSKey = filepath.Join(t.TempDir(), "missing-key.pem")
			m, err := InitializeMain(c)
			if err == nil || !strings.Contains(err.Error(), "--tls-cert") || m != nil {
				t.Fatalf("InitializeMain = %v, %v; want the --tls-cert error", m, err)
			}
		},
		"Main is closed without Start": func(t *testing.T, c Config) {
			m, err := InitializeMain(c)
			if err != nil {
				t.Fatal(err)
			}
			if err := m.Close(); err != nil {
				t.Fatalf("Close: %v", err)
			}
		},
	} {
		t.Run(name, func(t *testing.T) {
			url, appName := pgtest.FreshSchema(t)
			c := DefaultConfig()
			c.Server.Listen, c.Logs.LogLevel, c.History.DatabaseURL = "127.0.0.1:0", "error", url
			run(t, c)
			if n := connections(t, appName); n != 0 {
				t.Errorf("%d database connections left open", n)
			}
			goleak.VerifyNone(t)
		})
	}
}

// connections counts the server's backends named appName, waiting (within
// a deadline) for closed ones to go: a backend ends shortly after its
// client hangs up.
func connections(t *testing.T, appName string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, pgtest.BaseURL())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var n int
	for {
		const q = "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1"
		if err := conn.QueryRow(ctx, q, appName).Scan(&n); err != nil || n == 0 {
			if err != nil && ctx.Err() == nil {
				t.Fatal(err)
			}
			return n
		}
		select {
		case <-ctx.Done():
			return n
		case <-time.After(20 * time.Millisecond):
		}
	}
}
