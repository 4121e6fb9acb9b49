package forwarded

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/loadreporter/loadreporter/domain"
)

// ArrivalMargin is how long before a rank's snapshot time a request passed
// on still counts: the engine takes a request in some milliseconds after
// the front passed it (parsing, tokenizing), and a snapshot taken in
// between does not show it. Counted twice for a moment, a request moves a
// router's next pick away; missed, it lets a crowd in.
const ArrivalMargin = 5 * time.Millisecond

// MaxHeld bounds the requests a Ledger holds: past it the oldest is
// forgotten. The front's own in-flight bound is far below it.
const MaxHeld = 1 << 16

// Ledger holds the requests a front passed on, oldest first, until the
// engine's snapshots count them or they are answered. Safe for concurrent
// use: Add from the front's requests, AddTo from the fire loop.
type Ledger struct {
	mu      sync.Mutex
	q       []*Request
	head    int
	changes chan struct{} // made by the first Changes

	added atomic.Int64 // requests the last AddTo added
}

// Request is one request passed on. Its methods are safe for concurrent
// use; a nil *Request does nothing.
type Request struct {
	at            time.Time
	bytesPerToken int64
	known         bool // bytes was the body's whole length from the start
	bytes         atomic.Int64
	done          atomic.Bool
}

// Add records a request passed on at at, whose body is encoded at
// bytesPerToken bytes a prompt token (at least 1) and holds bodyBytes
// bytes when that is known (0: unknown, counted as it passes with Sent).
// A report between two pulls may be built at once (Changes): with the
// body's length known up front, it counts the whole prompt.
func (l *Ledger) Add(at time.Time, bytesPerToken int, bodyBytes int64) *Request {
	r := &Request{at: at, bytesPerToken: int64(max(1, bytesPerToken))}
	r.known = bodyBytes > 0
	r.bytes.Store(max(0, bodyBytes))
	l.mu.Lock()
	defer l.mu.Unlock()
	l.q = append(l.q, r)
	if len(l.q)-l.head > MaxHeld {
		l.q[l.head] = nil
		l.head++
	}
	l.compact()
	l.notifyLocked()
	return r
}

// Notify signals Changes: a request's body, of a length not known when it
// was added, has passed whole, so a recount now weighs its whole prompt.
func (l *Ledger) Notify() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.notifyLocked()
}

func (l *Ledger) notifyLocked() {
	if l.changes != nil {
		select {
		case l.changes <- struct{}{}:
		default:
		}
	}
}

// Changes is signalled (capacity one: a burst is one signal) each time a
// request is added from now on.
func (l *Ledger) Changes() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.changes == nil {
		l.changes = make(chan struct{}, 1)
	}
	return l.changes
}

// Sent counts n more bytes of the request's body passed on; a body whose
// length was given to Add is already counted.
func (r *Request) Sent(n int) {
	if r != nil && n > 0 && !r.known {
		r.bytes.Add(int64(n))
	}
}

// Done says the engine answered the request (or it failed, or its client
// went away): no snapshot counts it from now on.
func (r *Request) Done() {
	if r != nil {
		r.done.Store(true)
	}
}

// PromptTokens is the request's prompt estimated from its body so far:
// at least 1.
func (r *Request) PromptTokens() int64 {
	return max(1, (r.bytes.Load()+r.bytesPerToken-1)/r.bytesPerToken)
}

// Added is how many requests the last pull's snapshot had added
// (Source.Pull).
func (l *Ledger) Added() int64 { return l.added.Load() }

// Held is how many requests the ledger holds (answered ones included until
// they are dropped).
func (l *Ledger) Held() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.q) - l.head
}

