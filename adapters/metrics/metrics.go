package metrics

import (
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/loadreporter/loadreporter/domain"
	"github.com/loadreporter/loadreporter/domain/session"
	"github.com/loadreporter/loadreporter/ports"
)

// Metrics holds the fire loop's metrics in its own registry.
type Metrics struct {
	registry    *prometheus.Registry
	now         func() time.Time
	lastReport  atomic.Int64 // unix nanos of the latest report
	sessions    *prometheus.GaugeVec
	pulls       *prometheus.CounterVec
	pullSeconds prometheus.Histogram
	lateSeconds prometheus.Histogram
	reports     *prometheus.CounterVec
	delivered   *prometheus.CounterVec
	dropped     *prometheus.CounterVec
	rankAge     prometheus.Gauge
	status      *prometheus.GaugeVec
	ranks       rankGauges
	// sourceEvents counts what a pushing source sees besides load.
	sourceEvents *prometheus.CounterVec

	historyOnce sync.Once
	history     *historyMetrics

	retentionOnce sync.Once
	retention     func(removed int64, err error)
}

var _ ports.FireObserver = (*Metrics)(nil)

// New registers the metrics, plus Go and process collectors, in a fresh
// registry. now is the clock for the report-age gauge.
func New(now func() time.Time) *Metrics {
	m := &Metrics{
		registry: prometheus.NewRegistry(),
		now:      now,
		sessions: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "loadreporter_sessions", Help: "Live sessions by kind " + helpList(session.Kinds(), session.Kind.String) + ".",
		}, []string{"kind"}),
		pulls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "loadreporter_pulls_total", Help: "Fires by pull outcome " + helpList(ports.PullOutcomes(), outcomeName) + ".",
		}, []string{"outcome"}),
		pullSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "loadreporter_pull_duration_seconds", Help: "Duration of one fire's pull, retry included.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5},
		}),
		lateSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "loadreporter_fire_lateness_seconds",
			Help:    "How long after the earliest due deadline each fire's pull started: timer slack, a busy fire loop, a starved process.",
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, 1},
		}),
		reports: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "loadreporter_reports_total", Help: "Reports built, by status.",
		}, []string{"status"}),
		delivered: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "loadreporter_reports_delivered_total", Help: "Reports handed to sessions, by session kind.",
		}, []string{"kind"}),
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "loadreporter_reports_dropped_total", Help: "Unread reports replaced by a newer one (latest wins), by session kind.",
		}, []string{"kind"}),
		rankAge: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "loadreporter_snapshot_age_seconds", Help: "Age of the oldest rank in the latest non-UNREACHABLE report, at report time.",
		}),
	}
	reportAge := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "loadreporter_report_age_seconds", Help: "Time since the latest report was built (0 before the first).",
	}, func() float64 {
		last := m.lastReport.Load()
		if last == 0 {
			return 0
		}
		return m.now().Sub(time.Unix(0, last)).Seconds()
	})
	m.status = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "loadreporter_report_status", Help: "1 for the status of the latest report, 0 for the others.",
	}, []string{"status"})
	m.ranks = newRankGauges()
	m.sourceEvents = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "loadreporter_source_events_total",
		Help: "Events a pushing source saw besides load (sequence_reset, sequence_gap, bad_message, resubscribed, detail_pull_failed), by rank.",
	}, []string{"event", "dp_rank"})
	m.registry.MustRegister(m.sessions, m.pulls, m.pullSeconds, m.lateSeconds, m.reports, m.delivered, m.dropped, m.rankAge, reportAge,
		m.status, m.sourceEvents, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.ranks.register(m.registry)
	m.initLabels()
	return m
}

// initLabels creates every labelled series at 0, so that an alert on, say,
// a rise of pulls{outcome="timeout"} sees 0 before the first timeout
// instead of an absent series.
func (m *Metrics) initLabels() {
	for _, o := range ports.PullOutcomes() {
		m.pulls.WithLabelValues(string(o))
	}
	for _, st := range reportStatuses {
		m.reports.WithLabelValues(st.String())
		m.status.WithLabelValues(st.String())
	}
	for _, k := range session.Kinds() {
		m.sessions.WithLabelValues(k.String())
		m.delivered.WithLabelValues(k.String())
		m.dropped.WithLabelValues(k.String())
	}
}

