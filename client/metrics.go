package client

import (
	"errors"
	"fmt"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the client's collectors on one Registerer, shared by every
// Worker registered there.
type metrics struct {
	reconnects *prometheus.CounterVec
	rejected   *prometheus.CounterVec
	views      *viewCollector
}

// newMetrics registers the collectors on reg, or takes the ones a
// previous Worker registered there.
func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		reconnects: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "loadreporter_client_reconnects_total",
			Help: "Monitor streams reopened, by why the previous one ended (a stream error code, an RPC code, ended, idle).",
		}, []string{"worker", "reason"}),
		rejected: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "loadreporter_client_rejected_reports_total",
			Help: "Reports not accepted, by reason (sequence, no_ranks, over_capacity, ...).",
		}, []string{"worker", "reason"}),
		views: newViewCollector(),
	}
	var err error
	if m.reconnects, err = registerOrExisting(reg, m.reconnects); err != nil {
		return nil, err
	}
	if m.rejected, err = registerOrExisting(reg, m.rejected); err != nil {
		return nil, err
	}
	if m.views, err = registerOrExisting(reg, m.views); err != nil {
		return nil, err
	}
	return m, nil
}

// registerOrExisting registers c, or returns the equal collector already
// registered.
func registerOrExisting[C prometheus.Collector](reg prometheus.Registerer, c C) (C, error) {
	err := reg.Register(c)
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		if existing, ok := are.ExistingCollector.(C); ok {
			return existing, nil
		}
		return c, fmt.Errorf("client metrics: another collector is registered under the same name: %w", err)
	}
	if err != nil {
		return c, fmt.Errorf("client metrics: %w", err)
	}
	return c, nil
}

func (m *metrics) add(w *Worker) {
	m.views.mu.Lock()
	defer m.views.mu.Unlock()
	m.views.workers[w] = struct{}{}
	// Reasons appear at 0, so a rate over them works from the start.
	for _, r := range rejectReasons {
		m.rejected.WithLabelValues(w.addr, string(r))
	}
}

// remove forgets w and its series.
func (m *metrics) remove(w *Worker) {
	m.views.mu.Lock()
	delete(m.views.workers, w)
	m.views.mu.Unlock()
	m.reconnects.DeletePartialMatch(prometheus.Labels{"worker": w.addr})
	m.rejected.DeletePartialMatch(prometheus.Labels{"worker": w.addr})
}

func (m *metrics) reconnected(addr, reason string) {
	m.reconnects.WithLabelValues(addr, reason).Inc()
}

func (m *metrics) rejectedReport(addr string, r RejectReason) {
	m.rejected.WithLabelValues(addr, string(r)).Inc()
}

// viewCollector reads every Worker's View at scrape time: the state and
// the age of the latest report are always current, and the hot path
// (a report arriving) touches no metric.
type viewCollector struct {
	mu      sync.Mutex
	workers map[*Worker]struct{}
	state   *prometheus.Desc
	age     *prometheus.Desc
	// pendingReqs and pendingTokens are what a Fleet's router sent a
	// worker that its report does not count yet (Worker.Pending).
	pendingReqs, pendingTokens *prometheus.Desc
}

func newViewCollector() *viewCollector {
	return &viewCollector{
		workers: make(map[*Worker]struct{}),
		state: prometheus.NewDesc("loadreporter_client_worker_state",
			"1 for the worker's view state now (fresh, stale, unreachable, disconnected), 0 for the others.",
			[]string{"worker", "state"}, nil),
		age: prometheus.NewDesc("loadreporter_client_report_age_seconds",
			"Time since the latest accepted report arrived (absent before the first).",
			[]string{"worker"}, nil),
		pendingReqs: prometheus.NewDesc("loadreporter_client_pending_requests",
			"Requests the router sent the worker that its latest report does not count yet (a Fleet with accounting on only).",
			[]string{"worker"}, nil),
		pendingTokens: prometheus.NewDesc("loadreporter_client_pending_tokens",
			"Tokens (prompt plus max new) of the pending requests, as the router gave them.",
			[]string{"worker"}, nil),
	}
}

// Describe sends the descriptors.
func (c *viewCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.state
	ch <- c.age
	ch <- c.pendingReqs
	ch <- c.pendingTokens
}

// Collect reads each worker's view at its clock's now.
func (c *viewCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	ws := make([]*Worker, 0, len(c.workers))
	for w := range c.workers {
		ws = append(ws, w)
	}
	c.mu.Unlock()
	for _, w := range ws {
		v, now := w.View(), w.deps.clock.Now()
		cur := v.StateAt(now)
		for _, s := range states {
			val := 0.0
			if s == cur {
				val = 1
			}
			ch <- prometheus.MustNewConstMetric(c.state, prometheus.GaugeValue, val, w.addr, s.String())
		}
		if v.Report != nil {
			ch <- prometheus.MustNewConstMetric(c.age, prometheus.GaugeValue, now.Sub(v.ReceivedAt).Seconds(), w.addr)
		}
		if w.pending != nil {
			p := w.Pending()
			ch <- prometheus.MustNewConstMetric(c.pendingReqs, prometheus.GaugeValue, float64(p.Requests), w.addr)
			ch <- prometheus.MustNewConstMetric(c.pendingTokens, prometheus.GaugeValue, float64(p.Tokens), w.addr)
		}
	}
}
