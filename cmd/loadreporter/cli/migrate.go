package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/loadreporter/loadreporter/adapters/store/postgres"
	"github.com/loadreporter/loadreporter/cmd/loadreporter/internal/envflag"
)

// Migrate applies the schema migrations to the database at url.
func Migrate(ctx context.Context, url string, out io.Writer) error {
	if url == "" {
		return errors.New("migrate needs --database-url (or DATABASE_URL)")
	}
	s, err := openStore(url, postgres.Options{MaxConns: 1})
	if err != nil {
		return err
	}
	defer s.Close()
	applied, err := postgres.Migrate(ctx, s.DB())
	if err != nil {
		return fmt.Errorf("migrate %s: %s", envflag.RedactURL(url), dbError(err, url))
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
	fs.Usage = envflag.Usage(fs, out, "Usage: loadreporter migrate --database-url URL\n\nApplies the history schema migrations.",
		map[string]string{"database-url": "DATABASE_URL"})
	if err := envflag.Parse(fs, args, getenv, map[string]string{"database-url": "DATABASE_URL"}); err != nil {
		return "", err
	}
	if err := envflag.NoArguments(fs, args, "migrate"); err != nil {
		return "", err
	}
	return url, nil
}
