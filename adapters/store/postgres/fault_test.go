package postgres_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/loadreporter/loadreporter/adapters/clock"
	"github.com/loadreporter/loadreporter/adapters/store/postgres"
	"github.com/loadreporter/loadreporter/adapters/store/postgres/pgtest"
	"github.com/loadreporter/loadreporter/domain"
	"github.com/loadreporter/loadreporter/domain/recorder"
	"github.com/loadreporter/loadreporter/ports"
)

// proxy is a TCP proxy on 127.0.0.1 between a pool and the database that
// can cut connections in the middle of a message, swallow a response, or
// refuse connections altogether.
type proxy struct {
	ln     net.Listener
	target string

	cutUp   atomic.Bool // cut the next large client→server chunk (a batch insert) half-way
	cutDown atomic.Bool // swallow the next response to a COMMIT and cut: the commit happened unseen
	cuts    chan string

	mu    sync.Mutex
	down  bool
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

func startProxy(t *testing.T, target string) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln, target: target, cuts: make(chan string, 100), conns: map[net.Conn]struct{}{}}
	p.wg.Go(p.accept)
	t.Cleanup(p.close)
	return p
}

func (p *proxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		down := p.down
		p.mu.Unlock()
		if down {
			_ = c.Close()
			continue
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = c.Close()
			continue
		}
		p.mu.Lock()
		p.conns[c], p.conns[s] = struct{}{}, struct{}{}
		p.mu.Unlock()
		p.wg.Go(func() { p.pipe(s, c, true) })
		p.wg.Go(func() { p.pipe(c, s, false) })
	}
}

