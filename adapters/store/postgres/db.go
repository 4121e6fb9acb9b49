package postgres

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// DB is what the store needs from a connection pool: transactions. A
// *pgxpool.Pool satisfies it, and so does the small pool Open makes.
// A single *pgx.Conn satisfies it too, but is not safe for concurrent use.
type DB interface {
	Begin(ctx context.Context) (pgx.Tx, error)
}

// DefaultMaxConns bounds the connections of the pool Open makes.
const DefaultMaxConns = 4

// connPool is a minimal pool of *pgx.Conn behind DB.
//
// It exists because github.com/jackc/pgx/v5/pgxpool needs
// github.com/jackc/puddle/v2, which this module does not require yet. Once
// it does, pass a *pgxpool.Pool to New and delete this type.
type connPool struct {
	cfg   *pgx.ConnConfig
	slots chan struct{} // one token per connection in use

	mu     sync.Mutex
	idle   []idleConn
	closed bool
}

type idleConn struct {
	c     *pgx.Conn
	since time.Time
}

// idleCheck is how long a connection may sit idle before it is pinged
// before use: a database restart leaves dead connections behind.
const idleCheck = time.Second

func newConnPool(cfg *pgx.ConnConfig, maxConns int) *connPool {
	if maxConns <= 0 {
		maxConns = DefaultMaxConns
	}
	return &connPool{cfg: cfg, slots: make(chan struct{}, maxConns)}
}

var errPoolClosed = errors.New("postgres: pool closed")

// Begin starts a transaction on a pooled connection; the connection goes
// back to the pool when the transaction is committed or rolled back.
func (p *connPool) Begin(ctx context.Context) (pgx.Tx, error) {
	c, err := p.acquire(ctx)
	if err != nil {
		return nil, err
	}
	tx, err := c.Begin(ctx)
	if err != nil {
		p.release(c)
		return nil, err
	}
	return &pooledTx{Tx: tx, release: func() { p.release(c) }}, nil
}

func (p *connPool) acquire(ctx context.Context) (*pgx.Conn, error) {
	select {
	case p.slots <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	for {
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			<-p.slots
			return nil, errPoolClosed
		}
		var ic idleConn
		n := len(p.idle)
		if n > 0 {
			ic = p.idle[n-1]
			p.idle = p.idle[:n-1]
		}
		p.mu.Unlock()
		if ic.c == nil {
			break
		}
		if time.Since(ic.since) < idleCheck || ic.c.Ping(ctx) == nil {
			return ic.c, nil
		}
		closeConn(ic.c)
		if ctx.Err() != nil {
			<-p.slots
			return nil, ctx.Err()
		}
	}
	c, err := pgx.ConnectConfig(ctx, p.cfg)
	if err != nil {
		<-p.slots
		return nil, err
	}
	return c, nil
}

// release returns c to the pool, or closes it when it is broken or still
// inside a transaction.
func (p *connPool) release(c *pgx.Conn) {
	defer func() { <-p.slots }()
	if c.IsClosed() || c.PgConn().IsBusy() || c.PgConn().TxStatus() != 'I' {
		closeConn(c)
		return
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		closeConn(c)
		return
	}
	p.idle = append(p.idle, idleConn{c: c, since: time.Now()})
	p.mu.Unlock()
}

// Close closes the idle connections; connections in use are closed when
// they are released.
func (p *connPool) Close() {
	p.mu.Lock()
	p.closed = true
	idle := p.idle
	p.idle = nil
	p.mu.Unlock()
	for _, ic := range idle {
		closeConn(ic.c)
	}
}

func closeConn(c *pgx.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = c.Close(ctx)
}

// pooledTx releases its connection once, on Commit or Rollback.
type pooledTx struct {
	pgx.Tx
	once    sync.Once
	release func()
}

func (t *pooledTx) Commit(ctx context.Context) error {
	err := t.Tx.Commit(ctx)
	t.once.Do(t.release)
	return err
}

func (t *pooledTx) Rollback(ctx context.Context) error {
	err := t.Tx.Rollback(ctx)
	t.once.Do(t.release)
	return err
}
