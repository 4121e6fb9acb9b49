package memory

import (
	"context"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/loadreporter/loadreporter/domain"
	"github.com/loadreporter/loadreporter/domain/audit"
	"github.com/loadreporter/loadreporter/ports"
)

// DefaultCapacity is the number of reports a Store keeps by default (a bit
// over a day at one report a second).
const DefaultCapacity = 100_000

// Options configure a Store.
type Options struct {
	// Capacity is the most reports kept (default DefaultCapacity); beyond
	// it the oldest are evicted.
	Capacity int
}

// Store is a bounded in-memory history, safe for concurrent use.
type Store struct {
	capacity int

	mu      sync.RWMutex
	reports []*domain.Report // sorted by audit.KeyOf, never modified once stored
	seen    map[identity]struct{}
	evicted int64
}

type identity struct {
	source string
	seq    uint64
}

var (
	_ ports.HistoryStore = (*Store)(nil)
	_ ports.HistoryQuery = (*Store)(nil)
	_ ports.HistoryChart = (*Store)(nil)
)

// New returns an empty Store. A Capacity of 0 takes the default; a
// negative one is INVALID_ARGUMENT naming the option (capacity).
func New(o Options) (*Store, error) {
	switch {
	case o.Capacity < 0:
		return nil, domain.InvalidOption("capacity", "%d: must be > 0 (0: %d)", o.Capacity, DefaultCapacity)
	case o.Capacity == 0:
		o.Capacity = DefaultCapacity
	}
	return &Store{capacity: o.Capacity, seen: map[identity]struct{}{}}, nil
}

// Len returns the number of reports held.
func (s *Store) Len() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.reports)
}

// Evicted returns how many reports were evicted to stay within Capacity.
func (s *Store) Evicted() int64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.evicted
}

// Append stores copies of reports, skipping those already held, and evicts
// the oldest reports beyond Capacity. See ports.HistoryStore.
func (s *Store) Append(ctx context.Context, reports []*domain.Report) error {
	if err := audit.ValidateReports(reports); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range reports {
		id := identity{r.SourceInstanceID, r.SequenceID}
		if _, dup := s.seen[id]; dup {
			continue
		}
		s.seen[id] = struct{}{}
		s.insert(audit.Stored(r))
	}
	if over := len(s.reports) - s.capacity; over > 0 {
		s.dropFront(over)
		s.evicted += int64(over)
	}
	return nil
}

// insert puts r in key order; reports mostly arrive in order, so this is
// usually an append.
func (s *Store) insert(r *domain.Report) {
	k := audit.KeyOf(r)
	n := len(s.reports)
	if n == 0 || audit.KeyOf(s.reports[n-1]).Compare(k) < 0 {
		s.reports = append(s.reports, r)
		return
	}
	i := sort.Search(n, func(i int) bool { return audit.KeyOf(s.reports[i]).Compare(k) > 0 })
	s.reports = slices.Insert(s.reports, i, r)
}

func (s *Store) dropFront(n int) {
	for _, r := range s.reports[:n] {
		delete(s.seen, identity{r.SourceInstanceID, r.SequenceID})
	}
	clear(s.reports[:n])
	s.reports = s.reports[n:]
}

// DeleteBefore removes at most limit of the oldest reports recorded before
// t. See ports.HistoryStore.
func (s *Store) DeleteBefore(ctx context.Context, t time.Time, limit int) (int64, error) {
	if limit <= 0 {
		return 0, domain.Errorf(domain.CodeInvalidArgument, "limit must be > 0, got %d", limit)
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	n := sort.Search(len(s.reports), func(i int) bool { return !s.reports[i].ReportTime.Before(t) })
	n = min(n, limit)
	s.dropFront(n)
	return int64(n), nil
}

// window returns the stored reports in w, in key order. s.mu must be held.
func (s *Store) window(w audit.Window) []*domain.Report {
	lo := sort.Search(len(s.reports), func(i int) bool { return !s.reports[i].ReportTime.Before(w.Since) })
	hi := sort.Search(len(s.reports), func(i int) bool { return !s.reports[i].ReportTime.Before(w.Until) })
	if hi < lo {
		hi = lo
	}
	return s.reports[lo:hi]
}
