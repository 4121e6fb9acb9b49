package vllm

import (
	"bytes"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/loadreporter/loadreporter/domain"
)

// Metric names vLLM publishes. Where vLLM renamed a metric, the current name
// comes first and the older one is the fallback.
const (
	metricRunning     = "vllm:num_requests_running"
	metricWaiting     = "vllm:num_requests_waiting"
	metricGenTokens   = "vllm:generation_tokens_total"
	metricCacheConfig = "vllm:cache_config_info"
	engineLabel       = "engine"
)

var (
	metricUsage   = []string{"vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"}
	metricHits    = []string{"vllm:prefix_cache_hits_total", "vllm:gpu_prefix_cache_hits_total"}
	metricQueries = []string{"vllm:prefix_cache_queries_total", "vllm:gpu_prefix_cache_queries_total"}
)

// engine is what one scrape says about one vLLM engine (one DP rank).
type engine struct {
	rank             int64
	running, waiting int64
	usage            float64
	maxTokens        int64 // 0: vLLM did not say
	counters         counters
}

// counters are the cumulative values the rates are derived from.
type counters struct {
	when          time.Time // zero: no scrape
	gen           float64
	hasGen        bool
	hits, queries float64
	hasCache      bool
}

func (c counters) stamped(t time.Time) counters {
	c.when = t
	return c
}

// rankLoad maps an engine to the domain's rank, deriving what vLLM leaves
// out (see the package doc's table).
func (e engine) rankLoad(maxRunning int64, prev, cur counters) domain.RankLoad {
	r := domain.RankLoad{
		DPRank:             e.rank,
		NumRunningReqs:     e.running,
		NumWaitingReqs:     e.waiting,
		MaxRunningRequests: maxRunning,
		MaxTotalNumTokens:  e.maxTokens,
		TokenUsage:         e.usage,
		GenThroughput:      genThroughput(prev, cur),
		CacheHitRate:       cacheHitRate(prev, cur),
	}
	if e.maxTokens > 0 && e.usage >= 0 && !math.IsInf(e.usage, 0) {
		// NaN fails the >= above and stays for the validator to name.
		used := math.Round(e.usage * float64(e.maxTokens))
		if used >= math.MaxInt64 {
			// Only a usage far above 1 gets here; the validator reports
			// it as used > max.
			r.NumUsedTokens = math.MaxInt64
		} else {
			r.NumUsedTokens = int64(used)
		}
	}
	return r
}

// maxRateSpan bounds the span between two scrapes that a rate is derived
// over. Nothing pulls while no one listens (docs/routers.md): the first pull after
// an idle hour would otherwise report that hour's average as the engine's
// rate now. Twice the longest report interval a router may ask for.
const maxRateSpan = 2 * time.Minute

// recent says prev is a baseline a rate may be derived from.
func recent(prev, cur counters) bool {
	return !prev.when.IsZero() && cur.when.Sub(prev.when) <= maxRateSpan
}

// genThroughput is tokens per second between two scrapes; 0 without a
// recent previous scrape, across a counter reset, or without elapsed time.
func genThroughput(prev, cur counters) float64 {
	if !prev.hasGen || !cur.hasGen || !recent(prev, cur) {
		return 0
	}
	dt := cur.when.Sub(prev.when).Seconds()
	d := cur.gen - prev.gen
	if dt <= 0 || d < 0 {
		return 0
	}
	return d / dt
}

// cacheHitRate is the share of prefix-cache queries that hit between two
// scrapes; 0 without a recent previous scrape, across a reset, or when
// nothing was queried. Capped at 1, which only a misbehaving engine would
// exceed.
func cacheHitRate(prev, cur counters) float64 {
	if !prev.hasCache || !cur.hasCache || !recent(prev, cur) {
		return 0
	}
	dq := cur.queries - prev.queries
	dh := cur.hits - prev.hits
	if dq <= 0 || dh < 0 {
		return 0
	}
	return min(dh/dq, 1)
}

// parseMetrics reads a Prometheus text exposition into engines sorted by
// rank. It checks what parsing needs (the required families exist, every
// engine has each of them once, integer gauges are integral, counters are
// finite and non-negative); consistency is domain.ValidateSnapshot's job.
func parseMetrics(body []byte) ([]engine, error) {
	fams, err := decodeFamilies(body)
	if err != nil {
		return nil, err
	}
	ss, err := collectSeries(fams)
	if err != nil {
		return nil, err
	}
	ranks := ss.ranks()
	engines := make([]engine, len(ranks))
	for i, rank := range ranks {
		if engines[i], err = ss.engine(rank); err != nil {
			return nil, err
		}
	}
	return engines, nil
}

