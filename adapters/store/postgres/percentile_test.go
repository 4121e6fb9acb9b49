package postgres

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/loadreporter/loadreporter/domain/audit"
)

// TestBandP95IsPercentileCont checks the percentile found from minute
// bounds, reading only the minutes bandOf names, against
// percentile_cont(0.95) of every value, bit for bit, over histories shaped
// to put ties, one-value minutes and edge values at the band's bounds.
func TestBandP95IsPercentileCont(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(95, 2026))
	shapes := map[string]func(m, i int) float64{
		"wave":     func(m, i int) float64 { return 0.5 + 0.4*math.Sin(float64(m*60+i)/300) },
		"random":   func(int, int) float64 { return rng.Float64() },
		"steps":    func(m, i int) float64 { return float64((m*60+i)/45) / 8 }, // minutes touch at their bounds
		"constant": func(int, int) float64 { return 0.5 },
		"coarse":   func(int, int) float64 { return float64(rng.IntN(4)) / 4 }, // many ties
	}
	for name, shape := range shapes {
		for trial := range 200 {
			var (
				spans  []usageSpan
				values [][]float64
				all    []float64
				edge   []float64
			)
			for m := range rng.IntN(40) {
				var vs []float64
				for i := range 1 + rng.IntN(60) {
					vs = append(vs, shape(m, i))
				}
				slices.Sort(vs)
				spans = append(spans, usageSpan{n: int32(len(vs)), lo: vs[0], hi: vs[len(vs)-1]})
				rng.Shuffle(len(vs), func(i, j int) { vs[i], vs[j] = vs[j], vs[i] }) // read needs no order
				values = append(values, vs)
				all = append(all, vs...)
			}
			for i := range rng.IntN(30) {
				edge = append(edge, shape(-1, i))
			}
			all = append(all, edge...)
			b := bandOf(spans, edge)
			for _, i := range b.read {
				b.addRead(encodeUsage(values[i]))
			}
			got, want := b.p95(), audit.Percentile(slices.Clone(all), .95)
			if math.Float64bits(got) != math.Float64bits(want) && !(math.IsNaN(got) && math.IsNaN(want)) {
				t.Fatalf("%s trial %d: p95 = %v from %d of %d minutes, want %v", name, trial, got, len(b.read), len(spans), want)
			}
			if name == "constant" && len(b.read) != 0 {
				t.Errorf("%s trial %d: read %d minutes of one value", name, trial, len(b.read))
			}
		}
	}
}

// TestBandReadsFewMinutesOfASlowWave is why the band exists: where usage
// changes slowly (the benchmark's waves), the percentile's minutes are a
// few of many.
func TestBandReadsFewMinutesOfASlowWave(t *testing.T) {
	t.Parallel()
	var spans []usageSpan
	for m := range 170 {
		lo, hi := math.Inf(1), math.Inf(-1)
		for i := range 60 {
			v := 0.5 + 0.4*math.Sin(float64(m*60+i)/300)
			lo, hi = min(lo, v), max(hi, v)
		}
		spans = append(spans, usageSpan{n: 60, lo: lo, hi: hi})
	}
	if b := bandOf(spans, nil); len(b.read) > len(spans)/5 {
		t.Errorf("the band reads %d of %d minutes, want at most a fifth", len(b.read), len(spans))
	}
}
