package forwarded

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/loadreporter/loadreporter/domain"
)

var t0 = time.Unix(1_800_000_000, 0)

func at(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

// rank is a stamped rank (ms from t0; -1: no stamp of the engine's).
func rank(dp int64, stampMs int, waiting, waitingTokens int64) domain.RankLoad {
	r := domain.RankLoad{DPRank: dp, NumWaitingReqs: waiting, NumWaitingUncachedTokens: waitingTokens, NumTotalTokens: 1000 + waitingTokens}
	if stampMs >= 0 {
		r.SnapshotTime = at(stampMs)
	}
	return r
}

// jsonBytes is JSON's bytes per prompt token, as the front counts them.
const jsonBytes = 4

func send(l *Ledger, ms, bodyBytes int) *Request {
	r := l.Add(at(ms), jsonBytes, 0)
	r.Sent(bodyBytes)
	return r
}

// A request passed on after the engine's snapshot shows as waiting, with
// its prompt estimated from its body; one passed on before the snapshot,
// or answered, does not.
func TestWhatTheSnapshotCannotCountIsAdded(t *testing.T) {
	t.Parallel()
	var l Ledger
	send(&l, 10, 400)   // before the snapshot (100): counted by it
	send(&l, 150, 2048) // after: 512 tokens
	answered := send(&l, 160, 400)
	answered.Done()
	snap := domain.Snapshot{Ranks: []domain.RankLoad{rank(0, 100, 3, 300)}}
	got, n := l.AddTo(snap)
	if n != 1 {
		t.Fatalf("added %d, want 1: the request passed on after the snapshot and not answered", n)
	}
	k := got.Ranks[0]
	if k.NumWaitingReqs != 4 || k.NumWaitingUncachedTokens != 300+512 || k.NumTotalTokens != 1300+512 {
		t.Errorf("rank after: waiting %d, waiting tokens %d, total tokens %d; want 4, 812, 1812", k.NumWaitingReqs, k.NumWaitingUncachedTokens, k.NumTotalTokens)
	}
	if snap.Ranks[0].NumWaitingReqs != 3 {
		t.Error("AddTo changed the snapshot it was given (its ranks may be shared by the source)")
	}
	// The engine publishes after the request: the snapshot counts it.
	got, n = l.AddTo(domain.Snapshot{Ranks: []domain.RankLoad{rank(0, 200, 4, 812)}})
	if n != 0 || got.Ranks[0].NumWaitingReqs != 4 {
		t.Errorf("after a snapshot at 200: added %d, waiting %d; want 0 and the engine's 4", n, got.Ranks[0].NumWaitingReqs)
	}
	if h := l.Held(); h != 0 {
		t.Errorf("%d requests still held once every snapshot counts them or they were answered", h)
	}
}

// ArrivalMargin: a request passed on just before the snapshot still
// counts (the engine had not taken it in yet); one passed on well before
// does not.
func TestTheMarginBeforeTheStamp(t *testing.T) {
	t.Parallel()
	var l Ledger
	m := int(ArrivalMargin / time.Millisecond)
	send(&l, 100-m-1, 40)
	send(&l, 100-m, 40)
	_, n := l.AddTo(domain.Snapshot{Ranks: []domain.RankLoad{rank(0, 100, 0, 0)}})
	if n != 1 {
		t.Errorf("added %d, want 1: only the request within %v of the stamp", n, ArrivalMargin)
	}
}

// A rank the engine did not stamp is left alone: there is no time to
// count from, and with no rank stamped nothing is held.
func TestUnstampedRanksAreLeftAlone(t *testing.T) {
	t.Parallel()
	var l Ledger
	send(&l, 150, 400)
	snap := domain.Snapshot{Ranks: []domain.RankLoad{rank(0, -1, 2, 20)}}
	got, n := l.AddTo(snap)
	if n != 0 || got.Ranks[0] != snap.Ranks[0] {
		t.Errorf("added %d to an unstamped rank: %+v", n, got.Ranks[0])
	}
	if l.Held() != 0 {
		t.Error("requests held while no rank is stamped: nothing can count them, and the ledger would grow")
	}
}

// Several requests over several ranks: each goes where it would find the
// least ahead of it, so a burst spreads as the engine's own balancer
// would spread it; a rank whose snapshot is newer than a request does
// not get it.
func TestRequestsSpreadOverTheRanks(t *testing.T) {
	t.Parallel()
	var l Ledger
	for range 4 {
		send(&l, 150, 400) // 100 tokens each
	}
	snap := domain.Snapshot{Ranks: []domain.RankLoad{rank(0, 100, 0, 0), rank(1, 100, 0, 150), rank(2, 200, 0, 0)}}
	got, n := l.AddTo(snap)
	if n != 4 {
		t.Fatalf("added %d, want 4", n)
	}
	// Rank 2's snapshot (200) already shows them; ranks 0 and 1 get them
	// least loaded first: 0 (0), 0 (101), 1 (150), 0 (202) → 3 and 1.
	if got.Ranks[0].NumWaitingReqs != 3 || got.Ranks[1].NumWaitingReqs != 1 || got.Ranks[2].NumWaitingReqs != 0 {
		t.Errorf("waiting per rank %d %d %d, want 3 1 0", got.Ranks[0].NumWaitingReqs, got.Ranks[1].NumWaitingReqs, got.Ranks[2].NumWaitingReqs)
	}
}

// The body's bytes are counted as they pass: a request whose body is
// still streaming weighs what has passed so far, and at least a token.
func TestPromptTokensFromTheBody(t *testing.T) {
	t.Parallel()
	var l Ledger
	r := l.Add(at(0), jsonBytes, 0)
	if got := r.PromptTokens(); got != 1 {
		t.Errorf("no body yet: %d tokens, want 1", got)
	}
	r.Sent(5)
	if got := r.PromptTokens(); got != 2 {
		t.Errorf("5 bytes at 4 a token: %d, want 2", got)
	}
	p := l.Add(at(0), 3, 0)
	p.Sent(300)
	if got := p.PromptTokens(); got != 100 {
		t.Errorf("300 bytes at 3 a token: %d tokens, want 100", got)
	}
	// A length known up front counts at once, and the bytes passing are
	// not counted again.
	k := l.Add(at(0), jsonBytes, 2048)
	if got := k.PromptTokens(); got != 512 {
		t.Errorf("a 2048-byte body before it passes: %d tokens, want 512", got)
	}
	k.Sent(2048)
	if got := k.PromptTokens(); got != 512 {
		t.Errorf("a 2048-byte body once passed: %d tokens, want 512", got)
	}
	var none *Request
	none.Sent(10)
	none.Done() // a nil request does nothing, and does not panic
}

// The ledger is bounded: past MaxHeld the oldest is forgotten.
func TestTheLedgerIsBounded(t *testing.T) {
	t.Parallel()
	var l Ledger
	for i := range MaxHeld + 100 {
		l.Add(at(i%1000), 1, 0)
	}
	if h := l.Held(); h != MaxHeld {
		t.Errorf("held %d, want the bound %d", h, MaxHeld)
	}
	if cap(l.q) > 4*MaxHeld {
		t.Errorf("the queue's array grew to %d for %d held", cap(l.q), MaxHeld)
	}
}

type fakeSource struct {
	snap domain.Snapshot
	err  error
}

func (f fakeSource) Pull(context.Context) (domain.Snapshot, error) { return f.snap, f.err }

// Source adds to every snapshot it pulls, and passes errors unchanged.
func TestSource(t *testing.T) {
	t.Parallel()
	var l Ledger
	send(&l, 150, 400)
	got, err := (&Source{Inner: fakeSource{snap: domain.Snapshot{Ranks: []domain.RankLoad{rank(0, 100, 0, 0)}}}, Ledger: &l}).Pull(t.Context())
	if err != nil || got.Ranks[0].NumWaitingReqs != 1 || l.Added() != 1 {
		t.Errorf("pull: %v, waiting %d, Added %d; want the request added, and said", err, got.Ranks[0].NumWaitingReqs, l.Added())
	}
	boom := errors.New("engine down")
	if _, err := (&Source{Inner: fakeSource{err: boom}, Ledger: &l}).Pull(t.Context()); !errors.Is(err, boom) {
		t.Errorf("the source's error became %v", err)
	}
}

// Adds, body bytes, answers and AddTo from many goroutines at once (run
// with -race).
func TestConcurrentUse(t *testing.T) {
	t.Parallel()
	var l Ledger
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 500 {
				r := l.Add(at(g*1000+i), jsonBytes, 0)
				r.Sent(40)
				if i%2 == 0 {
					r.Done()
				}
			}
		})
	}
	wg.Go(func() {
		// Stamped at t0: every request comes after it, so none that is
		// not answered may be dropped.
		for range 200 {
			l.AddTo(domain.Snapshot{Ranks: []domain.RankLoad{rank(0, 0, 0, 0)}})
		}
	})
	wg.Wait()
	_, n := l.AddTo(domain.Snapshot{Ranks: []domain.RankLoad{rank(0, 0, 0, 0)}})
	if n != 8*250 {
		t.Errorf("added %d, want the %d requests not answered", n, 8*250)
	}
}

