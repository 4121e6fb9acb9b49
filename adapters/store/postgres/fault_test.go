package postgres_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
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
// can cut connections in the middle of a message, swallow a response,
// refuse connections altogether, stall (stop forwarding, and reading,
// without closing anything: a database host that froze), or partition
// the connections open now (what either side sends is lost, a close
// included, while new connections pass: a network path that died without
// a word to either end).
type proxy struct {
	ln     net.Listener
	target string

	cutUp   atomic.Bool // cut the next large client→server chunk (a batch insert) half-way
	cutDown atomic.Bool // swallow the next response to a COMMIT and cut: the commit happened unseen
	cuts    chan string

	mu      sync.Mutex
	down    bool
	stalled chan struct{} // non-nil while stalled; closed when the stall ends
	conns   map[net.Conn]*link
	done    chan struct{} // closed by close
	wg      sync.WaitGroup
}

// link is one proxied connection, both its sockets.
type link struct {
	partitioned atomic.Bool
}

func startProxy(t *testing.T, target string) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln, target: target, cuts: make(chan string, 100), conns: map[net.Conn]*link{}, done: make(chan struct{})}
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
		p.wg.Go(func() { p.connect(c) })
	}
}

// connect dials the database for c, once any stall is over.
func (p *proxy) connect(c net.Conn) {
	if !p.waitStall() {
		_ = c.Close()
		return
	}
	s, err := net.Dial("tcp", p.target)
	if err != nil {
		_ = c.Close()
		return
	}
	l := &link{}
	p.mu.Lock()
	p.conns[c], p.conns[s] = l, l
	p.mu.Unlock()
	p.wg.Go(func() { p.pipe(l, s, c, true) })
	p.wg.Go(func() { p.pipe(l, c, s, false) })
}

// waitStall blocks while the proxy is stalled; false once it closes.
func (p *proxy) waitStall() bool {
	p.mu.Lock()
	stalled := p.stalled
	p.mu.Unlock()
	if stalled == nil {
		return true
	}
	select {
	case <-stalled:
		return true
	case <-p.done:
		return false
	}
}

