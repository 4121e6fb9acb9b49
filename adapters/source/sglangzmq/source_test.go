package sglangzmq

import (
	"context"
	"fmt"
	"net"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/loadreporter/loadreporter/adapters/source/internal/sourcetest"
	"github.com/loadreporter/loadreporter/domain"
	"github.com/loadreporter/loadreporter/ports/porttest"
)

// TestPullFixtureFrames publishes the fixture's exact frames, one shape per
// rank, and checks what Pull makes of them.
func TestPullFixtureFrames(t *testing.T) {
	msgs := readFixture(t) // first shape, null rank, longer array (attn_dp_rank 1)
	p := newPublishers(t, 3)
	clk := porttest.NewClock(t0)
	s := start(t, testOptions(p, 3, clk))
	onSocket := []fixtureMessage{0: msgs[0], 1: msgs[2], 2: msgs[1]}
	eventually(t, "every rank heard", func() bool {
		for r, m := range onSocket {
			p.sendFrames(r, m.Frames...)
		}
		_, err := s.Pull(context.Background())
		return err == nil
	})
	base := domain.RankLoad{
		SnapshotTime:   t0,
		NumRunningReqs: 12, NumWaitingReqs: 3, NumUsedTokens: 41250, MaxTotalNumTokens: 200000,
		TokenUsage: 41250.0 / 200000,
	}
	rank0, rank1, rank2 := base, base, base
	rank1.DPRank, rank1.NumWaitingUncachedTokens, rank1.NumTotalTokens, rank1.MaxRunningRequests = 1, 640, 43800, 256
	rank2.DPRank = 2 // null attn_dp_rank: the socket's rank
	want := []domain.RankLoad{rank0, rank1, rank2}
	if got := mustPull(t, s); !reflect.DeepEqual(got, want) {
		t.Errorf("got  %+v\nwant %+v", got, want)
	}
}

func TestSequenceCounts(t *testing.T) {
	p := newPublishers(t, 2)
	c := newCounts()
	o := testOptions(p, 2, porttest.NewClock(t0))
	o.Observer = c.observer()
	s := start(t, o)
	b := body(t, 1, 0, 10, 100, nil)
	k := p.warm(s, 0, b)
	p.warm(s, 1, b)

	// Rank 0: in order, a skip of 3, in order, back to 2 (a restarted
	// scheduler), in order.
	for _, seq := range []uint64{k + 1, k + 5, k + 6, 2, 3} {
		p.send(0, seq, b)
	}
	waitSeq(t, s, 0, 3)
	resets, gaps, bad, _ := c.snapshot()
	if !reflect.DeepEqual(resets, map[int]int{0: 1}) {
		t.Errorf("resets %v, want map[0:1]", resets)
	}
	if !reflect.DeepEqual(gaps, map[int][]uint64{0: {3}}) {
		t.Errorf("gaps %v, want map[0:[3]]", gaps)
	}
	if len(bad) != 0 {
		t.Errorf("bad messages %v, want none", bad)
	}
}

// TestPublisherRestart: a scheduler restarts on the same port. zmq4 redials
// by itself and sends the subscription again (the watchdog is off here: the
// fake clock never reaches it), and the sequence going back is counted.
// Without WithAutomaticReconnect, or with zmq4's default limit of 10 dial
// attempts, this test fails.
func TestPublisherRestart(t *testing.T) {
	p := newPublishers(t, 2)
	c := newCounts()
	o := testOptions(p, 2, porttest.NewClock(t0))
	o.Observer = c.observer()
	s := start(t, o)
	before := body(t, 5, 0, 10, 100, nil)
	p.warm(s, 0, before) // up to sequence warmSeq or beyond
	p.warm(s, 1, before)

	// The scheduler stays down for 30 dial attempts, longer than zmq4's
	// default limit of 10 after which it would stop redialling for good.
	p.stop(0)
	time.Sleep(30 * o.ReconnectInterval)
	p.bind(0)
	after := body(t, 7, 1, 20, 100, nil)
	seq := uint64(0) // the new scheduler's sequence starts again
	eventually(t, "the restarted publisher heard", func() bool {
		seq++
		p.send(0, seq, after)
		snap, err := s.Pull(context.Background())
		return err == nil && snap.Ranks[0].NumRunningReqs == 7
	})
	got := mustPull(t, s)[0]
	if got.NumRunningReqs != 7 || got.NumWaitingReqs != 1 || got.NumUsedTokens != 20 {
		t.Errorf("rank 0 after the restart: %+v", got)
	}
	resets, _, _, resubs := c.snapshot()
	if !reflect.DeepEqual(resets, map[int]int{0: 1}) {
		t.Errorf("resets %v, want map[0:1]", resets)
	}
	if len(resubs) != 0 {
		t.Errorf("resubscribed %v: the library's reconnect should have done it", resubs)
	}
}

