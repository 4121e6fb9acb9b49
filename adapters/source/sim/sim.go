package sim

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/loadreporter/loadreporter/domain"
	"github.com/loadreporter/loadreporter/ports"
)

// Name is the source's name, the --source value that selects it.
const Name = "sim"

// DefaultRanks is the simulated engine's rank count.
const DefaultRanks = 4

// Per-rank capacity of the simulated engine.
const (
	maxTotalTokens = 262144
	maxRunning     = 256
)

// Mode is a failure mode of the simulated engine.
type Mode string

// Modes.
const (
	ModeNormal  Mode = "normal"  // drifting, healthy load
	ModeStall   Mode = "stall"   // snapshots stop advancing: reports turn STALE
	ModeError   Mode = "error"   // every pull fails
	ModeHang    Mode = "hang"    // pulls block until cancelled (past any budget)
	ModeGarbage Mode = "garbage" // values break the snapshot invariants
)

// Modes lists the modes a SetMode call accepts besides "ranks N".
func Modes() []Mode { return []Mode{ModeNormal, ModeStall, ModeError, ModeHang, ModeGarbage} }

// Options configure the simulated engine.
type Options struct {
	// Ranks is the rank count (the --dp-size flag); 0 means DefaultRanks.
	Ranks int
	// Clock stamps the snapshots. Required.
	Clock ports.Clock
	// Seed seeds the drift of the load (the --sim-seed flag).
	Seed uint64
	// Mode is the mode to start in, as SetMode takes it (the --sim-mode
	// flag); empty means ModeNormal.
	Mode string
}

// RegisterFlags declares the source's own flags on fs, into o, with o's
// values as defaults: --sim-mode and --sim-seed. --dp-size is every
// source's and belongs to the caller.
func (o *Options) RegisterFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.Mode, "sim-mode", cmp.Or(o.Mode, string(ModeNormal)), "sim source start mode: normal, stall, error, hang, garbage")
	fs.Uint64Var(&o.Seed, "sim-seed", o.Seed, "sim source random seed")
}

// Source is the simulated engine.
type Source struct {
	clock ports.Clock

	mu      sync.Mutex
	rng     *rand.Rand
	mode    Mode
	ranks   []rankState
	stalled time.Time // snapshot time frozen by ModeStall
	last    time.Time
}

var _ ports.SnapshotSource = (*Source)(nil)

type rankState struct {
	running, waiting float64
	hitRate          float64
}

// New returns a simulated engine in normal mode.
func New(o Options) (*Source, error) {
	if o.Ranks == 0 {
		o.Ranks = DefaultRanks
	}
	if o.Ranks < 0 || o.Ranks > 1024 {
		return nil, domain.Errorf(domain.CodeInvalidArgument, "--dp-size %d: the sim source simulates 1 to 1024 ranks (0: %d)", o.Ranks, DefaultRanks)
	}
	if o.Clock == nil {
		return nil, domain.Errorf(domain.CodeInvalidArgument, "sim needs a clock")
	}
	s := &Source{clock: o.Clock, rng: rand.New(rand.NewPCG(o.Seed, o.Seed^0x9e3779b97f4a7c15)), mode: ModeNormal}
	s.resize(o.Ranks)
	s.last = o.Clock.Now()
	if o.Mode != "" {
		if err := s.SetMode(o.Mode); err != nil {
			return nil, domain.Errorf(domain.CodeInvalidArgument, "--sim-mode: %s", domain.ErrorMessage(err))
		}
	}
	return s, nil
}

func (s *Source) resize(n int) {
	for len(s.ranks) < n {
		s.ranks = append(s.ranks, rankState{
			running: 40 + s.rng.Float64()*120,
			waiting: s.rng.Float64() * 8,
			hitRate: 0.3 + s.rng.Float64()*0.4,
		})
	}
	s.ranks = s.ranks[:n]
}

// Mode returns the current mode and rank count.
func (s *Source) Mode() (Mode, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mode, len(s.ranks)
}

// State is Mode for callers that deal in plain strings.
func (s *Source) State() (mode string, ranks int) {
	m, n := s.Mode()
	return string(m), n
}