var reportStatuses = []domain.Status{domain.StatusHealthy, domain.StatusStale, domain.StatusUnreachable}

// helpList is "(a, b, c)" for a HELP text, built from the list the labels
// are made from: written by hand, it drifted.
func helpList[T any](values []T, name func(T) string) string {
	names := make([]string, len(values))
	for i, v := range values {
		names[i] = name(v)
	}
	return "(" + strings.Join(names, ", ") + ")"
}

func outcomeName(o ports.PullOutcome) string { return string(o) }

// Handler serves the registry in the Prometheus exposition format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{Registry: m.registry})
}

// Fired records one fire.
func (m *Metrics) Fired(f ports.FireResult) {
	m.pulls.WithLabelValues(string(f.Outcome)).Inc()
	m.pullSeconds.Observe(f.PullDuration.Seconds())
	m.lateSeconds.Observe(f.Lateness.Seconds())
	m.reports.WithLabelValues(f.Report.Status.String()).Inc()
	for _, st := range reportStatuses {
		m.status.WithLabelValues(st.String()).Set(b2f(st == f.Report.Status))
	}
	m.ranks.set(f.Report.Ranks)
	m.lastReport.Store(f.Report.ReportTime.UnixNano())
	for kind, n := range f.Delivered {
		if n > 0 {
			m.delivered.WithLabelValues(kind).Add(float64(n))
		}
	}
	for kind, n := range f.Dropped {
		if n > 0 {
			m.dropped.WithLabelValues(kind).Add(float64(n))
		}
	}
	if len(f.Report.Ranks) > 0 {
		m.rankAge.Set(f.Report.OldestSnapshotAge().Seconds())
	}
}

// SessionsChanged records the live session counts.
func (m *Metrics) SessionsChanged(counts map[string]int) {
	for kind, n := range counts {
		m.sessions.WithLabelValues(kind).Set(float64(n))
	}
}

// History returns the history recorder's observer, registering its metrics
// on first use.
func (m *Metrics) History() ports.RecorderObserver {
	m.historyOnce.Do(func() {
		h := &historyMetrics{
			written: prometheus.NewCounter(prometheus.CounterOpts{
				Name: "loadreporter_history_written_total", Help: "Reports written to the history store.",
			}),
			batches: prometheus.NewCounter(prometheus.CounterOpts{
				Name: "loadreporter_history_batches_total", Help: "Batches written to the history store.",
			}),
			failures: prometheus.NewCounter(prometheus.CounterOpts{
				Name: "loadreporter_history_write_failures_total", Help: "Failed attempts to write a batch (retried with backoff).",
			}),
			splits: prometheus.NewCounter(prometheus.CounterOpts{
				Name: "loadreporter_history_batches_split_total",
				Help: "History writes that timed out and were tried again with half the bytes (the store is slower than the write timeout allows).",
			}),
			took: prometheus.NewHistogram(prometheus.HistogramOpts{
				Name: "loadreporter_history_write_duration_seconds", Help: "Time the history store took to write a batch it accepted.",
				Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
			}),
			dropped: prometheus.NewCounterVec(prometheus.CounterOpts{
				Name: "loadreporter_history_dropped_total", Help: "Reports the history lost, by reason.",
			}, []string{"reason"}),
		}
		for _, r := range ports.DropReasons() {
			h.dropped.WithLabelValues(string(r))
		}
		m.registry.MustRegister(h.written, h.batches, h.failures, h.splits, h.took, h.dropped)
		m.history = h
	})
	return m.history
}

