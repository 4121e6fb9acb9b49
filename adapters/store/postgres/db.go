package postgres

import (
	"context"
	"net"
	"strconv"
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

// bound makes cfg's connections end what a vanished peer would hold: TCP
// keepalives on our side of every connection, and on the server's side
// (tcp_keepalives_*) with idle_in_transaction_session_timeout, for our
// sessions; the server's side is what frees the locks of a session whose
// client is gone. What the URL set is kept.
func bound(cfg *pgx.ConnConfig, o Options) {
	probes := max(o.KeepAlive/3, time.Second)
	cfg.DialFunc = (&net.Dialer{KeepAliveConfig: net.KeepAliveConfig{
		Enable: true, Idle: o.KeepAlive, Interval: probes, Count: 3,
	}}).DialContext
	if cfg.ConnectTimeout == 0 {
		cfg.ConnectTimeout = o.ConnectTimeout
	}
	params := map[string]string{
		"tcp_keepalives_idle":     strconv.Itoa(max(1, int(o.KeepAlive/time.Second))),
		"tcp_keepalives_interval": strconv.Itoa(max(1, int(probes/time.Second))),
		"tcp_keepalives_count":    "3",
	}
	if o.IdleInTransactionTimeout > 0 {
		params["idle_in_transaction_session_timeout"] = strconv.FormatInt(o.IdleInTransactionTimeout.Milliseconds(), 10)
	}
	if cfg.RuntimeParams == nil {
		cfg.RuntimeParams = map[string]string{}
	}
	for k, v := range params {
		if _, set := cfg.RuntimeParams[k]; !set {
			cfg.RuntimeParams[k] = v
		}
	}
}
