package sglangzmq

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/loadreporter/loadreporter/domain"
	"github.com/loadreporter/loadreporter/ports"
)

// Source keeps the latest LoadStat of every rank, as SGLang's load sockets
// push them, and answers Pull from that cache. Make it with New, run it with
// Start, stop it with Close. It is safe for concurrent use.
type Source struct {
	cfg  config
	disc *discoverer // nil with an explicit endpoint

	mu      sync.Mutex
	started bool
	closed  bool
	cancel  context.CancelFunc
	eps     *endpoints   // nil until discovery has answered
	ranks   []*rankState // one per socket, by socket rank
	discErr error        // the latest discovery failure
	detail  detailState

	wg sync.WaitGroup
}

var _ ports.SnapshotSource = (*Source)(nil)

// New validates o and returns a Source that does nothing until Start.
// Problems are reported with code domain.CodeInvalidArgument and name the
// flag the operator has to fix.
func New(o Options) (*Source, error) {
	c, err := newConfig(o)
	if err != nil {
		return nil, err
	}
	if err := registerTransport(); err != nil {
		return nil, domain.Wrap(err, domain.CodeInternal, "registering the sglang-zmq transport")
	}
	s := &Source{cfg: c}
	if c.explicit == nil {
		if s.disc, err = newDiscoverer(c); err != nil {
			return nil, err
		}
	}
	if c.Clock == nil {
		return nil, domain.Errorf(domain.CodeInvalidArgument, "sglang-zmq needs a clock")
	}
	return s, nil
}

// String describes the source for logs; it never shows the API key.
func (s *Source) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.eps != nil:
		return "sglang-zmq " + s.eps.String()
	case s.cfg.explicit != nil:
		return "sglang-zmq " + s.cfg.explicit.String()
	}
	return "sglang-zmq via " + s.disc.URL()
}

// Start subscribes to every rank's socket (after asking the engine where
// they are, when no endpoint was given) and starts the detail pull, each in
// goroutines of the Source's own, which run until Close is called or ctx
// ends. Start returns at once; discovery is retried every DiscoveryRetry
// until the engine answers, and Pull says why meanwhile.
func (s *Source) Start(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.closed:
		return domain.Errorf(domain.CodeFailedPrecondition, "sglang-zmq source is closed")
	case s.started:
		return domain.Errorf(domain.CodeFailedPrecondition, "sglang-zmq source already started")
	}
	s.started = true
	ctx, s.cancel = context.WithCancel(ctx)
	if s.cfg.explicit != nil {
		s.subscribeLocked(ctx, *s.cfg.explicit)
	} else {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.runDiscovery(ctx)
		}()
	}
	if s.cfg.DetailInterval > 0 {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.runDetail(ctx)
		}()
	}
	return nil
}

// Close stops every goroutine of the Source and waits for them. Pull fails
// afterwards. Close may be called more than once, and without Start.
func (s *Source) Close() error {
	s.mu.Lock()
	s.closed = true
	cancel := s.cancel
	s.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	s.wg.Wait()
	if s.disc != nil {
		return s.disc.fetch.Close()
	}
	return nil
}

// subscribeLocked starts one goroutine per rank of eps. s.mu is held.
func (s *Source) subscribeLocked(ctx context.Context, eps endpoints) {
	s.eps = &eps
	s.ranks = make([]*rankState, eps.size)
	for i := range s.ranks {
		ep := eps.endpoint(i)
		r := &rankState{index: i, endpoint: ep, dial: transportName + strings.TrimPrefix(ep, "tcp"), topic: eps.topic}
		s.ranks[i] = r
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.runRank(ctx, r)
		}()
	}
}

// runDiscovery asks /server_info until it tells where the sockets are, then
// subscribes to them.
func (s *Source) runDiscovery(ctx context.Context) {
	for {
		eps, err := s.disc.discover(ctx)
		if ctx.Err() != nil {
			return
		}
		s.mu.Lock()
		if err == nil {
			s.discErr = nil
			s.subscribeLocked(ctx, eps)
			s.mu.Unlock()
			return
		}
		s.discErr = err
		s.mu.Unlock()
		if !s.wait(ctx, s.cfg.Clock.Now().Add(s.cfg.DiscoveryRetry)) {
			return
		}
	}
}

// wait blocks until the Source's clock reaches at (true) or ctx ends.
func (s *Source) wait(ctx context.Context, at time.Time) bool {
	t := s.cfg.Clock.NewTimer(at)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C():
		return true
	}
}

// silentAfterBadMessage is how long after a rank's last message, one that
// did not decode, Pull also says the rank has gone quiet.
const silentAfterBadMessage = time.Second

// Pull returns every rank's latest LoadStat, merged with the detail pull's
// fields, from the Source's cache: it touches neither the engine nor the
// network and returns at once. Each rank's SnapshotTime is the arrival time
// of its latest message, so a silent rank ages into a STALE report.
//
// It fails, with a message naming the rank and its endpoint, while any rank
// has sent nothing yet (domain.CodeSourceFailed), its latest message was
// not three well-formed frames (CodeSourceFailed) or its body did not
// decode (domain.CodeInvalidSnapshot); with CodeSourceFailed before the
// sockets are known (saying why discovery has not succeeded), before
// Start and after Close; with domain.CodePullTimeout when ctx has already
// ended.
func (s *Source) Pull(ctx context.Context) (domain.Snapshot, error) {
	if err := ctx.Err(); err != nil {
		return domain.Snapshot{}, domain.PullEnded(Name, err, 0)
	}
	now := s.cfg.Clock.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.closed:
		return domain.Snapshot{}, domain.Errorf(domain.CodeSourceFailed, "sglang-zmq source is closed")
	case !s.started:
		return domain.Snapshot{}, domain.Errorf(domain.CodeSourceFailed, "sglang-zmq source is not started")
	case s.eps == nil && s.discErr != nil:
		return domain.Snapshot{}, domain.Errorf(domain.CodeSourceFailed, "finding the load sockets: %s", domain.ErrorMessage(s.discErr))
	case s.eps == nil:
		return domain.Snapshot{}, domain.Errorf(domain.CodeSourceFailed, "finding the load sockets: GET %s has not answered yet", s.disc.URL())
	}
	ranks := make([]domain.RankLoad, 0, len(s.ranks))
	for _, r := range s.ranks {
		switch {
		case r.err != nil:
			// A bad message followed by silence is an engine gone quiet
			// as much as one sending garbage: say both.
			if silent := now.Sub(r.heard); !r.heard.IsZero() && silent > silentAfterBadMessage {
				return domain.Snapshot{}, domain.Wrap(r.err, domain.ErrorCode(r.err), "%s; nothing since, for %d ms",
					domain.ErrorMessage(r.err), silent.Milliseconds())
			}
			return domain.Snapshot{}, r.err
		case !r.have:
			msg := fmt.Sprintf("rank %d (%s): no load message received yet", r.index, r.endpoint)
			if r.connErr != "" {
				msg += "; last dial: " + r.connErr
			}
			return domain.Snapshot{}, domain.Errorf(domain.CodeSourceFailed, "%s", msg)
		}
		ranks = append(ranks, s.merge(r, now))
	}
	return domain.Snapshot{Ranks: ranks}, nil
}
