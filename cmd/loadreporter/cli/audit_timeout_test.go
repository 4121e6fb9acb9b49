package cli

import (
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

// silentDatabase listens on 127.0.0.1, accepts connections, reads what
// they send and never answers: a database that stalled. It returns a URL
// for it, with a password to hide.
func silentDatabase(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Go(func() { _, _ = io.Copy(io.Discard, c) })
		}
	})
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		for _, c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return "postgres://postgres:s3cret-pw@" + ln.Addr().String() + "/test?sslmode=disable"
}

// TestAuditOfAStalledDatabaseEnds: against a database that accepts and
// never answers, audit ends by --query-timeout, naming the flag and the
// database (its password hidden), or by the URL's connect_timeout, saying
// that connecting timed out. (It hung for ever.)
func TestAuditOfAStalledDatabaseEnds(t *testing.T) {
	t.Parallel()
	dbURL := silentDatabase(t)
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"--query-timeout", []string{"outages", "--database-url", dbURL, "--query-timeout", "300ms"},
			[]string{"audit outages: no answer from the database at postgres://postgres:xxxxx@", "within --query-timeout 300ms"}},
		{"connect_timeout", []string{"gaps", "--database-url", dbURL + "&connect_timeout=1", "--query-timeout", "1m"},
			[]string{"audit gaps: the database at postgres://postgres:xxxxx@", "did not answer while connecting (connect_timeout 1s)",
				"history database unavailable (gaps)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			got := auditErr(t, tc.args...) // within runAudit's 20 s
			for _, want := range tc.want {
				if !strings.Contains(got, want) {
					t.Errorf("after %s: %q lacks %q", time.Since(start).Round(time.Millisecond), got, want)
				}
			}
			if strings.Contains(got, "s3cret-pw") {
				t.Errorf("the error shows the password: %q", got)
			}
		})
	}
}

// TestAuditQueryTimeoutFlag: --query-timeout defaults to a minute, comes
// from LOADREPORTER_QUERY_TIMEOUT too, and refuses a negative duration.
func TestAuditQueryTimeoutFlag(t *testing.T) {
	t.Parallel()
	c, err := ParseAudit([]string{"outages"}, env(nil), io.Discard)
	if err != nil || c.QueryTimeout != DefaultQueryTimeout || DefaultQueryTimeout != time.Minute {
		t.Errorf("default: %s, %v; want 1m", c.QueryTimeout, err)
	}
	c, err = ParseAudit([]string{"outages"}, env(map[string]string{"LOADREPORTER_QUERY_TIMEOUT": "5s"}), io.Discard)
	if err != nil || c.QueryTimeout != 5*time.Second {
		t.Errorf("from the environment: %s, %v; want 5s", c.QueryTimeout, err)
	}
	if _, err := ParseAudit([]string{"outages", "--query-timeout", "-1s"}, env(nil), io.Discard); err == nil || !strings.Contains(err.Error(), "--query-timeout") {
		t.Errorf("a negative --query-timeout: %v, want an error naming the flag", err)
	}
}
