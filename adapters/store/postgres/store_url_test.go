package postgres

import (
	"strings"
	"testing"

	"github.com/loadreporter/loadreporter/domain"
)

// TestAnotherDatabasesURLIsNamed: a URL of another database is refused
// saying what is wanted, before the driver reads it as key=value settings.
func TestAnotherDatabasesURLIsNamed(t *testing.T) {
	t.Parallel()
	for _, u := range []string{"mysql://u:pw@h:3306/db", "sqlite:///var/lib/x.db", "REDIS://h"} {
		_, err := Open(u, Options{})
		if domain.ErrorCode(err) != domain.CodeInvalidArgument || !strings.Contains(domain.ErrorMessage(err), "want postgres://") ||
			strings.Contains(err.Error(), "pw") {
			t.Errorf("%s: %v", u, err)
		}
	}
	for _, u := range []string{"postgres://u@127.0.0.1:5432/db", "postgresql://u@h/db", "host=127.0.0.1 dbname=test user=postgres"} {
		if err := CheckURL(u); err != nil {
			t.Errorf("%s: %v", u, err)
		}
	}
}
