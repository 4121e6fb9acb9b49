package session

import (
	"container/heap"
	"math"
	"slices"
	"time"
)

// The table's indexes, so that a look at the table costs what is due, not
// what the table holds: a fire serves a tenth of the fleet (ten phases),
// and a look between fires (a join, an early wake) serves nobody.
//
// Deadlines are kept as offsets from the table's epoch (time.Time.Sub,
// which compares by the monotonic clock when both times carry it, as
// Before and After do), as lease expiries already are. A deadline is
// shared: sessions of one interval and phase slot have the same deadlines,
// so the index is a bucket of sessions per deadline and a min-heap of the
// buckets, few whatever the fleet's size (intervals × slots, plus the
// instants sessions joined at).
//
// A bucket lists its sessions with lazy deletion: a session that leaves
// its deadline (removed, moved by update_config, served) only marks its
// entry stale, by a generation the entry no longer matches, and a bucket
// whose stale entries outnumber its live ones twice over is compacted, so
// an index holds at most about two entries a live session. A bucket left
// with no live session leaves the heap at once: buckets never outnumber
// live sessions.

// bucket is the sessions due at one deadline.
type bucket struct {
	key     time.Duration // the deadline's offset from the table's epoch
	at      time.Time     // the deadline
	entries []entry       // in the order sessions arrived; live ones are current
	live    int           // current entries
	pos     int           // the bucket's place in the heap
}

// entry is one session's place in a bucket: current while the session's
// generation is still gen.
type entry struct {
	s   *Session
	gen uint32
}

func (e entry) current() bool { return e.s.gen == e.gen }

// compactSlack is how many stale entries a bucket may hold beyond its
// live ones before it is compacted (with twice its live ones).
const compactSlack = 8

// keptBuckets bounds the emptied buckets kept for reuse: one fire empties
// about one bucket and fills about one.
const keptBuckets = 16

// bucketHeap orders buckets by deadline (container/heap).
type bucketHeap []*bucket

func (h bucketHeap) Len() int           { return len(h) }
func (h bucketHeap) Less(i, j int) bool { return h[i].key < h[j].key }
func (h bucketHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].pos, h[j].pos = i, j
}
func (h *bucketHeap) Push(x any) {
	b := x.(*bucket)
	b.pos = len(*h)
	*h = append(*h, b)
}
func (h *bucketHeap) Pop() any {
	old := *h
	b := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return b
}

// deadlines indexes the live sessions by their next deadline.
type deadlines struct {
	buckets map[time.Duration]*bucket
	heap    bucketHeap
	hint    *bucket   // the bucket a session last joined: the next often joins it too
	spare   []*bucket // emptied buckets, for reuse
	due     []*Session
}

// offset is t's offset from the table's epoch, how deadlines and lease
// expiries are kept.
func (t *Table) offset(at time.Time) time.Duration { return at.Sub(t.epoch) }

// index files s under its deadline, s.next, unless it is there already.
func (t *Table) index(s *Session) {
	key := t.offset(s.next)
	if s.bucket != nil {
		if s.bucket.key == key {
			return
		}
		t.unindex(s)
	}
	b := t.bucketFor(key, s.next)
	s.gen++
	b.entries = append(b.entries, entry{s, s.gen})
	b.live++
	s.bucket = b
}

// unindex takes s out of the deadline index.
func (t *Table) unindex(s *Session) {
	b := s.bucket
	if b == nil {
		return
	}
	s.bucket = nil
	s.gen++ // its entry is stale now
	b.live--
	switch {
	case b.live == 0:
		heap.Remove(&t.idx.heap, b.pos)
		t.dropBucket(b)
	case len(b.entries) > 2*b.live+compactSlack:
		kept := slices.DeleteFunc(b.entries, func(e entry) bool { return !e.current() })
		b.entries = kept
	}
}

