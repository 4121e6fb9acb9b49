package cli

import (
	"errors"
	"net/url"
	"strings"

	"github.com/loadreporter/loadreporter/adapters/store/postgres"
	"github.com/loadreporter/loadreporter/cmd/loadreporter/internal/envflag"
	"github.com/loadreporter/loadreporter/domain"
)

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

// hidePassword replaces the password of dbURL (a postgres:// URL or a
// key=value DSN) wherever it appears in s. The driver does not print it;
// this makes sure.
func hidePassword(s, dbURL string) string {
	pw := ""
	if u, err := url.Parse(dbURL); err == nil && u.User != nil {
		pw, _ = u.User.Password()
	} else {
		for _, kv := range strings.Fields(dbURL) {
			if v, ok := strings.CutPrefix(kv, "password="); ok {
				pw = strings.Trim(v, "'")
			}
		}
	}
	if pw == "" {
		return s
	}
	return strings.ReplaceAll(s, pw, "xxxxx")
}
