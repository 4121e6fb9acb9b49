package sglangzmq

import (
	"context"
	"encoding/binary"
	"fmt"
	"maps"
	"sync"
	"testing"
	"time"

	"github.com/go-zeromq/zmq4"
	"github.com/vmihailenco/msgpack/v5"
	"go.uber.org/goleak"

	"github.com/loadreporter/loadreporter/adapters/source/internal/sourcetest"
	"github.com/loadreporter/loadreporter/domain"
	"github.com/loadreporter/loadreporter/internal/sharedtest"
	"github.com/loadreporter/loadreporter/ports/porttest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// zmq4 v0.17.0's PUB socket, used only by the tests' stand-in
		// publisher, never stops its writer goroutine: its Close does not
		// close the writer. The Source only makes SUB sockets.
		goleak.IgnoreAnyFunction("github.com/go-zeromq/zmq4.(*pubMWriter).run"),
	)
}

// t0 is the fake clock's start.
var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// publishers stand in for SGLang's schedulers: one zmq4 PUB socket per
// rank on consecutive ports, speaking the engine's framing.
type publishers struct {
	t     testing.TB
	base  int
	mu    sync.Mutex
	socks map[int]zmq4.Socket
}

// newPublishers binds PUB sockets for the given ranks (all of 0..n-1 when
// none are given) on n consecutive free ports.
func newPublishers(t testing.TB, n int, ranks ...int) *publishers {
	t.Helper()
	p := &publishers{t: t, base: sharedtest.ConsecutivePorts(t, n), socks: map[int]zmq4.Socket{}}
	if len(ranks) == 0 {
		for r := range n {
			ranks = append(ranks, r)
		}
	}
	for _, r := range ranks {
		p.bind(r)
	}
	t.Cleanup(func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		for _, s := range p.socks {
			_ = s.Close()
		}
	})
	return p
}

func (p *publishers) bind(rank int) {
	p.t.Helper()
	s := zmq4.NewPub(context.Background(), zmq4.WithLogger(quiet))
	if err := s.Listen(fmt.Sprintf("tcp://127.0.0.1:%d", p.base+rank)); err != nil {
		p.t.Fatalf("rank %d: %v", rank, err)
	}
	p.mu.Lock()
	p.socks[rank] = s
	p.mu.Unlock()
}

// stop closes rank's socket, as a scheduler that exits does; bind starts
// it again on the same port.
func (p *publishers) stop(rank int) {
	p.mu.Lock()
	old := p.socks[rank]
	delete(p.socks, rank)
	p.mu.Unlock()
	_ = old.Close()
}

// endpoint is rank 0's endpoint, for Options.Endpoint.
func (p *publishers) endpoint() string { return fmt.Sprintf("tcp://127.0.0.1:%d", p.base) }

// sendFrames publishes raw frames on rank's socket.
func (p *publishers) sendFrames(rank int, frames ...[]byte) {
	p.t.Helper()
	p.mu.Lock()
	s := p.socks[rank]
	p.mu.Unlock()
	if err := s.Send(zmq4.NewMsgFrom(frames...)); err != nil {
		p.t.Fatalf("rank %d: send: %v", rank, err)
	}
}

// send publishes one message the way SGLang frames it.
func (p *publishers) send(rank int, seq uint64, body []byte) {
	p.t.Helper()
	p.sendFrames(rank, []byte("load"), seqFrame(seq), body)
}

func seqFrame(seq uint64) []byte { return binary.BigEndian.AppendUint64(nil, seq) }

// body encodes a LoadStat array as SGLang does (tag first).
func body(t testing.TB, values ...any) []byte {
	t.Helper()
	b, err := msgpack.Marshal(append([]any{"LoadStat"}, values...))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// warm publishes b on rank with sequence numbers warmSeq, warmSeq+1, …
// until the Source has received one (PUB drops what it sends before the
// subscription arrives), then returns the last sequence number the Source
// has seen.
// warmSeq is well above the small numbers tests send to make a sequence go
// back, so that a test waiting for one of them never finds it already there.
const warmSeq = 100

func (p *publishers) warm(s *Source, rank int, b []byte) uint64 {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), sourcetest.Wait)
	defer cancel()
	for seq := uint64(warmSeq); ; seq++ {
		p.send(rank, seq, b)
		if poll(ctx, 20*time.Millisecond, func() bool { got, ok := s.lastSeq(rank); return ok && got == seq }) {
			return seq
		}
		if ctx.Err() != nil {
			p.t.Fatalf("rank %d received nothing within %s", rank, sourcetest.Wait)
		}
	}
}

