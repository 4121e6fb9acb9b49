package recorder

// ring is a FIFO of at most limit items that also counts their estimated
// bytes. Its backing array grows as items wait and shrinks as they drain,
// so a recorder whose store keeps up holds a few dozen slots, not the
// whole bound (50 000 items are 2 MiB the collector scans, and paces
// itself by, in every process).
type ring struct {
	buf   []item
	limit int
	head  int
	n     int
	bytes int
}

// ringMinSlots is the smallest backing array once anything was pushed;
// ringKeptSlots the size it never shrinks below, so a queue that hovers
// about a few dozen reports does not reallocate each time it crosses one
// (resizing copies under the recorder's lock, which Record takes on the
// fire loop).
const (
	ringMinSlots  = 16
	ringKeptSlots = 4 * ringMinSlots
)

func newRing(limit int) ring { return ring{limit: limit} }

func (r *ring) len() int    { return r.n }
func (r *ring) full() bool  { return r.n >= r.limit }
func (r *ring) front() item { return r.buf[r.head] }

func (r *ring) push(it item) {
	if r.n == len(r.buf) {
		r.resize(min(r.limit, max(ringMinSlots, 2*len(r.buf))))
	}
	r.buf[(r.head+r.n)%len(r.buf)] = it
	r.n++
	r.bytes += it.size
}

func (r *ring) popFront() {
	r.bytes -= r.buf[r.head].size
	r.buf[r.head] = item{}
	r.head = (r.head + 1) % len(r.buf)
	r.n--
	if len(r.buf) > ringKeptSlots && r.n <= len(r.buf)/4 {
		r.resize(len(r.buf) / 2)
	}
}

// resize moves the waiting items, in order, to a backing array of slots
// (at least r.n).
func (r *ring) resize(slots int) {
	buf := make([]item, slots)
	for i := range r.n {
		buf[i] = r.buf[(r.head+i)%len(r.buf)]
	}
	r.buf, r.head = buf, 0
}

// take removes and returns items from the front, up to n of them and
// maxBytes of their sizes but at least one (when any waits), and their
// bytes.
func (r *ring) take(n, maxBytes int) ([]item, int) {
	var out []item
	size := 0
	for r.n > 0 && len(out) < n && (len(out) == 0 || size+r.front().size <= maxBytes) {
		it := r.front()
		out = append(out, it)
		size += it.size
		r.popFront()
	}
	return out, size
}
