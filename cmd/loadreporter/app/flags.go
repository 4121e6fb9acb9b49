package app

import (
	"strings"

	"github.com/loadreporter/loadreporter/domain"
)

// optionFlags is the one table from the option a constructor's refusal
// names (domain.InvalidOption) to the serve flag that set it. Source
// packages, whose flags are their own, name those flags themselves, as do
// the providers of this package.
var optionFlags = map[string]string{
	// front.New
	"max-in-flight":           "front-max-requests",
	"response-header-timeout": "front-response-header-timeout",
	// fireloop.New, and the session limits and grid it checks
	"stale-after":         "stale-after",
	"pull-budget":         "pull-budget",
	"history-interval":    "history-interval",
	"schedule":            "schedule",
	"phase-slots":         "phase-slots",
	"min-report-interval": "min-report-interval",
	"max-report-interval": "max-report-interval",
	"min-lease":           "min-lease",
	"max-lease":           "max-lease",
	"max-sessions":        "max-sessions",
	"max-watch-sessions":  "max-watch-sessions",
	"between-every":       "front-push-on-forward",
	// domain.Worker, through fireloop.New, and domain.ParseWorkerType
	"worker-addr": "worker-addr",
	"model":       "model",
	"zone":        "zone",
	"worker-type": "worker-type",
	// pollapi.New
	"max-age":        "poll-max-age",
	"get-load-shape": "get-load-shape",
	// memory.New, postgres.Open, recorder.NewRetention
	"capacity":          "history-capacity",
	"database-url":      "database-url",
	"history-retention": "history-retention",
	// rpc.NewMonitorWithOptions, rpc.NewAdminWithOptions
	"first-frame-timeout":        "first-frame-timeout",
	"max-frames-per-second":      "max-frames-per-second",
	"frame-burst":                "frame-burst",
	"max-conn-frames-per-second": "max-conn-frames-per-second",
	"max-peer-frames-per-second": "max-peer-frames-per-second",
	"max-pending-streams":        "max-pending-streams",
	"final-write-timeout":        "final-write-timeout",
	"max-dp-size":                "max-dp-size",
}

// flagError says a constructor's refusal of an option in terms of the
// flag that set it ("--poll-max-age -1s: must not be negative"); any
// other error is returned as it is.
func flagError(err error) error {
	field := domain.FieldOf(err)
	flag, ok := optionFlags[field]
	if !ok { // no field ("" is in no row), or one no flag sets
		return err
	}
	return &flagErr{msg: "--" + flag + strings.TrimPrefix(domain.ErrorMessage(err), field), err: err}
}

// flagErr is a constructor's refusal said with its flag; errors.Is and
// errors.As still see the refusal.
type flagErr struct {
	msg string
	err error
}

func (e *flagErr) Error() string { return e.msg }

func (e *flagErr) Unwrap() error { return e.err }