// decodeFamilies parses a /metrics body with the Prometheus library and
// checks it is a vLLM server's.
func decodeFamilies(body []byte) (map[string]*dto.MetricFamily, error) {
	if len(bytes.TrimSpace(body)) == 0 {
		return nil, domain.Errorf(domain.CodeSourceFailed, "empty response body, want Prometheus text")
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		msg := domain.Shorten(err.Error(), 200)
		if strings.Contains(msg, "unexpected end of input stream") {
			// The text format ends every line with a newline; a body cut
			// anywhere else ends mid-line.
			return nil, domain.Errorf(domain.CodeSourceFailed, "truncated Prometheus text: %s", msg)
		}
		return nil, domain.Errorf(domain.CodeSourceFailed, "body is not Prometheus text: %s", msg)
	}
	if _, ok := fams[metricRunning]; !ok {
		return nil, domain.Errorf(domain.CodeSourceFailed, "no %s in the /metrics body: is this a vLLM server?", metricRunning)
	}
	return fams, nil
}

// vllmSeries is every family the source reads, per engine label, and the
// names under which this vLLM version published them.
type vllmSeries struct {
	running, waiting, usage, gen, hits, queries map[int64]float64
	usageName, hitsName, queriesName            string
	maxTokens                                   capacity
}

func collectSeries(fams map[string]*dto.MetricFamily) (vllmSeries, error) {
	ss := vllmSeries{
		usageName: firstPresent(fams, metricUsage),
		hitsName:  firstPresent(fams, metricHits), queriesName: firstPresent(fams, metricQueries),
	}
	var err error
	for _, f := range []struct {
		dst  *map[int64]float64
		name string
		typ  dto.MetricType
	}{
		{&ss.running, metricRunning, dto.MetricType_GAUGE},
		{&ss.waiting, metricWaiting, dto.MetricType_GAUGE},
		{&ss.usage, ss.usageName, dto.MetricType_GAUGE},
		{&ss.gen, metricGenTokens, dto.MetricType_COUNTER},
		{&ss.hits, ss.hitsName, dto.MetricType_COUNTER},
		{&ss.queries, ss.queriesName, dto.MetricType_COUNTER},
	} {
		if *f.dst, err = series(fams, f.name, f.typ); err != nil {
			return vllmSeries{}, err
		}
	}
	ss.maxTokens, err = cacheCapacity(fams)
	return ss, err
}

// ranks are the engine labels that carry any of the gauges, ascending.
func (ss vllmSeries) ranks() []int64 {
	var ranks []int64
	for _, m := range []map[int64]float64{ss.running, ss.waiting, ss.usage} {
		for r := range m {
			ranks = append(ranks, r)
		}
	}
	slices.Sort(ranks)
	return slices.Compact(ranks)
}

func (ss vllmSeries) engine(rank int64) (engine, error) {
	e := engine{rank: rank, maxTokens: ss.maxTokens.forRank(rank)}
	var err error
	if e.running, err = intGauge(ss.running, rank, "num_running_reqs", metricRunning); err != nil {
		return engine{}, err
	}
	if e.waiting, err = intGauge(ss.waiting, rank, "num_waiting_reqs", metricWaiting); err != nil {
		return engine{}, err
	}
	u, ok := ss.usage[rank]
	if !ok {
		return engine{}, invalid("rank %d: token_usage: no %s series for this engine", rank, ss.usageName)
	}
	e.usage = u
	if v, ok := ss.gen[rank]; ok {
		if err := checkCounter(rank, metricGenTokens, v); err != nil {
			return engine{}, err
		}
		e.counters.gen, e.counters.hasGen = v, true
	}
	h, hok := ss.hits[rank]
	q, qok := ss.queries[rank]
	if hok && qok {
		if err := checkCounter(rank, ss.hitsName, h); err != nil {
			return engine{}, err
		}
		if err := checkCounter(rank, ss.queriesName, q); err != nil {
			return engine{}, err
		}
		e.counters.hits, e.counters.queries, e.counters.hasCache = h, q, true
	}
	return e, nil
}

func firstPresent(fams map[string]*dto.MetricFamily, names []string) string {
	for _, n := range names {
		if _, ok := fams[n]; ok {
			return n
		}
	}
	return names[0]
}

