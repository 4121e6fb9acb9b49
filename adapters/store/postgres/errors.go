package postgres

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/puddle/v2"

	"github.com/loadreporter/loadreporter/domain"
)

// wrapErr classifies a database error: the database could not be reached
// or refused for now (CodeUnavailable, worth a retry), the caller gave up
// (its context error, unchanged), or anything else (CodeInternal). The
// driver's error is the cause: Error() prints it, for logs and for a CLI
// that asked the database itself; the message, which a peer may see, never
// holds it.
func wrapErr(ctx context.Context, op string, err error) error {
	if err == nil {
		return nil
	}
	var de *domain.Error
	if errors.As(err, &de) {
		return err
	}
	if ctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || pgconn.Timeout(err)) {
		// The cause already says "context canceled"; say what happened.
		why := "was cancelled"
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			why = "timed out"
		}
		return domain.Wrap(err, domain.CodeUnavailable, "history database: %s %s", op, why)
	}
	if unavailable(err) {
		return domain.Wrap(err, domain.CodeUnavailable, "history database unavailable (%s)", op)
	}
	if code, ok := dataException(err); ok {
		// The data itself (invalid UTF-8, a value out of range): trying
		// again cannot help, and a writer that did would hold back every
		// report after it.
		return domain.Wrap(err, domain.CodeInvalidArgument, "history database: %s refused the data (SQLSTATE %s)", op, code)
	}
	if MissingSchema(err) {
		return domain.Wrap(err, domain.CodeInternal, "history database: %s failed: no history schema", op)
	}
	return domain.Wrap(err, domain.CodeInternal, "history database: %s failed", op)
}

// MissingSchema says err comes from a database without the history schema
// (PostgreSQL's undefined_table, 42P01, or invalid_schema_name, 3F000):
// the migrations have not been applied there (Migrate, `loadreporter
// migrate`).
func MissingSchema(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (pgErr.Code == "42P01" || pgErr.Code == "3F000")
}

// dataException says err is PostgreSQL's class 22 (data exception) and
// returns its SQLSTATE.
func dataException(err error) (string, bool) {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && strings.HasPrefix(pgErr.Code, "22") {
		return pgErr.Code, true
	}
	return "", false
}

// Retryable says err may pass by itself: the database could not be
// reached, refused for now, or did not finish in time. A refusal of the
// request itself (bad credentials, no such database, no permission, bad
// SQL) is not.
func Retryable(err error) bool {
	return unavailable(err) || errors.Is(err, context.DeadlineExceeded)
}

func unavailable(err error) bool {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		code := pgErr.Code
		switch {
		case strings.HasPrefix(code, "08"), // connection exception
			strings.HasPrefix(code, "53"),                     // insufficient resources
			code == "57P01", code == "57P02", code == "57P03", // shutting down, cannot connect now
			code == "55000",                  // object not in prerequisite state: a database not allowing connections
			code == "40001", code == "40P01", // serialization failure, deadlock
			code == "55P03", // lock not available (lock_timeout)
			code == "57014": // query cancelled (statement_timeout, a cancel request)
			return true
		}
		return false
	}
	var connErr *pgconn.ConnectError
	var netErr net.Error
	return errors.As(err, &connErr) || errors.As(err, &netErr) || errors.Is(err, io.EOF) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) || errors.Is(err, puddle.ErrClosedPool) ||
		pgconn.SafeToRetry(err) || pgconn.Timeout(err)
}
