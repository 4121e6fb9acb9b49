package metrics

import (
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// FrontMetrics count what the front mode passes to the engine and what
// it answers from the shared /metrics scrape.
type FrontMetrics struct {
	requests *prometheus.CounterVec
	upstream *prometheus.HistogramVec
	scrapes  *prometheus.CounterVec
	refused  *prometheus.CounterVec
	// counted holds each (class, status) counter once looked up: a
	// proxied request costs a map read, not a label hash.
	counted sync.Map // frontKey → prometheus.Counter
	// byClass holds each known route class's series, resolved when the
	// metrics are built and only read after, so a request hashes no
	// labels; a class outside them is looked up by its labels.
	byClass map[string]classSeries
	// cacheHit and engineScrape are the two scrapes series.
	cacheHit, engineScrape prometheus.Counter
}

// classSeries are one route class's series.
type classSeries struct {
	upstream prometheus.Observer
	refused  prometheus.Counter
}

type frontKey struct {
	class  string
	status int
}

// Front registers the front mode's metrics, with every route class of
// classes at 0, and returns them.
func (m *Metrics) Front(classes []string) *FrontMetrics {
	f := &FrontMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "loadreporter_front_proxied_requests_total",
			Help: "Requests the front passed to the engine, by route class and the status answered (502: the engine did not answer; 499: the client went away first).",
		}, []string{"class", "code"}),
		upstream: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "loadreporter_front_upstream_header_seconds",
			Help:    "Time from a proxied request to the engine's response headers (a stream's first byte), by route class.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
		}, []string{"class"}),
		scrapes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "loadreporter_front_metrics_scrapes_total",
			Help: "GET /metrics at the front, by who answered: cache (a scrape of this window, or one under way) or engine (a scrape of its own).",
		}, []string{"answered"}),
	}
	f.refused = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "loadreporter_front_refused_requests_total",
		Help: "Requests the front answered 503 itself, past --front-max-requests in flight, by route class.",
	}, []string{"class"})
	f.byClass = make(map[string]classSeries, len(classes))
	for _, c := range classes {
		f.byClass[c] = classSeries{upstream: f.upstream.WithLabelValues(c), refused: f.refused.WithLabelValues(c)}
	}
	f.cacheHit = f.scrapes.WithLabelValues("cache")
	f.engineScrape = f.scrapes.WithLabelValues("engine")
	m.registry.MustRegister(f.requests, f.upstream, f.scrapes, f.refused)
	return f
}

// Proxied counts one proxied request; d is 0 when the engine gave no
// headers.
func (f *FrontMetrics) Proxied(class string, status int, d time.Duration) {
	k := frontKey{class, status}
	c, ok := f.counted.Load(k)
	if !ok {
		c, _ = f.counted.LoadOrStore(k, f.requests.WithLabelValues(class, strconv.Itoa(status)))
	}
	c.(prometheus.Counter).Inc()
	if d > 0 {
		if s, ok := f.byClass[class]; ok {
			s.upstream.Observe(d.Seconds())
		} else {
			f.upstream.WithLabelValues(class).Observe(d.Seconds())
		}
	}
}

// Refused counts one request the front refused itself.
func (f *FrontMetrics) Refused(class string) {
	if s, ok := f.byClass[class]; ok {
		s.refused.Inc()
		return
	}
	f.refused.WithLabelValues(class).Inc()
}

// Scrape counts one GET /metrics answered from the cache (hit) or by a
// scrape of the engine.
func (f *FrontMetrics) Scrape(hit bool) {
	if hit {
		f.cacheHit.Inc()
		return
	}
	f.engineScrape.Inc()
}

// Forwarded registers the gauges of the front's count of the requests it
// passed on that the engine's snapshots do not show yet: added, how many
// the last pull added to its report; held, how many are held in all.
func (m *Metrics) Forwarded(added, held func() float64) {
	m.registry.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "loadreporter_front_unpublished_requests",
			Help: "Requests the front passed to the engine that the engine's snapshot did not show yet, added as waiting to the last report (--front-count-forwarded).",
		}, added),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "loadreporter_front_forwarded_held_requests",
			Help: "Requests passed to the engine the front holds until a snapshot counts them or they are answered.",
		}, held),
	)
}

// WatchBetween exports, at each scrape, the fire loop's count of reports
// delivered to routers between their deadlines (--front-push-on-forward;
// 0 while it is off).
func (m *Metrics) WatchBetween(delivered func() uint64) {
	m.registry.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "loadreporter_reports_between_deadlines_total",
		Help: "Reports sent to routers' Monitor streams between their deadlines because the front passed a request on (--front-push-on-forward), counted per stream.",
	}, func() float64 { return float64(delivered()) }))
}
