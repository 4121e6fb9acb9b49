package recorder

import "testing"

// The ring keeps its items in order while its backing array grows to the
// limit and shrinks back as they drain, and never holds more slots than
// its waiting items need beyond a factor of four.
func TestTheRingGrowsAndShrinksWithWhatWaits(t *testing.T) {
	const limit = 1000
	r := newRing(limit)
	if cap(r.buf) != 0 {
		t.Fatalf("a new ring holds %d slots, want none", cap(r.buf))
	}
	next, want := 0, 0
	pushN := func(k int) {
		for range k {
			r.push(item{size: next})
			next++
		}
	}
	popN := func(k int) {
		for range k {
			if got := r.front().size; got != want {
				t.Fatalf("front is item %d, want %d", got, want)
			}
			r.popFront()
			want++
			if len(r.buf) > ringKeptSlots && len(r.buf) > 4*r.n+4 {
				t.Fatalf("%d slots for %d waiting items", len(r.buf), r.n)
			}
		}
	}
	pushN(10)
	popN(5) // head moves off slot 0, so the next growth wraps
	pushN(limit - 5)
	if !r.full() || len(r.buf) != limit {
		t.Fatalf("with %d waiting: full %v, %d slots; want full, %d", r.n, r.full(), len(r.buf), limit)
	}
	popN(limit - 3)
	if len(r.buf) > ringKeptSlots {
		t.Errorf("%d slots for %d waiting items after draining", len(r.buf), r.n)
	}
	pushN(40)
	popN(43)
	if r.len() != 0 || r.bytes != 0 {
		t.Errorf("drained ring has %d items, %d bytes", r.len(), r.bytes)
	}
	batch, _ := r.take(10, 1<<30)
	if len(batch) != 0 {
		t.Errorf("take from an empty ring gave %d items", len(batch))
	}
}