// Recount is the engine's last snapshot as pulled, with the count as it
// stands now; nothing after a failed pull. Changes is signalled by each
// request recorded, a burst being one signal.
func TestRecountAndChanges(t *testing.T) {
	t.Parallel()
	var l Ledger
	changes := l.Changes()
	inner := &flipSource{snap: domain.Snapshot{Ranks: []domain.RankLoad{rank(0, 100, 2, 20)}}}
	src := &Source{Inner: inner, Ledger: &l}
	if _, ok := src.Recount(); ok {
		t.Error("a recount before any pull")
	}
	if _, err := src.Pull(t.Context()); err != nil {
		t.Fatal(err)
	}
	send(&l, 150, 400)
	send(&l, 160, 400)
	select {
	case <-changes:
	default:
		t.Fatal("no signal for the requests recorded")
	}
	select {
	case <-changes:
		t.Error("two signals for one burst read late")
	default:
	}
	got, ok := src.Recount()
	if !ok || got.Ranks[0].NumWaitingReqs != 4 || got.Ranks[0].NumWaitingUncachedTokens != 220 {
		t.Errorf("recount: %v %+v; want the pull's 2 waiting and the two requests passed on since", ok, got.Ranks)
	}
	if inner.snap.Ranks[0].NumWaitingReqs != 2 {
		t.Error("the recount changed the source's snapshot")
	}
	inner.err = errors.New("engine down")
	if _, err := src.Pull(t.Context()); err == nil {
		t.Fatal("the failed pull succeeded")
	}
	if _, ok := src.Recount(); ok {
		t.Error("a recount after a failed pull: there is no snapshot to recount")
	}
	// A rank without the engine's stamp: its age would be unknown.
	inner.err, inner.snap = nil, domain.Snapshot{Ranks: []domain.RankLoad{rank(0, 100, 0, 0), rank(1, -1, 0, 0)}}
	if _, err := src.Pull(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, ok := src.Recount(); ok {
		t.Error("a recount of a snapshot with an unstamped rank")
	}
}

type flipSource struct {
	snap domain.Snapshot
	err  error
}

func (f *flipSource) Pull(context.Context) (domain.Snapshot, error) { return f.snap, f.err }
