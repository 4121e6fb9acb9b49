package postgres

import "math"

// The 95th percentile of a rank's token_usage is exact without reading
// every value: each minute's rollup says how many values it has and their
// smallest and largest, which bound where the percentile's two values can
// lie. Only the minutes that straddle those bounds and hold more than one
// distinct value are read (history_rank_minute_usage); the others count
// as below, above, or as their one value.

// usageSpan is what history_minute_ranks says of one minute's token_usage
// values: how many, the smallest and the largest. minute counts minutes
// since 1970 (no pointer: a long window holds a span per rank and minute).
type usageSpan struct {
	minute int32
	n      int32
	lo, hi float64
}

// weighted is n values equal to v.
type weighted struct {
	v float64
	n int64
}

// usageBand is what a group's percentile needs: the values in the band
// (lower, upper) where its two values lie, and how many lie below.
type usageBand struct {
	n            int64      // values in all
	lower, upper float64    // the band
	below        int64      // values below lower
	in           []weighted // values in the band: edge values, one-value minutes, values read
	read         []int      // indexes into the spans whose values must be read (addRead)
}

// percentilePositions are the ascending positions of the two values
// percentile_cont(0.95) interpolates between, and the fraction between
// them (as audit.Percentile computes them).
func percentilePositions(n int64) (lo, hi int64, frac float64) {
	pos := 0.95 * float64(n-1)
	lo = int64(math.Floor(pos))
	return lo, min(lo+1, n-1), pos - float64(lo)
}

// bandOf decides, from the spans and the values known one by one (edge),
// which spans hold values the percentile needs. The value at ascending
// position p is at least the smallest lo by which spans (counted whole at
// their lo) reach p+1 values, and at most the smallest hi by which they
// reach p+1 counted at their hi; a span wholly below that band only counts,
// one wholly above it is left out.
func bandOf(spans []usageSpan, edge []float64) usageBand {
	items := make([]usageSpan, 0, len(spans)+len(edge))
	items = append(items, spans...)
	for _, v := range edge {
		items = append(items, usageSpan{n: 1, lo: v, hi: v})
	}
	var b usageBand
	for _, it := range items {
		b.n += int64(it.n)
	}
	if b.n == 0 {
		return b
	}
	pLo, pHi, _ := percentilePositions(b.n)
	keys := make([]weighted, len(items))
	for i, it := range items {
		keys[i] = weighted{it.lo, int64(it.n)}
	}
	b.lower = selectWeighted(keys, pLo)
	for i, it := range items {
		keys[i] = weighted{it.hi, int64(it.n)}
	}
	b.upper = selectWeighted(keys, pHi)
	for i, it := range items {
		switch {
		case it.hi < b.lower:
			b.below += int64(it.n)
		case it.lo > b.upper:
		case it.lo == it.hi:
			b.in = append(b.in, weighted{it.lo, int64(it.n)})
		default:
			b.read = append(b.read, i) // never an edge value: those have lo == hi
		}
	}
	return b
}

// addRead adds the values of a minute bandOf named in read (packed as
// history_rank_minute_usage.usage), keeping only those in the band.
func (b *usageBand) addRead(usage []byte) {
	for i := range len(usage) / 8 {
		switch v := usageAt(usage, i); {
		case v < b.lower:
			b.below++
		case v <= b.upper:
			b.in = append(b.in, weighted{v, 1})
		}
	}
}

// selectWeighted is the value at ascending position p of the values ws
// stand for (p < their count), found by quickselect; it reorders ws.
func selectWeighted(ws []weighted, p int64) float64 {
	for {
		if len(ws) == 0 { // p out of range: not reached, but never a panic
			return math.NaN()
		}
		pivot := ws[len(ws)/2].v
		// ws becomes [< pivot | == pivot | > pivot].
		lt, gt := 0, len(ws)
		var nLt, nEq int64
		for i := 0; i < gt; {
			switch v := ws[i].v; {
			case v < pivot:
				nLt += ws[i].n
				ws[lt], ws[i] = ws[i], ws[lt]
				lt++
				i++
			case v > pivot:
				gt--
				ws[gt], ws[i] = ws[i], ws[gt]
			default:
				nEq += ws[i].n
				i++
			}
		}
		switch {
		case p < nLt:
			ws = ws[:lt]
		case p < nLt+nEq:
			return pivot
		default:
			p -= nLt + nEq
			ws = ws[gt:]
		}
	}
}

// p95 is percentile_cont(0.95) of the group's values, once the values of
// every minute in read were added. It reorders b.in.
func (b usageBand) p95() float64 {
	if b.n == 0 {
		return math.NaN()
	}
	at := func(p int64) float64 { return selectWeighted(b.in, p-b.below) }
	pLo, pHi, frac := percentilePositions(b.n)
	vLo := at(pLo)
	if pLo == pHi {
		return vLo
	}
	return vLo + frac*(at(pHi)-vLo)
}
