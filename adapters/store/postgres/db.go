package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// DB is what the store needs from a connection pool: transactions. A
// *pgxpool.Pool satisfies it; so does a single *pgx.Conn (not safe for
// concurrent use).
type DB interface {
	Begin(ctx context.Context) (pgx.Tx, error)
}

// DefaultMaxConns bounds the connections of the pool Open makes.
const DefaultMaxConns = 4

// newPool makes the pgxpool behind Open. Idle connections are checked
// often so that a database restart's dead connections are replaced before
// a write needs them.
func newPool(cfg *pgx.ConnConfig, maxConns int) (*pgxpool.Pool, error) {
	if maxConns <= 0 {
		maxConns = DefaultMaxConns
	}
	pc, err := pgxpool.ParseConfig("")
	if err != nil {
		return nil, err
	}
	pc.ConnConfig = cfg
	pc.MaxConns = int32(maxConns)
	pc.MinConns = 0
	pc.HealthCheckPeriod = 5 * time.Second
	pc.MaxConnIdleTime = time.Minute
	return pgxpool.NewWithConfig(context.Background(), pc)
}
