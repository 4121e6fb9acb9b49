package recorder

// ring is a fixed-capacity FIFO of items that also counts their
// estimated bytes.
type ring struct {
	buf   []item
	head  int
	n     int
	bytes int
}

func newRing(capacity int) ring { return ring{buf: make([]item, capacity)} }

func (r *ring) len() int    { return r.n }
func (r *ring) full() bool  { return r.n == len(r.buf) }
func (r *ring) front() item { return r.buf[r.head] }

func (r *ring) push(it item) {
	r.buf[(r.head+r.n)%len(r.buf)] = it
	r.n++
	r.bytes += it.size
}

func (r *ring) popFront() {
	r.bytes -= r.buf[r.head].size
	r.buf[r.head] = item{}
	r.head = (r.head + 1) % len(r.buf)
	r.n--
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