// TestSilentRankIsStale: a rank that stops publishing keeps its last value
// with its arrival time, so the report built from it is STALE with the
// rank's real age.
func TestSilentRankIsStale(t *testing.T) {
	p := newPublishers(t, 2)
	clk := porttest.NewClock(t0)
	o := testOptions(p, 2, clk)
	o.MaxRunningRequests = 8
	s := start(t, o)
	b := body(t, 1, 0, 10, 100, nil)
	p.warm(s, 0, b)
	k := p.warm(s, 1, b)

	clk.Advance(5 * time.Second)
	p.send(1, k+1, body(t, 2, 0, 10, 100, nil))
	waitSeq(t, s, 1, k+1)
	snap, err := pull(t, s)
	if err != nil {
		t.Fatalf("Pull: %v", err)
	}
	if a, b := snap.Ranks[0].SnapshotTime, snap.Ranks[1].SnapshotTime; !a.Equal(t0) || !b.Equal(t0.Add(5*time.Second)) {
		t.Errorf("snapshot times %v, %v; want %v, %v", a, b, t0, t0.Add(5*time.Second))
	}
	report := domain.ReportBuilder{StaleAfter: 3 * time.Second}.Build(1, clk.Now(), snap, err, domain.RankRange(2))
	if report.Status != domain.StatusStale || report.LastError != "load snapshot stale by 5000 ms" {
		t.Errorf("report %v %q, want STALE stale by 5000 ms", report.Status, report.LastError)
	}
}

func TestGarbageBody(t *testing.T) {
	p := newPublishers(t, 2)
	c := newCounts()
	clk := porttest.NewClock(t0)
	o := testOptions(p, 2, clk)
	o.Observer = c.observer()
	s := start(t, o)
	good := body(t, 1, 0, 10, 100, nil)
	p.warm(s, 0, good)
	k := p.warm(s, 1, good)

	p.send(1, k+1, body(t, 1, "three", 10, 100, nil))
	waitSeq(t, s, 1, k+1)
	snap, err := pull(t, s)
	msg := sourcetest.Failure(t, snap, err, domain.CodeInvalidSnapshot, false)
	want := fmt.Sprintf(`rank 1 (tcp://127.0.0.1:%d): body[2] (num_waiting_reqs) is a string ("three"), want an integer`, p.base+1)
	if msg != want {
		t.Errorf("error %q\nwant  %q", msg, want)
	}

	p.send(1, k+2, []byte{0xc1})
	waitSeq(t, s, 1, k+2)
	_, err = pull(t, s)
	want2 := fmt.Sprintf(`rank 1 (tcp://127.0.0.1:%d): body is not msgpack (code 0xc1), want an array ["LoadStat", num_running_reqs, …]`, p.base+1)
	if got := domain.ErrorMessage(err); got != want2 {
		t.Errorf("error %q\nwant  %q", got, want2)
	}
	// Then silence: the engine gone quiet is said too, not only its
	// last bad message.
	clk.Advance(2 * time.Second)
	_, err = pull(t, s)
	if got, want := domain.ErrorMessage(err), want2+"; nothing since, for 2000 ms"; got != want {
		t.Errorf("after 2 s of silence: %q\nwant  %q", got, want)
	}

	p.send(1, k+3, good)
	waitSeq(t, s, 1, k+3)
	mustPull(t, s)
	_, _, bad, _ := c.snapshot()
	if !reflect.DeepEqual(bad, map[int][]string{1: {want, want2}}) {
		t.Errorf("bad messages %v, want rank 1's two", bad)
	}
}

func TestBadFrames(t *testing.T) {
	p := newPublishers(t, 1)
	s := start(t, testOptions(p, 1, porttest.NewClock(t0)))
	good := body(t, 1, 0, 10, 100, nil)
	k := p.warm(s, 0, good)

	p.sendFrames(0, []byte("load"), []byte{1, 2}, good)
	eventually(t, "the bad frame seen", func() bool { _, err := s.Pull(context.Background()); return err != nil })
	_, err := pull(t, s)
	want := fmt.Sprintf("rank 0 (tcp://127.0.0.1:%d): sequence frame is 2 bytes, want 8 (big-endian)", p.base)
	if msg := sourcetest.Failure(t, nil, err, domain.CodeSourceFailed, false); msg != want {
		t.Errorf("error %q\nwant  %q", msg, want)
	}
	p.sendFrames(0, []byte("loadavg"), seqFrame(k+1), []byte("not ours")) // another topic: dropped
	p.send(0, k+1, good)
	waitSeq(t, s, 0, k+1)
	mustPull(t, s)
}