// lastSeq is the sequence number of rank's latest message.
func (s *Source) lastSeq(rank int) (uint64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if rank >= len(s.ranks) {
		return 0, false
	}
	r := s.ranks[rank]
	return r.seq, r.haveSeq
}

// poll checks cond every millisecond until it holds (true), d passes or
// ctx ends (false).
func poll(ctx context.Context, d time.Duration, cond func() bool) bool {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			return false
		case <-tick.C:
		}
	}
	return true
}

// eventually fails the test unless cond holds within sourcetest.Wait.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	if !poll(context.Background(), sourcetest.Wait, cond) {
		t.Fatalf("%s: not within %s", what, sourcetest.Wait)
	}
}

// waitSeq waits until rank's latest message is seq.
func waitSeq(t testing.TB, s *Source, rank int, seq uint64) {
	t.Helper()
	eventually(t, fmt.Sprintf("rank %d receiving sequence %d", rank, seq), func() bool {
		got, ok := s.lastSeq(rank)
		return ok && got == seq
	})
}

// testOptions are Options for a Source on p's sockets, with a fake clock
// and a watchdog that never fires unless the test moves the clock by an
// hour; tests change what they are about.
func testOptions(p *publishers, dpSize int, clk *porttest.Clock) Options {
	return Options{
		Endpoint: p.endpoint(), DPSize: dpSize, Clock: clk,
		ReconnectInterval: 10 * time.Millisecond,
		ResubscribeAfter:  time.Hour,
	}
}

// start makes and starts a Source that is closed when the test ends.
func start(t testing.TB, o Options) *Source {
	t.Helper()
	s, err := New(o)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

// pull runs one Pull, bounded like every pull in the sources' tests.
func pull(t testing.TB, s *Source) (domain.Snapshot, error) {
	t.Helper()
	return sourcetest.Within(t, 0, s.Pull)
}

// mustPull is pull for a Pull that must succeed.
func mustPull(t testing.TB, s *Source) []domain.RankLoad {
	t.Helper()
	snap, err := pull(t, s)
	if err != nil {
		t.Fatalf("Pull: %v", err)
	}
	return snap.Ranks
}

// counts records what an Observer is told.
type counts struct {
	mu      sync.Mutex
	resets  map[int]int
	gaps    map[int][]uint64
	bad     map[int][]string
	resubs  map[int]int
	details chan error
}

func newCounts() *counts {
	return &counts{
		resets: map[int]int{}, gaps: map[int][]uint64{}, bad: map[int][]string{}, resubs: map[int]int{},
		details: make(chan error, 100),
	}
}

func (c *counts) observer() Observer {
	return Observer{
		SequenceReset: func(rank int) { c.mu.Lock(); c.resets[rank]++; c.mu.Unlock() },
		SequenceGap: func(rank int, missed uint64) {
			c.mu.Lock()
			c.gaps[rank] = append(c.gaps[rank], missed)
			c.mu.Unlock()
		},
		BadMessage: func(rank int, err error) {
			c.mu.Lock()
			c.bad[rank] = append(c.bad[rank], domain.ErrorMessage(err))
			c.mu.Unlock()
		},
		Resubscribed: func(rank int) { c.mu.Lock(); c.resubs[rank]++; c.mu.Unlock() },
		DetailPull:   func(err error) { c.details <- err },
	}
}

// snapshot returns copies of the counts.
func (c *counts) snapshot() (resets map[int]int, gaps map[int][]uint64, bad map[int][]string, resubs map[int]int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.resets), maps.Clone(c.gaps), maps.Clone(c.bad), maps.Clone(c.resubs)
}