// Retention returns what the history retention reports each pass to,
// registering its metrics on first use: a retention that keeps failing
// (a long reader holding a lock, a role that may not drop tables) lets the
// history grow without bound, and must be seen.
func (m *Metrics) Retention() func(removed int64, err error) {
	m.retentionOnce.Do(func() {
		removed := prometheus.NewCounter(prometheus.CounterOpts{
			Name: "loadreporter_history_retention_removed_total", Help: "Reports the history retention removed (--history-retention).",
		})
		failures := prometheus.NewCounter(prometheus.CounterOpts{
			Name: "loadreporter_history_retention_failures_total", Help: "History retention passes that failed (retried at the next pass).",
		})
		m.registry.MustRegister(removed, failures)
		m.retention = func(n int64, err error) {
			removed.Add(float64(n))
			if err != nil {
				failures.Inc()
			}
		}
	})
	return m.retention
}

type historyMetrics struct {
	written, batches, failures, splits prometheus.Counter
	took                               prometheus.Histogram
	dropped                            *prometheus.CounterVec
}

// Written counts a batch and how long it took; how far behind the history
// is comes from WatchRecorder, which also sees it while nothing is
// written.
func (h *historyMetrics) Written(n int, _, took time.Duration) {
	h.written.Add(float64(n))
	h.batches.Inc()
	h.took.Observe(took.Seconds())
}

func (h *historyMetrics) WriteFailed(error, time.Duration) { h.failures.Inc() }

func (h *historyMetrics) Split(int) { h.splits.Inc() }

func (h *historyMetrics) Dropped(n int, reason ports.DropReason) {
	h.dropped.WithLabelValues(string(reason)).Add(float64(n))
}

// SourceEvent counts an event a snapshot source saw besides load (a ZMQ
// sequence reset or gap, an undecodable message, a resubscription, a failed
// detail pull); rank is the rank it concerns, or -1 for the whole source.
func (m *Metrics) SourceEvent(event string, rank int) {
	label := ""
	if rank >= 0 {
		label = strconv.Itoa(rank)
	}
	m.sourceEvents.WithLabelValues(event, label).Inc()
}

// SetBuildInfo exports the build as loadreporter_build_info{version,
// revision, goversion} 1, so a fleet's dashboards see which build every
// worker runs.
func (m *Metrics) SetBuildInfo(version, revision, goVersion string) {
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "loadreporter_build_info", Help: "The build this process runs; always 1.",
		ConstLabels: prometheus.Labels{"version": version, "revision": revision, "goversion": goVersion},
	})
	g.Set(1)
	_ = m.registry.Register(g) // a second call keeps the first build's labels
}

// WatchMonitor exports the Monitor streams that have not registered yet,
// how many streams were ended for sending no register in time or for
// flooding, and the StreamError frames sent by code, read from the Monitor
// service when scraped.
func (m *Metrics) WatchMonitor(pending func() int64, firstFrameTimeouts, overBudget func() uint64, streamErrors func() map[string]uint64) {
	m.registry.MustRegister(
		codeCollector{
			desc: prometheus.NewDesc("loadreporter_monitor_stream_errors_total",
				"Monitor streams the reporter ended, by the code of their StreamError frame, sent or, to a router that stopped reading, not deliverable (LEASE_EXPIRED, REPLACED, RESOURCE_EXHAUSTED at --max-sessions or over the frame budget, INVALID_ARGUMENT, INVALID_FIRST_FRAME, SHUTTING_DOWN).",
				[]string{"code"}, nil),
			counts: streamErrors,
		},
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "loadreporter_monitor_pending_streams", Help: "Monitor streams open but not registered yet.",
		}, func() float64 { return float64(pending()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "loadreporter_monitor_first_frame_timeouts_total", Help: "Monitor streams ended for sending no register within --first-frame-timeout.",
		}, func() float64 { return float64(firstFrameTimeouts()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "loadreporter_monitor_over_budget_total", Help: "Monitor streams ended for sending more frames than --max-frames-per-second / --frame-burst allow.",
		}, func() float64 { return float64(overBudget()) }),
	)
}