// bucketFor returns the bucket of the deadline at (whose offset is key),
// made when none is.
func (t *Table) bucketFor(key time.Duration, at time.Time) *bucket {
	x := &t.idx
	if x.hint != nil && x.hint.key == key {
		return x.hint
	}
	b := x.buckets[key]
	if b == nil {
		if n := len(x.spare); n > 0 {
			b, x.spare = x.spare[n-1], x.spare[:n-1]
		} else {
			b = &bucket{}
		}
		b.key, b.at = key, at
		if x.buckets == nil {
			x.buckets = map[time.Duration]*bucket{}
		}
		x.buckets[key] = b
		heap.Push(&x.heap, b)
	}
	x.hint = b
	return b
}

// dropBucket forgets b, already out of the heap, and keeps it for reuse.
func (t *Table) dropBucket(b *bucket) {
	x := &t.idx
	delete(x.buckets, b.key)
	if x.hint == b {
		x.hint = nil
	}
	clear(b.entries) // no pointer to an ended session outlives its bucket
	b.entries, b.live, b.at = b.entries[:0], 0, time.Time{}
	if len(x.spare) < keptBuckets {
		x.spare = append(x.spare, b)
	}
}

// earliest is the bucket of the earliest deadline, or nil when no session
// lives.
func (t *Table) earliest() *bucket {
	if len(t.idx.heap) == 0 {
		return nil
	}
	return t.idx.heap[0]
}

// takeDue takes every session due at or before at out of the index: those
// of the earliest deadline first, each deadline's in registration order.
// The slice is the table's own, valid until the next call.
func (t *Table) takeDue(at time.Time) []*Session {
	x := &t.idx
	due := x.due[:0]
	key := t.offset(at)
	for len(x.heap) > 0 && x.heap[0].key <= key {
		b := heap.Pop(&x.heap).(*bucket)
		t.visited += len(b.entries)
		from := len(due)
		for _, e := range b.entries {
			if e.current() {
				e.s.bucket = nil
				due = append(due, e.s)
			}
		}
		// Sessions join a bucket in ID order when they come from one
		// earlier bucket or register; update_config, or two deadlines
		// that lead to one, mix them.
		if ds := due[from:]; !slices.IsSortedFunc(ds, byID) {
			slices.SortFunc(ds, byID)
		}
		t.dropBucket(b)
	}
	x.due = due
	return due
}

func byID(a, b *Session) int {
	switch {
	case a.id < b.id:
		return -1
	case a.id > b.id:
		return 1
	}
	return 0
}

// noLeaseBound is the lease bound of a table with no lease to watch.
const noLeaseBound = math.MaxInt64

// lowerLeaseBound makes sure the bound lies at or before s's expiry,
// after its lease was set (Add, Update): only set moves an expiry earlier;
// a renewal only moves it later (lease.renew). A lease that expires at
// the bound holds it.
func (t *Table) lowerLeaseBound(s *Session) {
	if e := s.lease.expiry.Load(); e <= t.leaseBound {
		t.leaseBound, t.boundHolder = e, s
	}
}

// mayExpire reports whether a lease may have run out at or before now.
func (t *Table) mayExpire(now time.Time) bool { return int64(t.offset(now)) >= t.leaseBound }

// boundExact reports whether the bound is the earliest expiry of the live
// leases: every lease expires at or after it, and its holder's still at
// it. A renewal of the holder (which the table is not told of), an
// update of its lease or its end leave the bound merely a bound.
func (t *Table) boundExact() bool {
	return t.boundHolder != nil && t.boundHolder.lease.expiry.Load() == t.leaseBound
}

// leasePass walks the leases: it ends (returns, in registration order)
// every session whose lease ran out at or before now, as lease.sweep
// decides against racing renewals, and sets the bound to the earliest
// expiry left, which is then exact, and its holder to that lease.
func (t *Table) leasePass(now time.Time) (expired []*Session) {
	bound := int64(noLeaseBound)
	var holder *Session
	t.visited += len(t.ordered)
	for _, s := range t.ordered {
		if !s.leased {
			continue
		}
		if s.lease.sweep(now) {
			expired = append(expired, s)
			continue
		}
		// Renewals since the sweep only moved it later: still a bound.
		if e := s.lease.expiry.Load(); e < bound {
			bound, holder = e, s
		}
	}
	t.leaseBound, t.boundHolder = bound, holder
	return expired
}