func (p *proxy) pipe(l *link, dst, src net.Conn, up bool) {
	buf := make([]byte, 64<<10)
	for {
		if !p.waitStall() {
			p.drop(dst, src)
			return
		}
		n, err := src.Read(buf)
		if !p.waitStall() {
			p.drop(dst, src)
			return
		}
		if l.partitioned.Load() {
			if err != nil { // the other end never learns
				p.drop(src)
				return
			}
			continue
		}
		if n > 0 {
			switch {
			case up && n > 4096 && p.cutUp.CompareAndSwap(true, false):
				_, _ = dst.Write(buf[:n/2])
				p.cuts <- fmt.Sprintf("cut a %d-byte request after %d bytes", n, n/2)
				p.drop(dst, src)
				return
			case !up && bytes.Contains(buf[:n], []byte("COMMIT\x00")) && p.cutDown.CompareAndSwap(true, false):
				p.cuts <- fmt.Sprintf("swallowed a %d-byte response to COMMIT", n)
				p.drop(dst, src)
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				p.drop(dst, src)
				return
			}
		}
		if err != nil {
			p.drop(dst, src)
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

// stall stops all forwarding, on the connections open now and on new
// ones (accepted, never answered), until the returned func ends it.
func (p *proxy) stall() (resume func()) {
	ch := make(chan struct{})
	p.mu.Lock()
	p.stalled = ch
	p.mu.Unlock()
	return func() {
		p.mu.Lock()
		p.stalled = nil
		p.mu.Unlock()
		close(ch)
	}
}

// partition loses everything the connections open now carry, closes
// included, and returns how many it cut off; new connections pass.
func (p *proxy) partition() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	links := map[*link]bool{}
	for _, l := range p.conns {
		l.partitioned.Store(true)
		links[l] = true
	}
	return len(links)
}

func (p *proxy) close() {
	_ = p.ln.Close()
	close(p.done)
	p.setDown(true)
	p.wg.Wait()
}

// faultObserver counts the recorder's events and signals each one.
type faultObserver struct {
	written, failures, dropped atomic.Int64
	event                      chan struct{}
	mu                         sync.Mutex
	errs                       []string // of the failed writes
}

// failedWith says whether a failed write's error said s.
func (o *faultObserver) failedWith(s string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.ContainsFunc(o.errs, func(e string) bool { return strings.Contains(e, s) })
}

func (o *faultObserver) signal() {
	select {
	case o.event <- struct{}{}:
	default:
	}
}
func (o *faultObserver) Written(n int, _, _ time.Duration) { o.written.Add(int64(n)); o.signal() }
func (o *faultObserver) Split(int)                         {}
func (o *faultObserver) WriteFailed(err error, _ time.Duration) {
	o.mu.Lock()
	o.errs = append(o.errs, err.Error())
	o.mu.Unlock()
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
	q.Set("application_name", schema)
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
	t.Parallel()
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

// proxiedStore returns a migrated store in a fresh schema, a proxy to the
// database, and a store of the same schema that connects through it.
func proxiedStore(t *testing.T, o postgres.Options) (direct *postgres.Store, p *proxy, proxied *postgres.Store, schema string) {
	t.Helper()
	direct, schema = newStore(t)
	cfg, err := pgx.ParseConfig(pgtest.BaseURL())
	if err != nil {
		t.Fatal(err)
	}
	p = startProxy(t, net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port))))
	proxied, err = postgres.Open(proxiedURL(t, p.ln.Addr().String(), schema), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(proxied.Close)
	return direct, p, proxied, schema
}

// wideReports are n reports of one worker with ranks ranks each, 10 ms
// apart from start, numbered from first.
func wideReports(source string, first, n, ranks int, start time.Time) []*domain.Report {
	out := make([]*domain.Report, n)
	for i := range out {
		seq := first + i
		at := start.Add(time.Duration(seq) * 10 * time.Millisecond)
		r := &domain.Report{SourceInstanceID: source, SequenceID: uint64(seq), ReportTime: at,
			Worker: domain.Worker{Addr: "10.0.0.9:30000", Type: domain.WorkerTypeRegular}, Status: domain.StatusHealthy,
			Ranks: make([]domain.RankLoad, ranks)}
		for dp := range r.Ranks {
			r.Ranks[dp] = domain.RankLoad{DPRank: int64(dp), SnapshotTime: at, TokenUsage: float64((dp*7+seq)%100) / 100,
				NumTotalTokens: 1 << 20, MaxTotalNumTokens: 1 << 20}
		}
		out[i] = r
	}
	return out
}

// storedOnce checks that the database holds each of the n reports of
// source with all its ranks, once, in the reports and in the rollups.
func storedOnce(t *testing.T, direct *postgres.Store, source string, n, ranks int64) {
	t.Helper()
	reports := queryInt(t, direct, `SELECT count(*) FROM history_reports WHERE source_instance_id = $1`, source)
	distinct := queryInt(t, direct, `SELECT count(DISTINCT sequence_id) FROM history_reports WHERE source_instance_id = $1`, source)
	partial := queryInt(t, direct, `SELECT count(*) FROM history_reports WHERE source_instance_id = $1 AND length(ranks) <> $2`,
		source, 100*ranks)
	rolled := queryInt(t, direct, `SELECT coalesce(sum(reports), 0) FROM history_minutes WHERE worker_addr = '10.0.0.9:30000'`)
	if reports != n || distinct != n || partial != 0 || rolled != n {
		t.Errorf("the database holds %d reports (%d distinct, %d without all %d ranks), its rollups %d; want each of the %d once",
			reports, distinct, partial, ranks, rolled, n)
	}
}

// TestABacklogDrainsAfterAnOutage: reports of wide engines pile up while
// the database refuses connections; once it is back, the recorder writes
// them all, each once, although a batch of all of them cannot be written
// within the write timeout (retried whole, it would time out for ever).
// With the default write rate, the timeout grows with the batch's bytes;
// with a rate so high that it does not, the timed-out batch is split
// until its pieces pass. It runs alone (no t.Parallel): it calibrates a
// write timeout against this machine's speed.
func TestABacklogDrainsAfterAnOutage(t *testing.T) {
	for _, tc := range []struct {
		name string
		rate int
	}{{"timeout grows with the batch", 0}, {"timed-out batches split", 1 << 40}} {
		t.Run(tc.name, func(t *testing.T) {
			const n, ranks = 1500, 256
			direct, p, proxied, _ := proxiedStore(t, postgres.Options{MaxConns: 2})
			ctx, cancel := context.WithTimeout(t.Context(), 120*time.Second)
			defer cancel()
			// A tenth of the backlog, written by another worker, says what
			// this database (and this build: the race detector slows the
			// store down many times) takes for it.
			probe := wideReports("probe", 1, n/10, ranks, time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC))
			for _, r := range probe {
				r.Worker.Addr = "10.0.0.8:30000"
			}
			if err := direct.Append(ctx, probe[:1]); err != nil { // the day's partitions
				t.Fatal(err)
			}
			began := time.Now()
			if err := direct.Append(ctx, probe[1:]); err != nil {
				t.Fatal(err)
			}
			tenth := time.Since(began)
			obs := &faultObserver{event: make(chan struct{}, 1)}
			rec, err := recorder.New(recorder.Options{
				Store: proxied, Clock: clock.System{}, Observer: obs,
				// The whole backlog in one batch, and a write timeout of a
				// fifth of what it takes: what a slower or busier database
				// makes of the 5 s default.
				BatchBytes: 64 << 20, WriteTimeout: 2 * tenth, WriteRate: tc.rate,
				MinBackoff: 10 * time.Millisecond, MaxBackoff: 100 * time.Millisecond,
			})
			if err != nil {
				t.Fatal(err)
			}
			backlog := wideReports("backlog", 1, n, ranks, time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC))
			p.setDown(true)
			rec.Start()
			for _, r := range backlog {
				rec.Record(r)
			}
			for obs.failures.Load() < 2 {
				select {
				case <-obs.event:
				case <-ctx.Done():
					t.Fatalf("no failed write while the database is down: %v", ctx.Err())
				}
			}
			held := rec.Stats()
			p.setDown(false)
			back := time.Now()
			for obs.written.Load() < n {
				select {
				case <-obs.event:
				case <-ctx.Done():
					st := rec.Stats()
					t.Fatalf("%s after the database came back, %d of %d reports written (%d failed attempts, last %v)",
						time.Since(back).Round(time.Millisecond), st.Written, n, st.Failures, st.LastError)
				}
			}
			drained := time.Since(back)
			if err := rec.Close(ctx); err != nil {
				t.Fatalf("Close: %v", err)
			}
			st := rec.Stats()
			t.Logf("a backlog of %d reports × %d ranks (%d MB held) drained in %s after the database came back "+
				"(write timeout %s): %d batches, %d failed attempts, %d splits",
				n, ranks, held.BufferedBytes>>20, drained.Round(time.Millisecond), 2*tenth.Round(time.Millisecond), st.Batches, st.Failures, st.Splits)
			if st.Written != n || st.Dropped != 0 {
				t.Errorf("written %d, dropped %d; want all %d written", st.Written, st.Dropped, n)
			}
			if tc.rate != 0 && st.Splits == 0 {
				t.Error("no batch was split: the test did not exercise what it is for")
			}
			storedOnce(t, direct, "backlog", n, ranks)
		})
	}
}