// Backlog is what the history recorder holds unwritten.
type Backlog struct {
	// Reports waiting and being written, and their estimated memory.
	Reports, Bytes int
	// Lag is the age of the oldest of them; 0 when there are none.
	Lag time.Duration
	// LimitBytes is the recorder's bound on Bytes.
	LimitBytes int
}

// WatchRecorder exports, at each scrape, what the history recorder holds
// unwritten, its memory against its bound, and the age of its oldest
// report: they grow while the database is down, when no batch is written
// to say so.
func (m *Metrics) WatchRecorder(backlog func() Backlog) {
	m.registry.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "loadreporter_history_lag_seconds",
			Help: "Age of the oldest report recorded but not yet written to the history (0 when it is caught up).",
		}, func() float64 { return backlog().Lag.Seconds() }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "loadreporter_history_buffered_reports",
			Help: "Reports the history recorder holds unwritten: waiting and being written.",
		}, func() float64 { return float64(backlog().Reports) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "loadreporter_history_buffered_bytes",
			Help: "Estimated memory of the reports the history recorder holds unwritten (their Go heap size).",
		}, func() float64 { return float64(backlog().Bytes) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "loadreporter_history_buffer_limit_bytes",
			Help: "Bound on loadreporter_history_buffered_bytes: past it the oldest waiting reports are dropped.",
		}, func() float64 { return float64(backlog().LimitBytes) }),
	)
}

// WatchStalls exports how many streams ended because their client stopped
// reading (--stalled-write-timeout).
func (m *Metrics) WatchStalls(ended func() uint64) {
	m.registry.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "loadreporter_stalled_streams_ended_total",
		Help: "Watch, ORCA and Monitor streams ended because a write stayed blocked for --stalled-write-timeout (the client stopped reading, or only the way back is lost).",
	}, func() float64 { return float64(ended()) }))
}

// WatchPortConnections exports how many connections of the port went to
// each server: grpc-go's for native gRPC, net/http's for the rest.
func (m *Metrics) WatchPortConnections(counts func() (grpc, other uint64)) {
	desc := prometheus.NewDesc("loadreporter_port_connections_total",
		"Connections the port accepted, by the server that took them: grpc-go for those whose first request is native gRPC over h2c, net/http for the rest.",
		[]string{"server"}, nil)
	m.registry.MustRegister(funcCollector{desc: desc, collect: func(ch chan<- prometheus.Metric) {
		g, o := counts()
		ch <- prometheus.MustNewConstMetric(desc, prometheus.CounterValue, float64(g), "grpc-go")
		ch <- prometheus.MustNewConstMetric(desc, prometheus.CounterValue, float64(o), "net/http")
	}})
}

// funcCollector is a collector of one family that collect reads.
type funcCollector struct {
	desc    *prometheus.Desc
	collect func(chan<- prometheus.Metric)
}

func (c funcCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }
func (c funcCollector) Collect(ch chan<- prometheus.Metric) { c.collect(ch) }

// WatchPhaseSlots exports, at each scrape, how many recurring sessions
// each phase slot of the aligned grid holds (--phase-slots): an uneven
// spread means uneven bursts.
func (m *Metrics) WatchPhaseSlots(loads func() []int) {
	m.registry.MustRegister(slotCollector{
		desc: prometheus.NewDesc("loadreporter_phase_slot_sessions",
			"Recurring sessions (routers, browsers, ORCA, history) per phase slot of the aligned grid.", []string{"slot"}, nil),
		loads: loads,
	})
}

// codeCollector exports a counter per code.
type codeCollector struct {
	desc   *prometheus.Desc
	counts func() map[string]uint64
}

func (c codeCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c codeCollector) Collect(ch chan<- prometheus.Metric) {
	for code, n := range c.counts() {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.CounterValue, float64(n), code)
	}
}

type slotCollector struct {
	desc  *prometheus.Desc
	loads func() []int
}

func (c slotCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c slotCollector) Collect(ch chan<- prometheus.Metric) {
	for i, n := range c.loads() {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(n), strconv.Itoa(i))
	}
}
