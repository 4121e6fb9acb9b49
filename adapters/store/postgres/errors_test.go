package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/loadreporter/loadreporter/adapters/store/postgres"
	"github.com/loadreporter/loadreporter/adapters/store/postgres/pgtest"
	"github.com/loadreporter/loadreporter/domain"
	"github.com/loadreporter/loadreporter/domain/audit"
)

func TestMissingSchema(t *testing.T) {
	t.Parallel()
	for code, want := range map[string]bool{"42P01": true, "3F000": true, "42703": false, "08006": false} {
		err := fmt.Errorf("query: %w", &pgconn.PgError{Code: code, Message: "x"})
		if got := postgres.MissingSchema(err); got != want {
			t.Errorf("MissingSchema(%s) = %t, want %t", code, got, want)
		}
	}
	if postgres.MissingSchema(errors.New("relation does not exist")) || postgres.MissingSchema(nil) {
		t.Error("MissingSchema holds for an error without a SQLSTATE")
	}
}

// TestErrorsKeepTheirCause: a query against a database without the schema
// fails with the driver's cause in Error() (what the CLI and logs print)
// and not in the message (what a peer sees), and says the schema is
// missing.
func TestErrorsKeepTheirCause(t *testing.T) {
	t.Parallel()
	dbURL, _ := pgtest.FreshSchema(t) // an empty schema: no history tables
	s, err := postgres.Open(dbURL, postgres.Options{MaxConns: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err = s.Outages(ctx, audit.OutagesQuery{Window: audit.Window{Since: time.Now().Add(-time.Hour), Until: time.Now()}})
	if !postgres.MissingSchema(err) {
		t.Fatalf("Outages on an empty schema = %v, want a missing schema", err)
	}
	msg := domain.ErrorMessage(err)
	if msg != "history database: outages failed: no history schema" || strings.Contains(msg, "SQLSTATE") {
		t.Errorf("message = %q", msg)
	}
	if !strings.Contains(err.Error(), msg+": ") || !strings.Contains(err.Error(), "SQLSTATE 42P01") {
		t.Errorf("Error() = %q, want the message and the driver's cause", err.Error())
	}
}

// TestErrorClasses: the data itself refused (class 22, e.g. invalid UTF-8
// in a zone) is INVALID_ARGUMENT, which the history writer drops instead of
// retrying for ever behind it; a database not taking connections is
// UNAVAILABLE, worth a retry, and so is a lock or statement timeout;
// other failures are INTERNAL. No message holds the driver's text.
func TestErrorClasses(t *testing.T) {
	t.Parallel()
	for code, want := range map[string]string{
		"22021": domain.CodeInvalidArgument, "22003": domain.CodeInvalidArgument,
		"55000": domain.CodeUnavailable, "08006": domain.CodeUnavailable, "55P03": domain.CodeUnavailable, "57014": domain.CodeUnavailable,
		"42703": domain.CodeInternal,
	} {
		err := postgres.WrapErr(context.Background(), "append", &pgconn.PgError{Code: code, Message: "secret detail"})
		if got := domain.ErrorCode(err); got != want || strings.Contains(domain.ErrorMessage(err), "secret") {
			t.Errorf("SQLSTATE %s: %s %q, want %s without the driver's text", code, got, domain.ErrorMessage(err), want)
		}
	}
}
