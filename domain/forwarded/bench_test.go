package forwarded

import (
	"testing"
	"time"

	"github.com/loadreporter/loadreporter/domain"
)

// BenchmarkRequest is what the front adds to a proxied request: its
// record, its body counted in 8 reads, its answer, with a pull's count
// of 1 000 requests in flight every 1 000 requests.
func BenchmarkRequest(b *testing.B) {
	var l Ledger
	snap := domain.Snapshot{Ranks: []domain.RankLoad{{SnapshotTime: t0}, {SnapshotTime: t0}}}
	inFlight := make([]*Request, 0, 1000)
	b.ReportAllocs()
	for i := range b.N {
		r := l.Add(t0.Add(time.Duration(i)), jsonBytes, 0)
		for range 8 {
			r.Sent(256)
		}
		inFlight = append(inFlight, r)
		if len(inFlight) == cap(inFlight) {
			l.AddTo(snap)
			for _, r := range inFlight {
				r.Done()
			}
			inFlight = inFlight[:0]
		}
	}
}

// BenchmarkAddTo is one pull's count with 1 000 requests in flight.
func BenchmarkAddTo(b *testing.B) {
	var l Ledger
	for i := range 1000 {
		l.Add(t0.Add(time.Duration(i)*time.Millisecond), jsonBytes, 2048)
	}
	snap := domain.Snapshot{Ranks: []domain.RankLoad{{SnapshotTime: t0}, {SnapshotTime: t0}, {SnapshotTime: t0}, {SnapshotTime: t0}}}
	b.ReportAllocs()
	for range b.N {
		l.AddTo(snap)
	}
}