func TestNeverHeardRank(t *testing.T) {
	p := newPublishers(t, 3, 0, 1) // nothing listens on rank 2's port
	s := start(t, testOptions(p, 3, porttest.NewClock(t0)))
	b := body(t, 1, 0, 10, 100, nil)
	p.warm(s, 0, b)
	p.warm(s, 1, b)
	snap, err := pull(t, s)
	msg := sourcetest.Failure(t, snap, err, domain.CodeSourceFailed, false)
	if want := fmt.Sprintf("rank 2 (tcp://127.0.0.1:%d): no load message received yet", p.base+2); msg != want {
		t.Errorf("error %q\nwant  %q", msg, want)
	}
}

// TestWatchdogRedials: a peer that accepts and never speaks ZMTP holds the
// dial in its handshake. After ResubscribeAfter of silence on the Source's
// clock, the socket is dropped (closing the half-open connection) and a new
// one dials again; Close returns although no handshake ever finished.
func TestWatchdogRedials(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	accepted := make(chan net.Conn, 10)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		wg.Wait()
		close(accepted)
		for c := range accepted {
			_ = c.Close()
		}
	})
	clk := porttest.NewClock(t0)
	cnt := newCounts()
	s := start(t, Options{
		Endpoint: "tcp://" + ln.Addr().String(), DPSize: 1, Clock: clk,
		ReconnectInterval: 10 * time.Millisecond, ResubscribeAfter: 10 * time.Second,
		Observer: cnt.observer(),
	})
	ctx, cancel := context.WithTimeout(context.Background(), sourcetest.Wait)
	defer cancel()
	first := receive(ctx, t, accepted)
	if err := clk.WaitPending(ctx, 1); err != nil { // the watchdog
		t.Fatal(err)
	}
	clk.Advance(10 * time.Second)
	receive(ctx, t, accepted) // dialled anew
	readEOF(ctx, t, first)    // and the first connection was closed
	if _, _, _, resubs := cnt.snapshot(); resubs[0] != 1 {
		t.Errorf("resubscribed %v, want rank 0 once", resubs)
	}
	_, err = pull(t, s)
	sourcetest.Failure(t, nil, err, domain.CodeSourceFailed, false)
}

func receive(ctx context.Context, t *testing.T, ch <-chan net.Conn) net.Conn {
	t.Helper()
	select {
	case c := <-ch:
		return c
	case <-ctx.Done():
		t.Fatal("no connection within the deadline")
		return nil
	}
}

// readEOF reads c until the peer closes it, bounded by ctx.
func readEOF(ctx context.Context, t *testing.T, c net.Conn) {
	t.Helper()
	deadline, _ := ctx.Deadline()
	_ = c.SetReadDeadline(deadline)
	buf := make([]byte, 256)
	for {
		if _, err := c.Read(buf); err != nil {
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				t.Fatal("connection still open at the deadline")
			}
			return
		}
	}
}

func TestLifecycle(t *testing.T) {
	p := newPublishers(t, 1)
	s, err := New(testOptions(p, 1, porttest.NewClock(t0)))
	if err != nil {
		t.Fatal(err)
	}
	_, err = pull(t, s)
	if msg := sourcetest.Failure(t, nil, err, domain.CodeSourceFailed, false); msg != "sglang-zmq source is not started" {
		t.Errorf("before Start: %q", msg)
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := s.Start(context.Background()); domain.ErrorCode(err) != domain.CodeFailedPrecondition {
		t.Errorf("second Start: %v", err)
	}
	if got, want := s.String(), "sglang-zmq "+p.endpoint(); got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	for range 2 {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	}
	_, err = pull(t, s)
	if msg := sourcetest.Failure(t, nil, err, domain.CodeSourceFailed, false); msg != "sglang-zmq source is closed" {
		t.Errorf("after Close: %q", msg)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = s.Pull(ctx)
	sourcetest.Failure(t, nil, err, domain.CodePullTimeout, false)
}

// TestStopsWithContext: the goroutines end with Start's ctx, Close or not.
func TestStopsWithContext(t *testing.T) {
	p := newPublishers(t, 2)
	s, err := New(testOptions(p, 2, porttest.NewClock(t0)))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	p.warm(s, 0, body(t, 1, 0, 10, 100, nil))
	cancel()
	done := make(chan struct{})
	go func() {
		s.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(sourcetest.Wait):
		t.Fatal("goroutines still running after ctx ended")
	}
	_ = s.Close()
}
