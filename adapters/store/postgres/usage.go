package postgres

import "container/heap"

// usageRun is an ascending run of token_usage values: a history_rank_minutes
// usage column (b, 8 bytes a value) or values read from reports (f).
type usageRun struct {
	b    []byte
	f    []float64
	next int // values not yet taken: [0, len-next)
}

func (r *usageRun) len() int {
	if r.f != nil {
		return len(r.f)
	}
	return len(r.b) / 8
}

func (r *usageRun) at(i int) float64 {
	if r.f != nil {
		return r.f[i]
	}
	return usageAt(r.b, i)
}

// topValues returns the k-th and (k-1)-th largest values of the runs
// together (k ≥ 1; the second is the first when k is 1), taking values
// from the top of the runs through a heap of the runs' largest remaining
// values.
func topValues(runs []usageRun, k int) (kth, before float64) {
	h := make(runHeap, 0, len(runs))
	for i := range runs {
		if runs[i].len() > 0 {
			h = append(h, &runs[i])
		}
	}
	heap.Init(&h)
	for taken := 0; taken < k && len(h) > 0; taken++ {
		r := h[0]
		before, kth = kth, r.top()
		if taken == 0 {
			before = kth
		}
		r.next++
		if r.next == r.len() {
			heap.Pop(&h)
		} else {
			heap.Fix(&h, 0)
		}
	}
	return kth, before
}

func (r *usageRun) top() float64 { return r.at(r.len() - 1 - r.next) }

// runHeap is a max-heap of runs by their largest remaining value.
type runHeap []*usageRun

func (h runHeap) Len() int           { return len(h) }
func (h runHeap) Less(i, j int) bool { return h[i].top() > h[j].top() }
func (h runHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *runHeap) Push(x any)        { *h = append(*h, x.(*usageRun)) }
func (h *runHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