// AddTo returns s with the requests no rank's snapshot counts added, each
// as one waiting request with its prompt tokens (waiting uncached and
// total tokens) on the stamped rank it would join least loaded, and how
// many it added. A request counts for a rank when it was passed on no
// earlier than ArrivalMargin before the rank's SnapshotTime and is not
// Done. s is not modified (its ranks may be shared): the result has ranks
// of its own when anything was added. Requests that no stamp can count
// any more, and answered ones, are dropped; a snapshot with no stamped
// rank drops them all (an engine that stamps no rank gives nothing to
// count from, and the ledger must not grow meanwhile).
func (l *Ledger) AddTo(s domain.Snapshot) (domain.Snapshot, int) {
	var oldest time.Time
	for _, k := range s.Ranks {
		if !k.SnapshotTime.IsZero() && (oldest.IsZero() || k.SnapshotTime.Before(oldest)) {
			oldest = k.SnapshotTime
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for l.head < len(l.q) {
		r := l.q[l.head]
		if !oldest.IsZero() && !r.done.Load() && !r.at.Before(oldest.Add(-ArrivalMargin)) {
			break
		}
		l.q[l.head] = nil
		l.head++
	}
	l.compact()
	if l.head == len(l.q) {
		return s, 0
	}
	ranks := slices.Clone(s.Ranks)
	added := 0
	for _, r := range l.q[l.head:] {
		if r.done.Load() {
			continue
		}
		var best *domain.RankLoad
		for i := range ranks {
			k := &ranks[i]
			if k.SnapshotTime.IsZero() || r.at.Before(k.SnapshotTime.Add(-ArrivalMargin)) {
				continue
			}
			if best == nil || queued(*k) < queued(*best) {
				best = k
			}
		}
		if best == nil {
			continue
		}
		tokens := r.PromptTokens()
		best.NumWaitingReqs++
		best.NumWaitingUncachedTokens += tokens
		best.NumTotalTokens += tokens
		added++
	}
	if added > 0 {
		s.Ranks = ranks
	}
	return s, added
}

// queued is what a new request would find ahead of it on a rank: its
// prompt tokens waiting, and one a request held.
func queued(k domain.RankLoad) int64 {
	return max(0, k.NumWaitingUncachedTokens) + max(0, k.NumRunningReqs) + max(0, k.NumWaitingReqs)
}

// compact reclaims the dropped head of the queue once it is most of it;
// l.mu is held.
func (l *Ledger) compact() {
	if l.head > 64 && l.head*2 > len(l.q) {
		n := copy(l.q, l.q[l.head:])
		clear(l.q[n:])
		l.q, l.head = l.q[:n], 0
	}
}

// Puller is what Source wraps: a snapshot source (ports.SnapshotSource).
type Puller interface {
	Pull(ctx context.Context) (domain.Snapshot, error)
}

// Source is a snapshot source whose every snapshot has its Ledger's
// requests added (Ledger.AddTo). It keeps the engine's last snapshot as
// pulled, so that a report between two pulls can count what the front
// passed on since (Recount). Safe for concurrent use.
type Source struct {
	Inner  Puller
	Ledger *Ledger

	mu   sync.Mutex
	last domain.Snapshot
	ok   bool // last is a snapshot the last pull returned
}

// Pull pulls Inner and adds what its snapshot does not count yet.
func (s *Source) Pull(ctx context.Context) (domain.Snapshot, error) {
	snap, err := s.Inner.Pull(ctx)
	s.mu.Lock()
	s.last, s.ok = snap, err == nil
	s.mu.Unlock()
	if err != nil || s.Ledger == nil {
		return snap, err
	}
	snap, n := s.Ledger.AddTo(snap)
	s.Ledger.added.Store(int64(n))
	return snap, nil
}

// Recount is the engine's last snapshot with what the Ledger counts now
// added; false when the last pull failed or there was none, or when a
// rank carries no stamp of the engine's (its age would be unknown, and
// there is nothing to count from).
func (s *Source) Recount() (domain.Snapshot, bool) {
	s.mu.Lock()
	last, ok := s.last, s.ok
	s.mu.Unlock()
	if !ok || s.Ledger == nil || len(last.Ranks) == 0 {
		return domain.Snapshot{}, false
	}
	for _, k := range last.Ranks {
		if k.SnapshotTime.IsZero() {
			return domain.Snapshot{}, false
		}
	}
	snap, _ := s.Ledger.AddTo(last)
	return snap, true
}

// Changes is signalled (capacity one, never blocking the sender) each
// time the Ledger records a request passed on; nil, never signalled,
// without a Ledger.
func (s *Source) Changes() <-chan struct{} {
	if s.Ledger == nil {
		return nil
	}
	return s.Ledger.Changes()
}
