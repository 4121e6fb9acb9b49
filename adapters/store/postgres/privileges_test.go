package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/loadreporter/loadreporter/adapters/store/postgres"
	"github.com/loadreporter/loadreporter/adapters/store/postgres/pgtest"
)

// TestCanCreatePartitionsKnowsAReadWriteRole: the role that migrated the
// schema may create the daily partitions; a role granted only SELECT and
// INSERT, or CREATE on the schema without owning the tables, may not,
// which serve says at start instead of failing every write for ever.
func TestCanCreatePartitionsKnowsAReadWriteRole(t *testing.T) {
	t.Parallel()
	owner, schema := newStore(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if ok, err := postgres.CanCreatePartitions(ctx, owner.DB()); err != nil || !ok {
		t.Fatalf("the migrating role: %v, %v; want true", ok, err)
	}
	s := pgx.Identifier{schema}.Sanitize()
	for _, tc := range []struct {
		name   string
		grants []string
	}{
		{"SELECT and INSERT", []string{"GRANT SELECT, INSERT ON ALL TABLES IN SCHEMA " + s + " TO %s"}},
		{"CREATE on the schema, not the tables' owner", []string{
			"GRANT SELECT, INSERT ON ALL TABLES IN SCHEMA " + s + " TO %s", "GRANT CREATE ON SCHEMA " + s + " TO %s"}},
	} {
		rw, err := postgres.Open(pgtest.Role(t, schema, tc.grants...), postgres.Options{})
		if err != nil {
			t.Fatal(err)
		}
		ok, err := postgres.CanCreatePartitions(ctx, rw.DB())
		rw.Close()
		if err != nil || ok {
			t.Errorf("%s: %v, %v; want false", tc.name, ok, err)
		}
	}
}
