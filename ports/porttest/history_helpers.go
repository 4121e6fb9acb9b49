package porttest

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/loadreporter/loadreporter/domain"
	"github.com/loadreporter/loadreporter/domain/audit"
)

// ctxFor bounds every call of a subtest.
func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func labels(rs []*domain.Report) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = label(r)
	}
	return out
}

func mustReports(t *testing.T, s Store, q audit.ReportsQuery) audit.ReportsPage {
	t.Helper()
	page, err := s.Reports(ctxFor(t), q)
	if err != nil {
		t.Fatalf("Reports(%+v): %v", q, err)
	}
	return page
}

// equalLines compares descriptions line by line and prints both lists
// when they differ.
func equalLines(t *testing.T, what string, got, want []string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("%s:\n got:\n  %s\n want:\n  %s", what, strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

// ts shows t as its offset from t0, so expectations read in the fixture's
// seconds; a time not in UTC shows as such, since stores must return UTC.
func ts(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	if t.Location() != time.UTC {
		return "NOT-UTC:" + t.String()
	}
	return t.Sub(t0).String()
}

func wantInvalid(t *testing.T, what string, err error, arg string) {
	t.Helper()
	if domain.ErrorCode(err) != domain.CodeInvalidArgument {
		t.Errorf("%s: error %v, want %s", what, err, domain.CodeInvalidArgument)
		return
	}
	if !strings.Contains(domain.ErrorMessage(err), arg) {
		t.Errorf("%s: message %q does not name %q", what, domain.ErrorMessage(err), arg)
	}
}
