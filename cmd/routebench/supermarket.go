package main

import (
	"math"
	"math/rand/v2"
)

// The supermarket model (Mitzenmacher, "The Power of Two Choices in
// Randomized Load Balancing", 2001; Vvedenskaya, Dobrushin and
// Karpelevich, 1996): n single-server FIFO queues with exponential
// service of mean 1, Poisson arrivals of rate λ·n, each sent to the
// shortest of d queues drawn at random, every queue length known at the
// instant of arrival. As n grows the mean time in system tends to
// 1/(1−λ) for d = 1 and to Σ_{i≥1} λ^((d^i−d)/(d−1)) for d ≥ 2: 10.0,
// 2.61 and 2.03 service times at λ = 0.9 for d = 1, 2, 3.

// supermarketLimit is the closed form above.
func supermarketLimit(lambda float64, d int) float64 {
	if d == 1 {
		return 1 / (1 - lambda)
	}
	var sum float64
	pow := 1.0 // d^i
	for i := 1; ; i++ {
		pow *= float64(d)
		term := math.Pow(lambda, (pow-float64(d))/float64(d-1))
		sum += term
		if term < 1e-15 {
			return sum
		}
	}
}

// supermarketRun says how one simulation of the supermarket model runs.
type supermarketRun struct {
	Servers int
	Lambda  float64
	Choices int
	// Warmup arrivals are not counted; Arrivals are.
	Warmup, Arrivals int
	Seed             uint64
}

// mean simulates the model and returns the mean time in system of
// the counted arrivals, in service times. Each server is a FIFO queue of
// departure times, so a job's sojourn follows from Lindley's recursion
// as it arrives; the queue length a router compares is the number of
// jobs still in the server (departures after the arrival). The choice of
// server is the benchmark's own best of d (choose), on those lengths.
func (r supermarketRun) mean() float64 {
	rng := rand.New(rand.NewPCG(r.Seed, 0xfeed))
	pick := rand.New(rand.NewPCG(r.Seed, 0xbeef))
	queues := make([]fifo, r.Servers)
	rate := r.Lambda * float64(r.Servers)
	t := 0.0
	var sum float64
	for i := range r.Warmup + r.Arrivals {
		t += rng.ExpFloat64() / rate
		k := choose(pick, r.Servers, r.Choices, func(k int) float64 { return float64(queues[k].length(t)) })
		q := &queues[k]
		q.length(t)
		start := max(t, q.last)
		q.last = start + rng.ExpFloat64()
		q.push(q.last)
		if i >= r.Warmup {
			sum += q.last - t
		}
	}
	return sum / float64(r.Arrivals)
}

// fifo is one server's departure times, in order, as a ring.
type fifo struct {
	buf        []float64
	head, size int
	last       float64 // the latest departure: when the server frees
}

// length drops the departures at or before t and returns how many jobs
// remain in the server.
func (q *fifo) length(t float64) int {
	for q.size > 0 && q.buf[q.head] <= t {
		q.head = (q.head + 1) % len(q.buf)
		q.size--
	}
	return q.size
}

func (q *fifo) push(d float64) {
	if q.size == len(q.buf) {
		grown := make([]float64, max(16, 2*len(q.buf)))
		for i := range q.size {
			grown[i] = q.buf[(q.head+i)%len(q.buf)]
		}
		q.buf, q.head = grown, 0
	}
	q.buf[(q.head+q.size)%len(q.buf)] = d
	q.size++
}
