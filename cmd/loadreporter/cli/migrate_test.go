package cli

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"
)

// TestMigrateErrorHidesThePassword: a migrate that fails names the
// database it tried, with every password hidden, whichever form the
// --database-url takes, even one the driver cannot parse. Nothing listens on port 1, so no PostgreSQL is
// needed.
func TestMigrateErrorHidesThePassword(t *testing.T) {
	t.Parallel()
	for _, dbURL := range []string{
		"postgres://u:S3cretPW@127.0.0.1:1/db",
		"postgres://u@127.0.0.1:1/db?password=S3cretPW",
		"postgres://u@127.0.0.1:1/db?sslmode=disable&sslpassword=S3cretPW",
		"host=127.0.0.1 port=1 password=S3cretPW",
		"host=127.0.0.1 port=1 password='a b S3cretPW'",
		// Refused by the driver, whose own redaction shows part of these.
		"host=127.0.0.1 port=1 password='a S3cretPW",
		`host=127.0.0.1 sslmode=bogus password=a\ S3cretPW`,
		"postgres://u:a@S3cretPW@127.0.0.1:x/db",
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := Migrate(ctx, dbURL, io.Discard)
		cancel()
		if err == nil {
			t.Fatalf("migrate %q: succeeded with nothing listening", dbURL)
		}
		if msg := err.Error(); strings.Contains(msg, "S3cretPW") || !strings.Contains(msg, "127.0.0.1") {
			t.Errorf("migrate %q: %q (want the database named, its password hidden)", dbURL, msg)
		}
	}
}

// TestCommandsRefuseArguments: a word left over after the flags is
// refused on one line, as serve does, not ignored.
func TestCommandsRefuseArguments(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		parse func() error
		want  string
	}{
		{"migrate", func() error {
			_, err := ParseMigrate([]string{"--database-url", "postgres://h/db", "extra"}, env(nil), &strings.Builder{})
			return err
		}, `migrate takes no arguments, got ["extra"]`},
		{"watch", func() error {
			_, err := ParseWatch([]string{"--target", "127.0.0.1:1", "extra"}, env(nil), &strings.Builder{})
			return err
		}, `watch takes no arguments, got ["extra"]`},
		{"audit", func() error {
			_, err := ParseAudit([]string{"outages", "--since", "1h", "extra"}, env(nil), &strings.Builder{})
			return err
		}, `unexpected arguments ["extra"]`},
	} {
		if err := tc.parse(); err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s with an extra argument: %v; want %q", tc.name, err, tc.want)
		}
	}
}