func (p *proxy) pipe(dst, src net.Conn, up bool) {
	defer p.drop(dst, src)
	buf := make([]byte, 64<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			switch {
			case up && n > 4096 && p.cutUp.CompareAndSwap(true, false):
				_, _ = dst.Write(buf[:n/2])
				p.cuts <- fmt.Sprintf("cut a %d-byte request after %d bytes", n, n/2)
				return
			case !up && bytes.Contains(buf[:n], []byte("COMMIT\x00")) && p.cutDown.CompareAndSwap(true, false):
				p.cuts <- fmt.Sprintf("swallowed a %d-byte response to COMMIT", n)
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (p *proxy) drop(conns ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range conns {
		_ = c.Close()
		delete(p.conns, c)
	}
}

// setDown refuses new connections and cuts the live ones (true), or lets
// connections through again (false).
func (p *proxy) setDown(down bool) {
	p.mu.Lock()
	p.down = down
	var live []net.Conn
	if down {
		for c := range p.conns {
			live = append(live, c)
		}
	}
	p.mu.Unlock()
	p.drop(live...)
}

func (p *proxy) close() {
	_ = p.ln.Close()
	p.setDown(true)
	p.wg.Wait()
}

// faultObserver counts the recorder's events and signals each one.
type faultObserver struct {
	written, failures, dropped atomic.Int64
	event                      chan struct{}
}

func (o *faultObserver) signal() {
	select {
	case o.event <- struct{}{}:
	default:
	}
}
func (o *faultObserver) Written(n int, _, _ time.Duration) { o.written.Add(int64(n)); o.signal() }
func (o *faultObserver) Split(int)                         {}
func (o *faultObserver) WriteFailed(error, time.Duration) {
	o.failures.Add(1)
	o.signal()
}
func (o *faultObserver) Dropped(n int, _ ports.DropReason) { o.dropped.Add(int64(n)) }

func proxiedURL(t *testing.T, proxyAddr, schema string) string {
	t.Helper()
	cfg, err := pgx.ParseConfig(pgtest.BaseURL())
	if err != nil {
		t.Fatal(err)
	}
	u := url.URL{Scheme: "postgres", Host: proxyAddr, Path: "/" + cfg.Database}
	if cfg.Password != "" {
		u.User = url.UserPassword(cfg.User, cfg.Password)
	} else {
		u.User = url.User(cfg.User)
	}
	q := url.Values{}
	q.Set("search_path", schema)
	q.Set("connect_timeout", "5")
	q.Set("sslmode", "disable")
	u.RawQuery = q.Encode()
	return u.String()
}

// TestWriterSurvivesCutConnections runs the recorder against PostgreSQL
// through a proxy that cuts connections in the middle of writes, swallows
// responses (so a commit may have happened unseen), and refuses connections
// for a while. Afterwards every report not counted as dropped is in the
// database exactly once, with all its ranks.
func TestWriterSurvivesCutConnections(t *testing.T) {
	direct, schema := newStore(t)
	cfg, err := pgx.ParseConfig(pgtest.BaseURL())
	if err != nil {
		t.Fatal(err)
	}
	p := startProxy(t, net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port))))
	proxied, err := postgres.Open(proxiedURL(t, p.ln.Addr().String(), schema), postgres.Options{MaxConns: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer proxied.Close()

	ctx, cancel := context.WithTimeout(t.Context(), 120*time.Second)
	defer cancel()
	obs := &faultObserver{event: make(chan struct{}, 1)}
	rec, err := recorder.New(recorder.Options{
		Store: proxied, Clock: clock.System{}, Observer: obs,
		BufferSize: 300, BatchSize: 50, MaxDelay: 2 * time.Millisecond, WriteTimeout: 10 * time.Second,
		MinBackoff: 2 * time.Millisecond, MaxBackoff: 20 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	rec.Start()
	start := time.Date(2026, 3, 2, 23, 59, 0, 0, time.UTC) // crosses midnight: partitions are made on the way
	var seq uint64
	produce := func(n int) {
		for range n {
			seq++
			r := &domain.Report{
				SourceInstanceID: "fault-test", SequenceID: seq, ReportTime: start.Add(time.Duration(seq) * 50 * time.Millisecond),
				Worker: domain.Worker{Addr: "10.0.0.9:30000", Type: domain.WorkerTypeRegular}, Status: domain.StatusHealthy,
			}
			for dp := range int64(8) {
				r.Ranks = append(r.Ranks, domain.RankLoad{DPRank: dp, TokenUsage: float64(dp) / 8, NumTotalTokens: 1 << 20, MaxTotalNumTokens: 1 << 20})
			}
			rec.Record(r)
		}
	}
	// wait blocks until the recorder reports something (a write or a
	// failure), so production is paced by the writer, not by sleeps.
	wait := func(what string) {
		select {
		case <-obs.event:
		case <-ctx.Done():
			t.Fatalf("waiting for %s: %v (written %d, failures %d)", what, ctx.Err(), obs.written.Load(), obs.failures.Load())
		}
	}

	// 1. Cuts in the middle of requests and of responses.
	var cuts []string
	for i := range 6 {
		if i%2 == 0 {
			p.cutUp.Store(true)
		} else {
			p.cutDown.Store(true)
		}
	cutting:
		for {
			produce(25)
			select {
			case c := <-p.cuts:
				cuts = append(cuts, c)
				break cutting
			default:
			}
			wait("a write while a cut is armed")
		}
	}
	// 2. The database is unreachable for a while: the buffer fills up and
	// the oldest reports are dropped.
	p.setDown(true)
	failuresBefore := obs.failures.Load()
	for obs.failures.Load() < failuresBefore+5 {
		produce(100)
		wait("failures while the database is down")
	}
	produce(400)
	p.setDown(false)
	// 3. Back: more reports, then a graceful Close flushes everything.
	for range 10 {
		produce(30)
		wait("writes after the database is back")
	}
	if err := rec.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	st := rec.Stats()
	t.Logf("cuts: %v", cuts)
	t.Logf("recorded %d, written %d in %d batches, dropped %d, failed attempts %d", st.Recorded, st.Written, st.Batches, st.Dropped, st.Failures)
	if st.Recorded != int64(seq) || st.Buffered != 0 || st.Recorded != st.Written+st.Dropped {
		t.Errorf("stats do not add up: %+v", st)
	}
	if st.Dropped == 0 || st.Failures < 5 {
		t.Errorf("the test did not exercise drops (%d) and failures (%d)", st.Dropped, st.Failures)
	}
	kept := st.Recorded - st.Dropped
	reports := queryInt(t, direct, `SELECT count(*) FROM history_reports WHERE source_instance_id = 'fault-test'`)
	distinct := queryInt(t, direct, `SELECT count(DISTINCT sequence_id) FROM history_reports WHERE source_instance_id = 'fault-test'`)
	ranks := queryInt(t, direct, `SELECT coalesce(sum(length(ranks) / 100), 0) FROM history_reports WHERE source_instance_id = 'fault-test'`)
	incomplete := queryInt(t, direct, `SELECT count(*) FROM history_reports
		WHERE source_instance_id = 'fault-test' AND coalesce(length(ranks), 0) <> 800`)
	// The rollups hold each stored report once, and its 8 ranks.
	rolled := queryInt(t, direct, `SELECT coalesce(sum(reports), 0) FROM history_minutes WHERE worker_addr = '10.0.0.9:30000'`)
	rolledRanks := queryInt(t, direct, `SELECT coalesce(sum(k.reports), 0) FROM history_minute_ranks m, history_minute_rank_stats(m.ranks) k
		WHERE m.worker_addr = '10.0.0.9:30000'`)
	if rolled != kept || rolledRanks != 8*kept {
		t.Errorf("rollups count %d reports and %d rank rows; want %d and %d", rolled, rolledRanks, kept, 8*kept)
	}
	if reports != kept || distinct != kept {
		t.Errorf("database holds %d reports (%d distinct); want exactly the %d not dropped", reports, distinct, kept)
	}
	if ranks != 8*kept || incomplete != 0 {
		t.Errorf("database holds %d rank rows (%d reports with a partial set); want %d", ranks, incomplete, 8*kept)
	}
	// The newest report is always kept (drops take the oldest).
	if n := queryInt(t, direct, `SELECT count(*) FROM history_reports WHERE source_instance_id = 'fault-test' AND sequence_id = $1`, int64(seq)); n != 1 {
		t.Errorf("the last report is stored %d times, want 1", n)
	}
}
