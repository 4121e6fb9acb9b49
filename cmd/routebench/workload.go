package main

import (
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/loadreporter/loadreporter/client"
)

// request is one arrival of the shared stream: when it comes, how large
// it is, and which router receives it.
type request struct {
	// At is the arrival, from the start of the run.
	At time.Duration
	// Prompt and Output are its prompt tokens and max new tokens (the
	// engine generates exactly Output: there is no EOS).
	Prompt, Output int
	// Router is the router that receives it.
	Router int
}

// clientRequest is what a router tells client's accounting of it: what
// it may hold in the KV cache (prompt plus max new tokens) and its
// prompt.
func (r request) clientRequest() client.Request {
	return client.Request{Tokens: int64(r.Prompt) + int64(r.Output), PromptTokens: int64(r.Prompt)}
}

// sizes draws request sizes.
type sizes struct {
	// Name is the workload's name in tables and flags.
	Name string
	// Desc says what it draws.
	Desc string
	draw func(r *rand.Rand) (prompt, output int)
}

// Bounds of the heavy-tailed sizes. A prompt of at least minPrompt tokens
// can be written exactly as a chat message (the engine adds 9 template
// tokens); the upper clips keep one request far below the KV cache.
const (
	minPrompt = 16
	maxPrompt = 16384
	minOutput = 16
	maxOutput = 2048
)

// workloads are the request-size distributions the benchmark knows.
var workloads = []sizes{
	{
		Name: "lognormal",
		Desc: "prompt log-normal (median 512, σ 1.0, clipped to 16..16384), output log-normal (median 256, σ 0.8, clipped to 16..2048), independent",
		draw: func(r *rand.Rand) (int, int) {
			return logNormal(r, 512, 1.0, minPrompt, maxPrompt), logNormal(r, 256, 0.8, minOutput, maxOutput)
		},
	},
	{
		Name: "fixed512",
		Desc: "every request 512 prompt tokens and 512 new tokens (inference-sim's H29)",
		draw: func(*rand.Rand) (int, int) { return 512, 512 },
	},
}

// workloadNamed returns the workload of that name.
func workloadNamed(name string) (sizes, error) {
	for _, w := range workloads {
		if w.Name == name {
			return w, nil
		}
	}
	return sizes{}, fmt.Errorf("--workload %q: want lognormal or fixed512", name)
}

// logNormal is exp(N(ln median, sigma²)) rounded and clipped to [lo, hi].
func logNormal(r *rand.Rand, median, sigma float64, lo, hi int) int {
	v := math.Round(median * math.Exp(sigma*r.NormFloat64()))
	return int(min(max(v, float64(lo)), float64(hi)))
}

// profile is an arrival rate over time: Rate per second, times Factor
// inside the burst [BurstAt, BurstAt+BurstLen).
type profile struct {
	Rate     float64
	BurstAt  time.Duration
	BurstLen time.Duration
	Factor   float64
}

// rateAt is the rate at t and until when it holds.
func (p profile) rateAt(t, end time.Duration) (rate float64, until time.Duration) {
	if p.BurstLen <= 0 || p.Factor <= 0 {
		return p.Rate, end
	}
	switch {
	case t < p.BurstAt:
		return p.Rate, min(p.BurstAt, end)
	case t < p.BurstAt+p.BurstLen:
		return p.Rate * p.Factor, min(p.BurstAt+p.BurstLen, end)
	}
	return p.Rate, end
}

// arrivals is the shared stream: a Poisson process of the profile's rate
// over [0, duration), each arrival drawn a size from w and a router
// uniformly from routers, all from one PCG seeded with seed, so one seed
// gives the same stream in every mode and every row. A change of rate
// restarts the exponential gap at the boundary, which the Poisson
// process's lack of memory makes exact.
func arrivals(seed uint64, w sizes, p profile, duration time.Duration, routers int) []request {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	var out []request
	t := time.Duration(0)
	for t < duration {
		rate, until := p.rateAt(t, duration)
		if rate <= 0 {
			t = until
			continue
		}
		next := t + time.Duration(r.ExpFloat64()/rate*float64(time.Second))
		if next >= until {
			t = until
			continue
		}
		t = next
		prompt, output := w.draw(r)
		out = append(out, request{At: t, Prompt: prompt, Output: output, Router: r.IntN(routers)})
	}
	return out
}