// SetMode switches the failure mode: one of Modes(), or "ranks N" to change
// the number of ranks the engine reports.
func (s *Source) SetMode(spec string) error {
	spec = strings.TrimSpace(spec)
	s.mu.Lock()
	defer s.mu.Unlock()
	if n, ok := strings.CutPrefix(spec, "ranks "); ok {
		k, err := strconv.Atoi(strings.TrimSpace(n))
		if err != nil || k < 1 || k > 1024 {
			return domain.Errorf(domain.CodeInvalidArgument, "sim mode %q: ranks wants a count in 1..1024", spec)
		}
		s.resize(k)
		return nil
	}
	for _, m := range Modes() {
		if Mode(spec) == m {
			if m == ModeStall && s.mode != ModeStall {
				s.stalled = s.clock.Now()
			}
			s.mode = m
			return nil
		}
	}
	return domain.Errorf(domain.CodeInvalidArgument, "sim mode %q: want one of %v or \"ranks N\"", spec, Modes())
}

// Pull returns the simulated engine's current snapshot.
func (s *Source) Pull(ctx context.Context) (domain.Snapshot, error) {
	s.mu.Lock()
	mode := s.mode
	s.mu.Unlock()
	switch mode {
	case ModeHang:
		began := s.clock.Now()
		<-ctx.Done()
		return domain.Snapshot{}, domain.PullEnded("simulated engine (sim mode hang)", ctx.Err(), s.clock.Now().Sub(began))
	case ModeError:
		return domain.Snapshot{}, domain.Errorf(domain.CodeSourceFailed, "simulated engine error (sim mode error)")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock.Now()
	stamp := now
	if mode == ModeStall {
		stamp = s.stalled
	} else {
		s.drift(now.Sub(s.last))
		s.last = now
	}
	snap := domain.Snapshot{Ranks: make([]domain.RankLoad, len(s.ranks))}
	for i, st := range s.ranks {
		snap.Ranks[i] = s.rankLoad(int64(i), st, stamp)
	}
	if mode == ModeGarbage {
		g := &snap.Ranks[s.rng.IntN(len(snap.Ranks))]
		g.NumUsedTokens = g.MaxTotalNumTokens + 1 + int64(s.rng.IntN(1000))
	}
	return snap, nil
}

// drift moves each rank's load by a mean-reverting random walk scaled to dt.
func (s *Source) drift(dt time.Duration) {
	steps := math.Min(dt.Seconds()*10, 50) // ten steps a second, bounded
	for i := range s.ranks {
		r := &s.ranks[i]
		for k := 0.0; k < steps; k++ {
			r.running += (120-r.running)*0.02 + s.rng.NormFloat64()*6
			r.waiting += (4-r.waiting)*0.05 + s.rng.NormFloat64()*1.5
			r.hitRate += (0.55-r.hitRate)*0.02 + s.rng.NormFloat64()*0.01
		}
		r.running = clamp(r.running, 0, maxRunning)
		r.waiting = clamp(r.waiting, 0, 500)
		r.hitRate = clamp(r.hitRate, 0, 1)
	}
}

func (s *Source) rankLoad(rank int64, st rankState, at time.Time) domain.RankLoad {
	running := int64(st.running)
	waiting := int64(st.waiting)
	used := min(running*900+waiting*150, maxTotalTokens)
	return domain.RankLoad{
		DPRank:                   rank,
		SnapshotTime:             at,
		NumRunningReqs:           running,
		NumWaitingReqs:           waiting,
		NumWaitingUncachedTokens: waiting * 310,
		NumUsedTokens:            used,
		NumTotalTokens:           used + waiting*310,
		MaxTotalNumTokens:        maxTotalTokens,
		MaxRunningRequests:       maxRunning,
		TokenUsage:               float64(used) / maxTotalTokens,
		GenThroughput:            float64(running) * 38.5,
		CacheHitRate:             st.hitRate,
		Utilization:              float64(running) / maxRunning,
	}
}

func clamp(v, lo, hi float64) float64 { return math.Max(lo, math.Min(hi, v)) }

// String describes the engine for logs.
func (s *Source) String() string {
	m, n := s.Mode()
	return fmt.Sprintf("sim(%d ranks, %s)", n, m)
}
