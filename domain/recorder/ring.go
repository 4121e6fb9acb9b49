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

// take removes and returns up to n items from the front.
func (r *ring) take(n int) []item {
	n = min(n, r.n)
	out := make([]item, n)
	for i := range out {
		out[i] = r.front()
		r.popFront()
	}
	return out
}