// series returns a family's values by rank; a missing family is an empty
// map. An untyped family is accepted too, since an exposition without TYPE
// lines is still valid.
func series(fams map[string]*dto.MetricFamily, name string, want dto.MetricType) (map[int64]float64, error) {
	mf, ok := fams[name]
	if !ok {
		return nil, nil
	}
	if t := mf.GetType(); t != want && t != dto.MetricType_UNTYPED {
		return nil, domain.Errorf(domain.CodeSourceFailed, "%s is a %s, want a %s", name, t, want)
	}
	out := make(map[int64]float64, len(mf.GetMetric()))
	for _, m := range mf.GetMetric() {
		rank, err := rankOf(name, m)
		if err != nil {
			return nil, err
		}
		if _, dup := out[rank]; dup {
			return nil, invalid("rank %d: %s has more than one series for this engine", rank, name)
		}
		var v float64
		switch {
		case m.GetGauge() != nil:
			v = m.GetGauge().GetValue()
		case m.GetCounter() != nil:
			v = m.GetCounter().GetValue()
		default:
			v = m.GetUntyped().GetValue()
		}
		out[rank] = v
	}
	return out, nil
}

// rankOf reads the engine label; vLLM before the V1 engine ran one engine
// per server and published no label, which is rank 0.
func rankOf(name string, m *dto.Metric) (int64, error) {
	for _, lp := range m.GetLabel() {
		if lp.GetName() != engineLabel {
			continue
		}
		v := lp.GetValue()
		rank, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 0, invalid("%s: engine label %q is not an integer DP rank", name, domain.Shorten(v, 40))
		}
		return rank, nil
	}
	return 0, nil
}

func intGauge(values map[int64]float64, rank int64, field, name string) (int64, error) {
	v, ok := values[rank]
	if !ok {
		return 0, invalid("rank %d: %s: no %s series for this engine", rank, field, name)
	}
	switch {
	case math.IsNaN(v):
		return 0, invalid("rank %d: %s (%s) is NaN, want an integer", rank, field, name)
	case v != math.Trunc(v):
		return 0, invalid("rank %d: %s (%s) is a float (%v), want an integer", rank, field, name, v)
	case v < math.MinInt64 || v >= math.MaxInt64:
		// float64(math.MaxInt64) is 2^63, itself out of range.
		return 0, invalid("rank %d: %s (%s) %v is outside the int64 range", rank, field, name, v)
	}
	return int64(v), nil
}

func checkCounter(rank int64, name string, v float64) error {
	if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
		return invalid("rank %d: counter %s is %v, want a finite value ≥ 0", rank, name, v)
	}
	return nil
}

// capacity is max_total_num_tokens per rank from vllm:cache_config_info.
type capacity struct {
	byRank map[int64]int64
	all    int64 // from a series without an engine label; 0 if none
}

func (c capacity) forRank(rank int64) int64 {
	if v, ok := c.byRank[rank]; ok {
		return v
	}
	return c.all
}

// cacheCapacity reads num_gpu_blocks × block_size from the labels of
// vllm:cache_config_info. Labels that are absent, "None" or not positive
// integers leave the capacity unknown (0): vLLM sets num_gpu_blocks only
// once the KV cache is allocated, and a missing maximum is better than a
// failed pull.
func cacheCapacity(fams map[string]*dto.MetricFamily) (capacity, error) {
	c := capacity{byRank: map[int64]int64{}}
	mf, ok := fams[metricCacheConfig]
	if !ok {
		return c, nil
	}
	for _, m := range mf.GetMetric() {
		var blocks, blockSize int64
		hasEngine := false
		for _, lp := range m.GetLabel() {
			switch lp.GetName() {
			case "num_gpu_blocks":
				blocks = positive(lp.GetValue())
			case "block_size":
				blockSize = positive(lp.GetValue())
			case engineLabel:
				hasEngine = true
			}
		}
		tokens := int64(0)
		if blocks > 0 && blockSize > 0 && blocks <= math.MaxInt64/blockSize {
			tokens = blocks * blockSize
		}
		if !hasEngine {
			c.all = tokens
			continue
		}
		rank, err := rankOf(metricCacheConfig, m)
		if err != nil {
			return c, err
		}
		c.byRank[rank] = tokens
	}
	return c, nil
}

func positive(s string) int64 {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 {
		return 0
	}
	return n
}

func invalid(format string, args ...any) error {
	return domain.Errorf(domain.CodeInvalidSnapshot, format, args...)
}
