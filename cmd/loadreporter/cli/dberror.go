package cli

import (
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/loadreporter/loadreporter/adapters/store/postgres"
	"github.com/loadreporter/loadreporter/cmd/loadreporter/internal/envflag"
	"github.com/loadreporter/loadreporter/domain"
)

// openStore opens the database at dbURL for a command, as o says. A dbURL
// the driver cannot parse is named with RedactURL's redaction, not the
// driver's: that one hides a password only as far as a malformed string
// lets it (of a quoted password that never closes, it shows all but the
// first word).
func openStore(dbURL string, o postgres.Options) (*postgres.Store, error) {
	s, err := postgres.Open(dbURL, o)
	if err == nil {
		return s, nil
	}
	if perr := postgres.CheckURL(dbURL); perr != nil {
		return nil, errors.New("--" + domain.ErrorMessage(perr))
	}
	msg := err.Error()
	var pce *pgconn.ParseConfigError
	if _, perr := pgconn.ParseConfig(dbURL); errors.As(perr, &pce) {
		redacted := *pce
		redacted.ConnString = envflag.RedactURL(pce.ConnString)
		msg = "--database-url: " + redacted.Error()
	}
	return nil, errors.New(hidePassword(msg, dbURL))
}

// dbError says, on one line, why a command that asked the database itself
// failed: the store's message, then the driver's cause (which a reporter
// keeps from its peers, but the operator at this terminal is the one who
// can fix it), with the password of dbURL hidden; and for a database
// without the history schema, the command that creates it.
func dbError(err error, dbURL string) string {
	var de *domain.Error
	var msg string
	switch {
	case errors.As(err, &de) && de.Cause != nil:
		msg = de.Message + ": " + de.Cause.Error()
	case de != nil:
		msg = de.Message
	default:
		msg = err.Error()
	}
	msg = hidePassword(domain.OneLine(msg), dbURL)
	if postgres.MissingSchema(err) {
		msg += "; create it with `loadreporter migrate --database-url " + envflag.RedactURL(dbURL) + "`"
	}
	return msg
}

// hidePassword replaces every password of dbURL (a URL or a keyword/value
// string), as written or as the driver reads it, wherever it appears in
// s. The driver does not print one; this makes sure.
func hidePassword(s, dbURL string) string {
	pws := envflag.Passwords(dbURL)
	// The longest first, so no shorter password leaves part of a longer.
	slices.SortFunc(pws, func(a, b string) int { return len(b) - len(a) })
	for _, pw := range pws {
		s = strings.ReplaceAll(s, pw, "xxxxx")
	}
	return s
}

// connectTimedOut says err is a connection attempt that ran out of time
// (the database accepted the connection and never answered, or never
// accepted it).
func connectTimedOut(err error) bool {
	var ce *pgconn.ConnectError
	return errors.As(err, &ce) && pgconn.Timeout(err)
}

// connectTimeout is how long a connection attempt to dbURL may take: its
// connect_timeout, or the store's default.
func connectTimeout(dbURL string) time.Duration {
	if cfg, err := pgconn.ParseConfig(dbURL); err == nil && cfg.ConnectTimeout > 0 {
		return cfg.ConnectTimeout
	}
	return postgres.DefaultConnectTimeout
}
