package memory_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/loadreporter/loadreporter/adapters/store/memory"
	"github.com/loadreporter/loadreporter/domain"
	"github.com/loadreporter/loadreporter/domain/audit"
	"github.com/loadreporter/loadreporter/ports/porttest"
)

func TestHistoryContract(t *testing.T) {
	t.Parallel()
	porttest.HistoryStore(t, func(t *testing.T) porttest.Store { return newStore(t, memory.Options{}) })
}

func rep(seq int, at time.Time) *domain.Report {
	return &domain.Report{
		SourceInstanceID: "src", SequenceID: uint64(seq), ReportTime: at,
		Worker: domain.Worker{Addr: "w"}, Status: domain.StatusHealthy,
		Ranks: []domain.RankLoad{{DPRank: 0, TokenUsage: 0.5}},
	}
}

func TestEvictsOldestFirst(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := newStore(t, memory.Options{Capacity: 5})
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var batch []*domain.Report
	for i := range 8 {
		batch = append(batch, rep(i+1, t0.Add(time.Duration(i)*time.Second)))
	}
	// Newest first, to show eviction follows report time, not arrival.
	for i := len(batch) - 1; i >= 0; i-- {
		if err := s.Append(ctx, batch[i:i+1]); err != nil {
			t.Fatal(err)
		}
	}
	if s.Len() != 5 || s.Evicted() != 3 {
		t.Fatalf("Len, Evicted = %d, %d; want 5, 3", s.Len(), s.Evicted())
	}
	page, err := s.Reports(ctx, audit.ReportsQuery{Window: audit.Window{Since: t0, Until: t0.Add(time.Hour)}})
	if err != nil {
		t.Fatal(err)
	}
	var got []uint64
	for _, r := range page.Reports {
		got = append(got, r.SequenceID)
	}
	if fmt.Sprint(got) != "[4 5 6 7 8]" {
		t.Errorf("kept %v, want [4 5 6 7 8]", got)
	}
	// An evicted report may come back (its identity is forgotten); a kept
	// one is still a duplicate.
	if err := s.Append(ctx, []*domain.Report{batch[7]}); err != nil || s.Len() != 5 {
		t.Errorf("re-append of a kept report: len %d, %v", s.Len(), err)
	}
}

func TestDefaultCapacity(t *testing.T) {
	t.Parallel()
	s := newStore(t, memory.Options{})
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	batch := make([]*domain.Report, 0, 1000)
	for i := range memory.DefaultCapacity + 1000 {
		batch = append(batch, rep(i+1, t0.Add(time.Duration(i)*time.Millisecond)))
		if len(batch) == cap(batch) {
			if err := s.Append(t.Context(), batch); err != nil {
				t.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	if s.Len() != memory.DefaultCapacity || s.Evicted() != 1000 {
		t.Errorf("Len, Evicted = %d, %d; want %d, 1000", s.Len(), s.Evicted(), memory.DefaultCapacity)
	}
}

// Readers and writers at once, for the race detector.
func TestConcurrentReadersAndWriters(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	s := newStore(t, memory.Options{Capacity: 500})
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	w := audit.Window{Since: t0, Until: t0.Add(time.Hour)}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 300 {
				seq := g*1000 + i + 1
				if err := s.Append(ctx, []*domain.Report{rep(seq, t0.Add(time.Duration(seq)*time.Millisecond))}); err != nil {
					t.Error(err)
					return
				}
			}
		})
		wg.Go(func() {
			for range 50 {
				if _, err := s.Reports(ctx, audit.ReportsQuery{Window: w}); err != nil {
					t.Error(err)
				}
				if _, err := s.Outages(ctx, audit.OutagesQuery{Window: w}); err != nil {
					t.Error(err)
				}
				if _, err := s.RankStats(ctx, audit.RankStatsQuery{Window: w}); err != nil {
					t.Error(err)
				}
				if _, err := s.DeleteBefore(ctx, t0.Add(100*time.Millisecond), 10); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	if s.Len() > 500 {
		t.Errorf("Len %d beyond capacity 500", s.Len())
	}
}

func TestChartCountsTheWindowUpToItsBudget(t *testing.T) {
	t.Parallel()
	s := newStore(t, memory.Options{})
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var batch []*domain.Report
	for i := range 300 { // one report every 2 s for 10 min
		batch = append(batch, rep(i+1, t0.Add(time.Duration(i)*2*time.Second)))
	}
	if err := s.Append(t.Context(), batch); err != nil {
		t.Fatal(err)
	}
	// Buckets of a minute: their bounds are whole minutes.
	q := audit.ChartQuery{Window: audit.Window{Since: t0.Add(time.Second), Until: t0.Add(10*time.Minute + time.Second)}, Buckets: 10}
	res, err := s.Chart(t.Context(), q)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Through.IsZero() || len(res.Buckets) != 10 {
		t.Fatalf("through %s, %d buckets", res.Through, len(res.Buckets))
	}
	for i, b := range res.Buckets {
		want := int64(30)
		if i == 0 {
			want = 29 // t0 lies before Since
		}
		if b.Reports != want || len(b.Ranks) != 1 || b.Ranks[0].Reports != want || b.Ranks[0].UsageSum != 0.5*float64(want) {
			t.Errorf("bucket %d = %+v, want %d reports of rank 0 at 0.5", i, b, want)
		}
	}
	// A budget of two worker-minutes counts the first two.
	q.Budget = 2
	if res, err = s.Chart(t.Context(), q); err != nil || !res.Through.Equal(t0.Add(2*time.Minute)) ||
		res.Buckets[0].Reports != 29 || res.Buckets[1].Reports != 30 || res.Buckets[2].Reports != 0 {
		t.Errorf("budget 2: through %s, buckets %+v, %v; want the first two minutes", res.Through, res.Buckets, err)
	}
	// Buckets under a minute: a budget of 70 reports holds the first
	// minute (30, with t0's outside the window) and the second (30).
	q = audit.ChartQuery{Window: audit.Window{Since: t0.Add(time.Second), Until: t0.Add(4 * time.Minute)}, Buckets: 10, Budget: 70}
	if res, err = s.Chart(t.Context(), q); err != nil || !res.Through.Equal(t0.Add(2*time.Minute)) {
		t.Fatalf("budget 70: through %s, %v; want %s", res.Through, err, t0.Add(2*time.Minute))
	}
	var counted int64
	for _, b := range res.Buckets {
		counted += b.Reports
	}
	if counted != 59 {
		t.Errorf("budget 70: counted %d reports, want the 59 in the window before %s", counted, res.Through)
	}
	if _, err := s.Chart(t.Context(), audit.ChartQuery{Window: q.Window}); domain.ErrorCode(err) != domain.CodeInvalidArgument {
		t.Errorf("no buckets: %v, want INVALID_ARGUMENT", err)
	}
}

// newStore is memory.New for options the test knows to be good.
func newStore(t testing.TB, o memory.Options) *memory.Store {
	t.Helper()
	s, err := memory.New(o)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestNewRefusesANegativeCapacity: a negative capacity is refused,
// naming the option; 0 takes the default.
func TestNewRefusesANegativeCapacity(t *testing.T) {
	t.Parallel()
	if _, err := memory.New(memory.Options{Capacity: -1}); domain.FieldOf(err) != "capacity" {
		t.Errorf("capacity -1: %v, want INVALID_ARGUMENT naming capacity", err)
	}
	if _, err := memory.New(memory.Options{}); err != nil {
		t.Errorf("capacity 0: %v", err)
	}
}