// waitFor polls the database until cond's query counts at least one row,
// or ctx ends.
func waitFor(t *testing.T, ctx context.Context, direct *postgres.Store, what, sql string, args ...any) {
	t.Helper()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for queryInt(t, direct, sql, args...) == 0 {
		select {
		case <-tick.C:
		case <-ctx.Done():
			t.Fatalf("waiting for %s: %v", what, ctx.Err())
		}
	}
}

// TestWritesResumeAfterAPartition: the network between the writer and
// PostgreSQL dies in the middle of a write, after the write took its
// worker's lock, without a word to either end: the server's session is
// left idle in its transaction, holding the lock. The writer gives up on
// it and writes on new connections, which wait behind the lock as long as
// the lock timeout lets them; our sessions'
// idle_in_transaction_session_timeout makes the server end the orphan and
// free the lock, so writes resume within a bound, and nothing is stored
// twice; without it the orphan would hold the lock until the server's TCP
// keepalive gave up, two hours by default. It runs alone (no
// t.Parallel): its lock and session timeouts are short enough that a
// busy machine could reach them without a partition.
func TestWritesResumeAfterAPartition(t *testing.T) {
	direct, p, proxied, schema := proxiedStore(t, postgres.Options{
		MaxConns: 2, IdleInTransactionTimeout: 3 * time.Second, LockTimeout: 300 * time.Millisecond,
	})
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	obs := &faultObserver{event: make(chan struct{}, 1)}
	rec, err := recorder.New(recorder.Options{
		Store: proxied, Clock: clock.System{}, Observer: obs, BatchSize: 10, MaxDelay: time.Millisecond,
		WriteTimeout: time.Second, MinBackoff: 10 * time.Millisecond, MaxBackoff: 200 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	rec.Start()
	defer func() { _ = rec.Close(ctx) }()
	start := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	reports := wideReports("partition", 1, 30, 8, start)
	wrote := func(n int64, what string) {
		t.Helper()
		for obs.written.Load() < n {
			select {
			case <-obs.event:
			case <-ctx.Done():
				st := rec.Stats()
				t.Fatalf("waiting for %s: %v (written %d of %d, %d failed attempts, last %v)", what, ctx.Err(), st.Written, n, st.Failures, st.LastError)
			}
		}
	}
	for _, r := range reports[:10] {
		rec.Record(r)
	}
	wrote(10, "the writes before the partition")

	// The next write stops, holding its worker's lock, at the rollups,
	// which the test locks; the network then dies, and the rollups are
	// let go: the server finishes the statement and waits, idle in its
	// transaction, for a client that is gone.
	locker, err := pgx.Connect(ctx, pgtest.WithSearchPath(pgtest.BaseURL(), schema))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = locker.Close(context.Background()) }()
	lockTx, err := locker.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lockTx.Exec(ctx, `LOCK TABLE history_minutes IN EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	for _, r := range reports[10:20] {
		rec.Record(r)
	}
	waitFor(t, ctx, direct, "the write to wait for the rollups with its worker's lock taken", `SELECT count(*) FROM pg_stat_activity a
		WHERE application_name = $1 AND wait_event_type = 'Lock'
		  AND EXISTS (SELECT 1 FROM pg_locks l WHERE l.pid = a.pid AND l.locktype = 'advisory' AND l.granted)`, schema)
	if cut := p.partition(); cut == 0 {
		t.Fatal("no connection to partition")
	}
	if err := lockTx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, direct, "the orphaned session to sit idle in its transaction", `SELECT count(*) FROM pg_stat_activity
		WHERE application_name = $1 AND state LIKE 'idle in transaction%'`, schema)
	cutAt := time.Now()

	// The writer retries on new connections, behind the orphan's lock,
	// until the server ends the orphan.
	for _, r := range reports[20:] {
		rec.Record(r)
	}
	wrote(30, "writes to resume after the partition")
	resumed := time.Since(cutAt)
	if err := rec.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	st := rec.Stats()
	t.Logf("writes resumed %s after the partition left a session holding the worker's lock (%d failed attempts, last %v)",
		resumed.Round(time.Millisecond), st.Failures, st.LastError)
	if !obs.failedWith("SQLSTATE 55P03") {
		t.Error("no write failed on the lock timeout: the test did not make writes wait behind the orphan's lock")
	}
	if orphans := queryInt(t, direct, `SELECT count(*) FROM pg_stat_activity WHERE application_name = $1 AND state LIKE 'idle in transaction%'`, schema); orphans != 0 {
		t.Errorf("%d sessions still idle in a transaction", orphans)
	}
	storedOnce(t, direct, "partition", 30, 8)
	p.setDown(true) // the pool's idle connections were cut off too: closing them would wait for answers that never come
}

// TestWritesResumeAfterAStall: the database stops answering without
// closing anything (its host froze), on the connections open and on new
// ones. Each write gives up at its timeout and the writer keeps the
// reports; when the database answers again, they are written, each once.
// It runs alone (no t.Parallel): its write timeout is short enough that
// a busy machine could reach it without a stall.
func TestWritesResumeAfterAStall(t *testing.T) {
	direct, p, proxied, _ := proxiedStore(t, postgres.Options{MaxConns: 2})
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	obs := &faultObserver{event: make(chan struct{}, 1)}
	rec, err := recorder.New(recorder.Options{
		Store: proxied, Clock: clock.System{}, Observer: obs, BatchSize: 10, MaxDelay: time.Millisecond,
		WriteTimeout: 300 * time.Millisecond, MinBackoff: 10 * time.Millisecond, MaxBackoff: 100 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	rec.Start()
	defer func() { _ = rec.Close(ctx) }()
	reports := wideReports("stall", 1, 30, 8, time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC))
	until := func(what string, done func() bool) {
		t.Helper()
		for !done() {
			select {
			case <-obs.event:
			case <-ctx.Done():
				st := rec.Stats()
				t.Fatalf("waiting for %s: %v (written %d, %d failed attempts, last %v)", what, ctx.Err(), st.Written, st.Failures, st.LastError)
			}
		}
	}
	for _, r := range reports[:10] {
		rec.Record(r)
	}
	until("the writes before the stall", func() bool { return obs.written.Load() == 10 })
	resume := p.stall()
	for _, r := range reports[10:] {
		rec.Record(r)
	}
	until("writes to time out while the database is stalled", func() bool { return obs.failures.Load() >= 3 })
	if !obs.failedWith("timed out") || obs.written.Load() != 10 {
		t.Errorf("while stalled: %d written, and no write timed out", obs.written.Load())
	}
	resume()
	until("writes to resume after the stall", func() bool { return obs.written.Load() == 30 })
	if err := rec.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	storedOnce(t, direct, "stall", 30, 8)
}

// TestOurSessionsBoundWhatAVanishedClientHolds: every session the store
// opens carries the settings that let the server end it when its client
// is gone (keepalives, the idle-in-transaction timeout); what the URL
// says wins.
func TestOurSessionsBoundWhatAVanishedClientHolds(t *testing.T) {
	t.Parallel()
	dbURL, _ := pgtest.FreshSchema(t)
	for _, tc := range []struct {
		name, url string
		o         postgres.Options
		want      map[string]string
	}{
		{"defaults", dbURL, postgres.Options{}, map[string]string{
			"idle_in_transaction_session_timeout": "30s", "tcp_keepalives_idle": "15", "tcp_keepalives_interval": "5", "tcp_keepalives_count": "3",
		}},
		{"options", dbURL, postgres.Options{IdleInTransactionTimeout: 1500 * time.Millisecond, KeepAlive: time.Minute}, map[string]string{
			"idle_in_transaction_session_timeout": "1500ms", "tcp_keepalives_idle": "60", "tcp_keepalives_interval": "20",
		}},
		{"off", dbURL, postgres.Options{IdleInTransactionTimeout: -1}, map[string]string{"idle_in_transaction_session_timeout": "0"}},
		{"the URL's own", dbURL + "&idle_in_transaction_session_timeout=7000", postgres.Options{}, map[string]string{
			"idle_in_transaction_session_timeout": "7s",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := postgres.Open(tc.url, tc.o)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			tcp := queryInt(t, s, `SELECT count(inet_server_addr())`) == 1 // keepalives read 0 over a Unix socket
			for name, want := range tc.want {
				if strings.HasPrefix(name, "tcp_") && !tcp {
					continue
				}
				ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
				var got string
				tx, err := s.DB().Begin(ctx)
				if err == nil {
					err = tx.QueryRow(ctx, `SELECT current_setting($1)`, name).Scan(&got)
					_ = tx.Rollback(ctx)
				}
				cancel()
				if err != nil || got != want {
					t.Errorf("%s = %q (%v), want %q", name, got, err, want)
				}
			}
		})
	}
}

// TestOpenRefusesBadBounds: a negative or sub-millisecond bound is named,
// not sent to the server (which takes whole milliseconds).
func TestOpenRefusesBadBounds(t *testing.T) {
	t.Parallel()
	for name, o := range map[string]postgres.Options{
		"lock timeout":    {LockTimeout: -time.Second},
		"keepalive":       {KeepAlive: time.Microsecond},
		"connect timeout": {ConnectTimeout: -1},
	} {
		_, err := postgres.Open(pgtest.DefaultURL, o)
		if domain.ErrorCode(err) != domain.CodeInvalidArgument || !strings.Contains(err.Error(), name) {
			t.Errorf("Open with a bad %s: %v, want INVALID_ARGUMENT naming it", name, err)
		}
	}
}
